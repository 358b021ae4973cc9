//! What `stb plan` and `stb build` do, as a library: the CLI parses flags and renders text,
//! JSON and events; the dev server renders HTTP responses; both call these functions and
//! read the same typed values.
//!
//! Planning is a pure function of the project, its compiled form and what the warehouse
//! holds ([`direct::Reads`], read once at the edge); measuring the shrink guard and
//! building are the I/O steps after it.

pub mod activity;
pub mod admission;
pub mod audits;
pub mod build;
pub mod cluster;
pub mod data_diff;
pub mod deployments;
pub mod destruction;
pub mod direct;
pub mod error;
pub mod health;
pub mod messages;
pub mod model;
pub mod plan;
pub mod quality;
pub mod readiness;
pub mod reconcile;
pub mod runs;
pub mod schedule;
pub mod scope;
pub mod sql_tests;
pub mod staged;
pub mod status;
pub mod unlock;
pub mod validation;

pub use error::{EngineError, ErrorKind};

/// Discovers and compiles a project written from `files` into a temporary directory.
#[cfg(test)]
pub(crate) fn compiled_project<P: AsRef<str>, T: AsRef<str>>(
    files: &[(P, T)],
) -> (
    tempfile::TempDir,
    stb_project::Project,
    stb_compile::Compiled,
) {
    let dir = stb_test_support::project_dir(files);
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.path().to_path_buf()),
        cwd: dir.path().to_path_buf(),
        ..Default::default()
    })
    .unwrap_or_else(|d| panic!("{d:?}"));
    let compiled = stb_compile::compile(&project).unwrap_or_else(|d| panic!("{d:?}"));
    (dir, project, compiled)
}
