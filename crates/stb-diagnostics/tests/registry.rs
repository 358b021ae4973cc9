//! The error-code registry covers the whole workspace: every `STB-` code written in a
//! source or a doc page is registered, and docs/errors.md is the registry's table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stb_diagnostics::registry::{CODES, markdown_table};

fn workspace() -> PathBuf {
    // At run time, not `env!`: a binary compiled in another checkout sharing the target
    // directory would read that checkout's files.
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo when it runs a test"))
        .join("../..")
}

fn files(dir: &Path, extension: &str, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "snapshots")
            {
                continue;
            }
            files(&path, extension, into);
        } else if path.extension().is_some_and(|e| e == extension) {
            into.push(path);
        }
    }
}

/// Every `STB-FAMILY-NNN` in `text`.
fn codes_in(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = text[at..].find("STB-") {
        let start = at + offset;
        let mut end = start + 4;
        while end < bytes.len() && bytes[end].is_ascii_uppercase() {
            end += 1;
        }
        let family_end = end;
        if family_end > start + 4 && bytes.get(end) == Some(&b'-') {
            end += 1;
            let digits = end;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            if end - digits == 3 {
                found.insert(text[start..end].to_owned());
            }
        }
        at = family_end.max(start + 4);
    }
    found
}

#[test]
fn every_code_in_the_sources_and_docs_is_registered() {
    let registered: BTreeSet<&str> = CODES.iter().map(|(code, _)| *code).collect();
    let mut sources = Vec::new();
    files(&workspace().join("crates"), "rs", &mut sources);
    files(&workspace().join("docs"), "md", &mut sources);
    assert!(sources.len() > 50, "the workspace was found");
    let mut unregistered = Vec::new();
    for file in &sources {
        let text = std::fs::read_to_string(file).expect("readable");
        for code in codes_in(&text) {
            if !registered.contains(code.as_str()) {
                unregistered.push(format!("{code} in {}", file.display()));
            }
        }
    }
    assert!(
        unregistered.is_empty(),
        "unregistered codes: {unregistered:#?}"
    );
}

#[test]
fn docs_errors_md_is_the_registry() {
    let page = std::fs::read_to_string(workspace().join("docs/errors.md")).expect("docs/errors.md");
    assert!(
        page.contains(&markdown_table()),
        "docs/errors.md must hold exactly the registry's table (render it from stb_diagnostics::registry::markdown_table)"
    );
}

#[test]
fn the_scanner_finds_codes_and_nothing_else() {
    let found =
        codes_in("error[STB-BUILD-005]: x; `STB-SELECT-...`; STB-PLAN-01; STB-x-001 STB-LOCK-003");
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["STB-BUILD-005", "STB-LOCK-003"]
    );
}
