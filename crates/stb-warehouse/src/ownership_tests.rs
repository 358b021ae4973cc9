//! The lifecycle tables (`_streambuild_*`) have one owner: no crate but this one names one
//! in its code (their schema, writes and reads are here; a name in a comment is fine, and
//! `__streambuild_` aliases in generated SQL are not tables). Test code and the test
//! harness may read them to check what a build left.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, test files (`tests.rs`, `*_tests.rs`, `tests/`) left out.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, into);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            into.push(path);
        }
    }
}

/// The lines of `text` that name a lifecycle table in code: before the file's inline test
/// module, outside `//` comments.
fn naming_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .enumerate()
        .filter_map(|(at, line)| {
            let code = line.split("//").next().unwrap_or_default();
            let names = code
                .match_indices("_streambuild_")
                .any(|(index, _)| !code[..index].ends_with('_'));
            names.then(|| (at + 1, line.trim().to_owned()))
        })
        .collect()
}

#[test]
fn no_other_crate_names_a_lifecycle_table() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates)
        .expect("the workspace's crates")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        // This crate owns them; the test harness reads them to check what a build left.
        if name != "stb-warehouse" && name != "stb-test-support" {
            sources(&entry.path().join("src"), &mut files);
        }
    }
    assert!(files.len() > 100, "the sources were found: {}", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            naming_lines(&text)
                .into_iter()
                .map(move |(line, code)| format!("{}:{line}: {code}", file.display()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "lifecycle tables named outside stb-warehouse:\n{}",
        found.join("\n")
    );
}

#[test]
fn comments_aliases_and_test_modules_are_not_names() {
    let text = "// _streambuild_runs in a comment\nlet alias = \"__streambuild_actual\";\nlet t = \"_streambuild_runs\";\n#[cfg(test)]\nlet u = \"_streambuild_x\";\n";
    assert_eq!(
        naming_lines(text),
        [(3, "let t = \"_streambuild_runs\";".to_owned())]
    );
}
