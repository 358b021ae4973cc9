//! Planning for `stb plan` and `stb build`. Pure: everything here takes values and returns
//! decisions; the commands do the reading and the executing.

pub mod cluster;
pub mod cost;
pub mod deployment;
pub mod direct;
pub mod drift;
pub mod options;
pub mod replay;
pub mod replay_progress;
pub mod restore;
pub mod resume;
pub mod seed;
pub mod shrink;
pub mod sql_change;
pub mod validation;
pub mod virtual_plan;
pub mod watermark;
pub mod work;
pub mod workflow;
