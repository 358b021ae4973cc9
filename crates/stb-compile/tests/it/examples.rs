//! Every project under examples/ compiles, and compiling it twice gives identical bytes.

use crate::support::compile_dir;

#[test]
fn every_example_compiles_deterministically() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let dir = entry.expect("entry").path();
        if !dir.join("streambuild_project.toml").is_file() {
            continue;
        }
        let first = compile_dir(&dir).unwrap_or_else(|d| panic!("{}: {d:#?}", dir.display()));
        let second = compile_dir(&dir).unwrap_or_else(|d| panic!("{}: {d:#?}", dir.display()));
        assert_eq!(first, second, "{}", dir.display());
        assert!(first.models > 0);
        seen += 1;
    }
    assert!(
        seen >= 2,
        "examples/ holds the Kafka and adopted-table projects"
    );
}
