//! Discovery against small fixture projects on disk.

mod connection;
mod docs;
mod invalid;
mod no_panic;
mod sensor_runtime;
mod support;
mod typos;
mod valid;
