//! The local stack StreamBuild runs on a laptop or CI machine without Docker: a ClickHouse
//! server (the chDB engine behind our own HTTP front end) and a Kafka-protocol broker
//! (tansu). `stb local up | down | status` and the integration tests both drive it.

pub mod clickhouse;
mod error;
pub mod kafka;
pub mod layout;
pub mod probe;
pub mod process;
pub mod python;
pub mod scratch;
pub mod stack;

pub use error::{Component, LocalStackError};
pub use layout::Layout;
pub use stack::{StackOptions, StackStatus, down, status, up};

/// Receives progress messages from long operations (installing, starting).
pub trait Progress {
    /// A new phase of the work.
    fn step(&mut self, message: &str);
    /// A finer-grained line within the current phase.
    fn detail(&mut self, _message: &str) {}
}

/// Discards progress.
pub struct Silent;

impl Progress for Silent {
    fn step(&mut self, _message: &str) {}
}
