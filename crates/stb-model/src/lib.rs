//! Model files: the `MODEL ( ... );` header and its grammar (the query itself is analysed
//! elsewhere and never regenerated), and the compiled models and sources as the planner
//! sees them.

pub mod docs;
pub mod file;
pub mod header;
pub mod keys;
pub mod planning;
pub mod text;
