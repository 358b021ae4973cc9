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

#[test]
fn aggregating_models_are_not_replay_anchors() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/kafka_orders");
    let compiled = compile_dir(&dir).unwrap_or_else(|d| panic!("{d:#?}"));
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("JSON");
    let totals = &manifest["models"]["order_totals"]["replay"];
    assert_eq!(
        (
            totals["aggregate"].as_bool(),
            totals["anchor_eligible"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let clean = &manifest["models"]["orders_clean"]["replay"];
    assert_eq!(
        (
            clean["lineage_preserved"].as_bool(),
            clean["anchor_eligible"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(
        manifest["pipelines"]["pl__orders"]["replay_lineage_mode"],
        "offsets"
    );
}
