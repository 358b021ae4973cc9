//! Model files: the `MODEL ( ... );` header and its grammar. The query itself is analysed
//! elsewhere and never regenerated.

pub mod file;
pub mod header;
pub mod keys;
pub mod text;
