//! The compiler against fixture projects: artifacts, determinism, errors, and the engine.

mod artifacts;
mod audits;
mod cluster;
mod engine;
mod errors;
mod examples;
mod incremental;
mod macros;
mod no_panic;
mod planning;
mod retention;
mod sql_tests;
mod support;
