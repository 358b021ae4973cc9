//! What `stb plan` and `stb build` do, as a library: the CLI parses flags and renders text,
//! JSON and events; the dev server renders HTTP responses; both call these functions and
//! read the same typed values.
//!
//! Planning is a pure function of the project, its compiled form and what the warehouse
//! holds ([`direct::Reads`], read once at the edge); measuring the shrink guard and
//! building are the I/O steps after it.

pub mod audits;
pub mod build;
pub mod deployments;
pub mod direct;
pub mod error;
pub mod readiness;
pub mod reconcile;
pub mod staged;
pub mod unlock;

pub use error::EngineError;
