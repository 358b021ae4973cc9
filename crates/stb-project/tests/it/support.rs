//! Small fixture projects written to temporary directories.

use std::path::Path;

use stb_diagnostics::Diagnostic;
use stb_project::{DiscoverOptions, Project};

/// A valid minimal project; cases override or delete its files.
pub(crate) const BASE: &[(&str, &str)] = &[
    (
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n\n[targets.dev]\ndatabase = \"shop_dev\"\n",
    ),
    (
        "sources/orders.yml",
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"localhost:9092\"\n    topic: orders\n    replay_boundary:\n      mode: offsets\n",
    ),
    (
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT id::UInt64 AS id FROM __source(\"orders\")\n",
    ),
];

/// Marks a base file for deletion.
pub(crate) const DELETE: &str = "\u{0}delete";

pub(crate) fn write(dir: &Path, files: &[(&str, &str)]) {
    let mut all: Vec<(&str, &str)> = BASE.to_vec();
    for (path, text) in files {
        all.retain(|(p, _)| p != path);
        if *text != DELETE {
            all.push((path, text));
        }
    }
    for (path, text) in all {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        // A leading U+0001 asks for the text as Latin-1 bytes: a file that is not UTF-8.
        let bytes: Vec<u8> = match text.strip_prefix('\u{1}') {
            Some(latin1) => latin1
                .chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect(),
            None => text.as_bytes().to_vec(),
        };
        std::fs::write(full, bytes).expect("write");
    }
}

pub(crate) fn discover_in(dir: &Path, target: Option<&str>) -> Result<Project, Vec<Diagnostic>> {
    stb_project::discover(&DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        target: target.map(str::to_owned),
        vars: std::collections::BTreeMap::new(),
    })
    .map_err(stb_project_sorted)
}

fn stb_project_sorted(diagnostics: stb_diagnostics::Diagnostics) -> Vec<Diagnostic> {
    diagnostics.into_sorted()
}

pub(crate) fn discover_files(files: &[(&str, &str)]) -> Result<Project, Vec<Diagnostic>> {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), files);
    discover_in(dir.path(), None)
}

fn describe(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts discovery fails with exactly one diagnostic of `code` at `location`
/// (`file`, or `file:line:col`).
pub(crate) fn expect_error(files: &[(&str, &str)], code: &str, location: &str) {
    let diagnostics = match discover_files(files) {
        Ok(project) => {
            panic!("expected {code} at {location}, but discovery succeeded: {project:?}")
        }
        Err(diagnostics) => diagnostics,
    };
    let matching: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.code == code).collect();
    assert_eq!(
        matching.len(),
        1,
        "expected one {code}, got:\n{}",
        describe(&diagnostics)
    );
    let found = matching[0]
        .location
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert_eq!(
        found,
        location,
        "location of {code}:\n{}",
        describe(&diagnostics)
    );
    assert!(!matching[0].hint.is_empty(), "every diagnostic has a hint");
    assert_eq!(
        diagnostics.len(),
        1,
        "no cascade errors expected:\n{}",
        describe(&diagnostics)
    );
}
