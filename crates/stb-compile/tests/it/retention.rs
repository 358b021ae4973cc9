//! Model retention precedence: model ttl > model retention > pipeline > project > model_ttl.

use crate::support::{SHOP, compile_files};

const CLEAN_TABLE: &str = "compiled/resources/models/pl__orders/orders_clean.table.sql";

fn project_with(extra: &str) -> String {
    format!(
        "name = \"shop\"\ndefault_target = \"dev\"\n{extra}\n[targets.dev]\ndatabase = \"shop_dev\"\n"
    )
}

fn ttl_of(overrides: &[(&str, &str)]) -> Option<String> {
    let compiled = compile_files(SHOP, overrides).unwrap_or_else(|d| panic!("{d:#?}"));
    compiled.files[CLEAN_TABLE]
        .lines()
        .find_map(|l| l.strip_prefix("TTL ").map(str::to_owned))
}

#[test]
fn project_then_pipeline_then_model() {
    let project = project_with(
        "[defaults.models]\nretention = { duration = \"90d\", timestamp_column = \"_replay_timestamp\" }",
    );
    assert_eq!(
        ttl_of(&[("streambuild_project.toml", &project)]).as_deref(),
        Some("_replay_timestamp + INTERVAL 90 DAY")
    );
    let pipeline = (
        "pipelines/pl__orders/pipeline.toml",
        "[defaults.models]\nretention = { duration = \"12h\", timestamp_column = \"_replay_timestamp\" }\n",
    );
    assert_eq!(
        ttl_of(&[("streambuild_project.toml", &project), pipeline]).as_deref(),
        Some("_replay_timestamp + INTERVAL 12 HOUR")
    );
    let disabled = (
        "pipelines/pl__orders/pipeline.toml",
        "[defaults.models]\nretention = false\n",
    );
    assert_eq!(
        ttl_of(&[("streambuild_project.toml", &project), disabled]),
        None,
        "false switches the project default off"
    );
}

#[test]
fn legacy_model_ttl_applies_last() {
    let project =
        project_with("[defaults]\nmodel_ttl = \"toDateTime(_replay_timestamp) + INTERVAL 1 DAY\"");
    assert_eq!(
        ttl_of(&[("streambuild_project.toml", &project)]).as_deref(),
        Some("toDateTime(_replay_timestamp) + INTERVAL 1 DAY")
    );
}

#[test]
fn skipped_defaults_are_recorded_in_the_manifest() {
    let project = project_with(
        "[defaults.models]\nretention = { duration = \"7d\", timestamp_column = \"event_time\", when_missing = \"skip\" }",
    );
    let compiled = compile_files(SHOP, &[("streambuild_project.toml", &project)])
        .unwrap_or_else(|d| panic!("{d:#?}"));
    assert!(!compiled.files[CLEAN_TABLE].contains("TTL"));
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("JSON");
    let retention = &manifest["models"]["orders_clean"]["retention"];
    assert_eq!(
        (retention["origin"].as_str(), retention["status"].as_str()),
        (Some("project"), Some("skipped"))
    );
}

#[test]
fn model_policies_in_toml_use_model_keys() {
    let pipeline = (
        "pipelines/pl__orders/pipeline.toml",
        "[defaults.models]\nretention = { duration = \"7d\", timestamp = \"broker\" }\n",
    );
    let diagnostics = compile_files(SHOP, &[pipeline]).expect_err("kafka-style keys");
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code).collect();
    assert!(
        codes.contains(&"STB-CONFIG-004") && codes.contains(&"STB-CONFIG-012"),
        "{diagnostics:#?}"
    );
}
