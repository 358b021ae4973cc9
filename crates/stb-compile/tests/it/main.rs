//! The compiler against fixture projects: artifacts, determinism, errors, and the engine.

mod artifacts;
mod engine;
mod errors;
mod retention;
mod support;
