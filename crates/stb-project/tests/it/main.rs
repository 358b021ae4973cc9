//! Discovery against small fixture projects on disk.

mod invalid;
mod no_panic;
mod support;
mod valid;
