//! A target on a cluster: table models it cannot hold are refused offline, where the
//! model says why.

use crate::support::{SHOP, compile_files};

const PROJECT: &str = "streambuild_project.toml";
const CUSTOMERS: &str = "pipelines/pl__orders/order_customers.sql";

/// The fixture's project file with `cluster` as its target's `[targets.dev.cluster]`.
fn on_cluster(cluster: &str) -> String {
    format!(
        "name = \"shop\"\ndefault_target = \"dev\"\n\n[defaults.sources.kafka]\nretention = {{ duration = \"7d\" }}\n\n[targets.dev]\ndatabase = \"shop_dev\"\n\n[targets.dev.cluster]\n{cluster}"
    )
}

/// Every problem as (code, location).
fn problems(overrides: &[(&str, &str)]) -> Vec<(String, String)> {
    compile_files(SHOP, overrides)
        .expect_err("should fail")
        .iter()
        .map(|d| {
            assert!(!d.hint.is_empty(), "{d:?}");
            (
                d.code.to_owned(),
                d.location
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn an_engine_without_a_replicated_form_is_refused_at_the_engine() {
    let customers = "MODEL (\n  engine \"Memory\",\n  order_by [\"order_id\"],\n);\nSELECT o.order_id::String AS order_id, o._replay_timestamp::DateTime64(3) AS _replay_timestamp\nFROM __ref(\"orders_clean\") AS o\n";
    for cluster in [
        "topology = \"on_cluster\"\nname = \"analytics\"\n",
        "topology = \"replicated\"\n",
        "topology = \"cloud\"\n",
        "topology = \"sharded\"\nname = \"analytics\"\nsharding_key = \"rand()\"\n",
    ] {
        let project = on_cluster(cluster);
        assert_eq!(
            problems(&[(PROJECT, &project), (CUSTOMERS, customers)]),
            [("STB-COMPILE-010".to_owned(), format!("{CUSTOMERS}:2:10"))],
            "{cluster}"
        );
    }
    // The same model compiles for a single server.
    compile_files(SHOP, &[(CUSTOMERS, customers)]).expect("one server holds a Memory table");
}

#[test]
fn a_sharded_target_needs_a_key_for_every_table_model() {
    let sharded = on_cluster("topology = \"sharded\"\nname = \"analytics\"\n");
    let found = problems(&[(PROJECT, &sharded)]);
    let models = [
        "pipelines/pl__customers/customer_names.sql:1:8",
        "pipelines/pl__orders/order_customers.sql:1:8",
        "pipelines/pl__orders/staging/orders_clean.sql:1:8",
    ];
    let mut at: Vec<&str> = found.iter().map(|(_, at)| at.as_str()).collect();
    at.sort_unstable();
    assert_eq!(at, models, "{found:?}");
    assert!(found.iter().all(|(code, _)| code == "STB-COMPILE-010"));

    // A key in each model, or one default for all, and the project compiles.
    let keyed = "MODEL (\n  engine \"ReplacingMergeTree(_replay_timestamp)\",\n  order_by [\"order_id\"],\n  sharding_key \"cityHash64(order_id)\",\n);\nSELECT o.order_id::String AS order_id, o._replay_timestamp::DateTime64(3) AS _replay_timestamp\nFROM __ref(\"orders_clean\") AS o\n";
    let found = problems(&[(PROJECT, &sharded), (CUSTOMERS, keyed)]);
    assert_eq!(found.len(), 2, "the keyed model is not reported: {found:?}");
    let defaulted =
        on_cluster("topology = \"sharded\"\nname = \"analytics\"\nsharding_key = \"rand()\"\n");
    compile_files(SHOP, &[(PROJECT, &defaulted), (CUSTOMERS, keyed)])
        .expect("every table model has a key");
}

#[test]
fn a_view_model_needs_no_key_and_cannot_name_one() {
    let view = "pipelines/pl__reporting/customer_counts.sql";
    let keyed_view = "MODEL (kind view, sharding_key \"rand()\");\nSELECT count()::UInt64 AS n FROM __ref(\"order_customers\")\n";
    let found = problems(&[(view, keyed_view)]);
    assert_eq!(
        found,
        [("STB-COMPILE-001".to_owned(), format!("{view}:1:19"))]
    );
}
