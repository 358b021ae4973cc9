//! Direct builds at the warehouse edge: running the planned workflow statement by
//! statement, capturing boundaries and rendering replays, and writing what happened to the
//! lifecycle tables. The decisions themselves live in `stb-plan`.

pub mod cost;
pub mod execute;
mod replay_watch;
mod secrets;
pub mod shrink;
pub mod undo;
