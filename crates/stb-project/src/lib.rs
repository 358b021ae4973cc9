//! Project discovery: everything StreamBuild learns from a project directory without
//! opening a connection.

pub mod tree;
