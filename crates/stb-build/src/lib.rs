//! Direct builds at the warehouse edge: running the planned workflow statement by
//! statement, capturing boundaries and rendering replays, and writing what happened to the
//! lifecycle tables. The decisions themselves live in `stb-plan`.

mod chunked;
pub mod cost;
pub mod execute;
pub mod measure;
mod replay_watch;
mod secrets;
pub mod shrink;
mod side_by_side;
pub mod suspend;
pub mod undo;
