//! A virtual pipeline on a managed Kafka source: staged, audited, promoted, listed, shown
//! and diffed; the stable view holds every message exactly once before and after each
//! promotion, live messages included.

use serde_json::Value;
use stb_test_support::kafka::create_topic;
use stb_test_support::{TestDatabase, execute, stack, unique_name};

use crate::build_kafka::{assert_exactly_in as assert_exactly, send};
use crate::deployments::{build, ok_json, promote, states};

const MODEL: &str = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'id')::UInt64 AS id\nFROM __source(\"orders\")\n";

fn project(database: &str, topic: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"shop\"\ndefault_target = \"dev\"\n[defaults]\npipeline_mode = \"virtual\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/orders.yml".to_owned(),
            format!(
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: {topic}\n    replay_boundary: {{mode: offsets}}\n    settings:\n      kafka_poll_timeout_ms: \"200\"\n      kafka_flush_interval_ms: \"200\"\n",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/order_lines.sql".to_owned(),
            MODEL.to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

/// A database, a three-partition topic holding messages 0..30, and the project over them.
fn thirty_messages(prefix: &str) -> (TestDatabase, String, tempfile::TempDir) {
    let db = TestDatabase::create(prefix);
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..30);
    let dir = project(&db.name, &topic);
    (db, topic, dir)
}

#[test]
fn a_managed_kafka_source_stages_audits_promotes_and_diffs_deployments() {
    let (db, topic, dir) = thirty_messages("deploy_kafka");
    let stable = format!("{}.tbl__order_lines", db.name);

    let first = build(dir.path(), &[]);
    assert_exactly(&format!("{stable}__{first}"), 30);
    let report = ok_json(dir.path(), &["deployment", "audit", "--json"]);
    let root = &report["roots"][0];
    assert_eq!(root["model"], "order_lines", "{report}");
    assert_eq!(root["replay_source"], format!("{}.raw__orders", db.name));
    assert_eq!(root["partitions_compared"], 3, "{report}");
    assert_eq!(root["partitions_missing"], 0, "{report}");
    assert_eq!(report["assessment"], "ready", "{report}");
    promote(dir.path(), &first);
    let shown = ok_json(dir.path(), &["deployment", "show", &first, "--json"]);
    assert_eq!(shown["deployment"]["state"], "active", "{shown}");
    assert_eq!(
        shown["deployment"]["active_binding_names"],
        serde_json::json!(["tbl__order_lines"]),
        "{shown}"
    );
    // Live messages reach readers through the resumed landing and the active copy.
    send(&topic, 30..40);
    assert_exactly(&stable, 40);

    // A column added: the second deployment holds all 40 messages beside production.
    std::fs::write(
        dir.path().join("pipelines/pl__shop/order_lines.sql"),
        MODEL.replace(
            "::UInt64 AS id\n",
            "::UInt64 AS id, (JSONExtractUInt(kafka_value, 'id') * 2)::UInt64 AS doubled\n",
        ),
    )
    .expect("write");
    let second = build(dir.path(), &[]);
    assert_exactly(&format!("{stable}__{second}"), 40);
    let report = ok_json(dir.path(), &["deployment", "audit", &second, "--json"]);
    assert_eq!(report["roots"][0]["staged_rows"], 40, "{report}");
    assert_eq!(report["roots"][0]["active_rows"], 40, "{report}");
    assert_eq!(report["assessment"], "ready", "{report}");
    let diff = ok_json(dir.path(), &["deployment", "diff", &second, "--json"]);
    let relation = &diff["diff"]["relations"][0];
    assert_eq!(relation["name"], "tbl__order_lines", "{diff}");
    assert_eq!(relation["status"], "changed", "{diff}");
    assert_eq!(relation["columns_added"], serde_json::json!(["doubled"]));
    promote(dir.path(), &second);
    send(&topic, 40..50);
    assert_exactly(&stable, 50);
    // An added column with no replay_on_change is seeded: the rows the active copy held
    // keep their default, what arrived since is computed.
    let doubled = execute(&format!(
        "SELECT countIf(doubled = id * 2 OR doubled = 0), countIf(id >= 40 AND doubled = id * 2) FROM {stable} FORMAT TSV"
    ));
    assert_eq!(doubled.trim(), "50\t10");
    assert_eq!(
        states(dir.path()),
        [
            (second.clone(), "active".to_owned()),
            (first.clone(), "superseded".to_owned())
        ]
    );
    let listed: Value = ok_json(dir.path(), &["deployment", "list", "--json"]);
    assert_eq!(listed["database"], db.name.as_str());
}

/// The reference's fixtures read a Kafka source with `__ref`, as a model is read: a
/// virtual build realises that form too (its view once had nothing after FROM) and
/// stages every message once.
#[test]
fn a_source_read_through_ref_is_staged_like_one_read_through_source() {
    let (db, topic, dir) = thirty_messages("deploy_kafka_ref");
    std::fs::write(
        dir.path().join("pipelines/pl__shop/order_lines.sql"),
        MODEL.replace("__source(\"orders\")", "__ref(\"orders\")"),
    )
    .expect("write");
    let id = build(dir.path(), &[]);
    let copy = format!("{}.tbl__order_lines__{id}", db.name);
    assert_exactly(&copy, 30);
    promote(dir.path(), &id);
    send(&topic, 30..40);
    assert_exactly(&format!("{}.tbl__order_lines", db.name), 40);
}

/// Ten virtual builds while a producer sends: greenfield, full refreshes and partial
/// deployments (a view changed), each promoted. Once the producer stops, the stable view and every copy any
/// deployment made hold each message exactly once (they all kept receiving live rows).
#[test]
fn virtual_builds_while_a_producer_sends_deliver_every_message_exactly_once() {
    let db = TestDatabase::create("deploy_kafka_live");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..30);
    let dir = project(&db.name, &topic);
    let report = "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"order_lines\")\n";
    let report_path = dir.path().join("pipelines/pl__shop/report.sql");
    std::fs::write(&report_path, report).expect("write");
    let producer = crate::build_kafka::Producing::start(&topic, 30);
    let mut copies = Vec::new();
    for round in 0..10 {
        let partial = round == 3 || round == 7;
        let id = if round == 0 {
            build(dir.path(), &[])
        } else if partial {
            // A view-only change: a partial deployment that copies no table.
            let counted = if round == 3 {
                "uniqExact(id)"
            } else {
                "count()"
            };
            std::fs::write(&report_path, report.replace("count()", counted)).expect("write");
            build(dir.path(), &[])
        } else {
            build(dir.path(), &["--select", "order_lines", "--full-refresh"])
        };
        promote(dir.path(), &id);
        if !partial {
            copies.push(format!("{}.tbl__order_lines__{id}", db.name));
        }
    }
    let (sent, elapsed) = producer.stop();
    eprintln!(
        "10 virtual builds while producing: {sent} messages in {:.1} s",
        elapsed.as_secs_f64()
    );
    assert_exactly(&format!("{}.tbl__order_lines", db.name), sent);
    for copy in &copies {
        assert_exactly(copy, sent);
    }
    let counted = execute(&format!(
        "SELECT n FROM {}.view__report FORMAT TSV",
        db.name
    ));
    assert_eq!(counted.trim(), sent.to_string());
}
