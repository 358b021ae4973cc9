//! Project discovery: everything StreamBuild learns from a project directory without
//! opening a connection: configuration, targets, pipelines, models, sources, macros.

pub mod access;
pub mod cluster;
pub mod codes;
pub mod connection;
mod discover;
pub mod interpolation;
pub mod local_config;
pub mod macros;
pub mod parallel;
pub mod pipelines;
pub mod policies;
pub mod project_config;
pub mod python_worker;
mod reader;
pub mod refs;
pub mod scaffold;
pub mod sensors;
pub mod sources;
pub mod sql_macros;
pub mod tree;

use std::path::Path;

pub use discover::{
    DiscoverOptions, MacroSummary, Project, ProjectDefaults, discover, project_root, vars_from_json,
};
pub use reader::{is_identifier, parse_duration};
use stb_diagnostics::{Diagnostic, Diagnostics, Location};

/// Parses TOML text, reporting a syntax error at its position in `file`.
pub(crate) fn parse_toml_file(
    file: &str,
    text: &str,
    diagnostics: &mut Diagnostics,
) -> Option<tree::Node> {
    match tree::parse_toml(text) {
        Ok(root) => Some(root),
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::CONFIG_SYNTAX,
                    format!("invalid TOML: {}", error.message),
                    "fix the TOML syntax at this position",
                )
                .at(Location::at(file, error.position)),
            );
            None
        }
    }
}

/// Reads a UTF-8 text file, reporting unreadable or non-UTF-8 files at `relative`.
pub(crate) fn read_text(
    path: &Path,
    relative: &str,
    diagnostics: &mut Diagnostics,
) -> Option<String> {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Some(text),
            Err(error) => {
                diagnostics.push(
                    Diagnostic::new(
                        codes::DISCOVER_UNREADABLE,
                        format!(
                            "{relative} is not valid UTF-8 (byte {})",
                            error.utf8_error().valid_up_to()
                        ),
                        "save the file as UTF-8",
                    )
                    .at(Location::file(relative)),
                );
                None
            }
        },
        Err(error) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_UNREADABLE,
                    format!("cannot read {relative}: {error}"),
                    "check the file's permissions",
                )
                .at(Location::file(relative)),
            );
            None
        }
    }
}
