//! Discovery against small fixture projects on disk.

mod invalid;
mod support;
