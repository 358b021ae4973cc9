//! Analysis of the author's ClickHouse SQL. Nothing here re-prints a query: analyses return
//! byte offsets and verbatim slices, so the compiler can splice into the author's bytes.

pub mod aggregates;
pub mod contract;
pub mod lexer;
pub mod lineage;
pub mod types;

pub use contract::{ContractError, LexicalAnalyzer, OutputColumn, QueryAnalyzer, output_names};
