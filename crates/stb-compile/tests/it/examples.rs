//! Every project under examples/ compiles, and compiling it twice gives identical bytes.

use crate::support::compile_dir;

#[test]
fn every_example_compiles_deterministically() {
    let examples = stb_test_support::package_dir().join("../../examples");
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
    let dir = stb_test_support::package_dir().join("../../examples/kafka_orders");
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

#[test]
fn the_dag_holds_tests_and_audits_and_sources_name_their_bare_relation() {
    let dir = stb_test_support::package_dir().join("../../examples/orders");
    let compiled = compile_dir(&dir).unwrap_or_else(|d| panic!("{d:#?}"));
    let dag: serde_json::Value =
        serde_json::from_str(&compiled.files["streambuild_dag.json"]).expect("JSON");
    let nodes: Vec<(String, String)> = dag["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap_or("").to_owned(),
                n["type"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let kinds: Vec<&str> = nodes.iter().map(|(_, kind)| kind.as_str()).collect();
    // Sources, then models, then tests, then audits.
    let first = |kind: &str| kinds.iter().position(|k| *k == kind).expect(kind);
    let last = |kind: &str| kinds.iter().rposition(|k| *k == kind).expect(kind);
    assert!(
        last("source") < first("model")
            && last("model") < first("test")
            && last("test") < first("audit"),
        "{kinds:?}"
    );
    assert!(
        nodes.contains(&(
            "test:only_paid_events_become_paid_orders".into(),
            "test".into()
        )),
        "{nodes:?}"
    );
    assert!(
        nodes.contains(&("audit:revenue_matches_paid_orders".into(), "audit".into())),
        "{nodes:?}"
    );
    let edges: Vec<(String, String, String)> = dag["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                e["from_id"].as_str().unwrap_or("").to_owned(),
                e["to_id"].as_str().unwrap_or("").to_owned(),
                e["edge_type"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for edge in [
        (
            "model:paid_orders",
            "test:only_paid_events_become_paid_orders",
            "test",
        ),
        (
            "model:customer_revenue",
            "audit:revenue_matches_paid_orders",
            "audit",
        ),
        (
            "model:paid_orders",
            "audit:revenue_matches_paid_orders",
            "audit",
        ),
    ] {
        assert!(
            edges.contains(&(edge.0.into(), edge.1.into(), edge.2.into())),
            "{edge:?} in {edges:?}"
        );
    }
    let mut sorted = edges.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), edges.len(), "no duplicate edge");
    let manifest: serde_json::Value =
        serde_json::from_str(&compiled.files["manifest.json"]).expect("JSON");
    let source = &manifest["sources"]["orders"];
    assert_eq!(
        (
            source["relation_name"].as_str(),
            source["database"].as_str()
        ),
        (Some("raw__orders"), Some("orders_demo"))
    );
    assert_eq!(
        manifest["models"]["paid_orders"]["relation_name"],
        "tbl__paid_orders"
    );
}
