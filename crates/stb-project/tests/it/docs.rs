//! docs/project.md stays true: its example files form a project that discovers cleanly,
//! and its error-code table lists exactly the codes discovery can report.

use crate::support::discover_in;

const DOC: &str = include_str!("../../../../docs/project.md");

/// Every fenced block preceded by `<!-- file: PATH -->`.
fn example_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut lines = DOC.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .trim()
            .strip_prefix("<!-- file: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().expect("a fenced block follows the marker");
        assert!(
            fence.starts_with("```"),
            "{path}: expected a fenced block, got {fence}"
        );
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        files.push((path.to_owned(), body.join("\n") + "\n"));
    }
    files
}

#[test]
fn the_documented_project_discovers_as_described() {
    let files = example_files();
    assert!(files.len() >= 8, "the page documents a whole project");
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in &files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
    }
    let project = discover_in(dir.path(), None).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(project.target, "mine", "the local file picks the target");
    assert_eq!(project.database.as_deref(), Some("analytics_dev_alice"));
    assert_eq!(project.max_pipelines, Some(20));
    let orders = project
        .pipelines
        .iter()
        .find(|p| p.name == "pl__orders")
        .expect("pl__orders");
    assert_eq!(orders.source.as_deref(), Some("orders"));
    assert_eq!(
        orders.protection.as_ref().map(|p| p.confirmation.as_str()),
        Some("orders-prod")
    );
    let macros: Vec<(&str, u32)> = project
        .macros
        .iter()
        .map(|m| (m.name.as_str(), m.line))
        .collect();
    assert_eq!(macros, [("pipeline_name", 4)]);
    let prod = discover_in(dir.path(), Some("prod")).expect("prod");
    assert_eq!(
        (prod.database.as_deref(), prod.max_pipelines),
        (Some("analytics_prod"), Some(10))
    );
}

/// Discovery's codes are the workspace registry's, with the same meanings.
#[test]
fn discovery_codes_are_registered() {
    for (code, meaning) in stb_project::codes::ALL {
        let registered = stb_diagnostics::registry::CODES
            .iter()
            .find(|(c, _)| c == code)
            .unwrap_or_else(|| panic!("{code} is not in the registry"));
        assert_eq!(registered.1, *meaning, "{code}");
    }
}

#[test]
fn the_error_code_table_is_complete() {
    for (code, meaning) in stb_project::codes::ALL {
        let row = format!("| {code} |");
        let line = DOC
            .lines()
            .find(|l| l.starts_with(&row))
            .unwrap_or_else(|| panic!("{code} is not documented"));
        let documented = line
            .trim_start_matches(&row)
            .trim()
            .trim_end_matches('|')
            .trim()
            .replace('`', "");
        assert_eq!(documented, meaning.replace('`', ""), "{code}");
    }
}
