//! `stb deployment audit` end to end: readiness of staged copies against the active ones
//! and their sources, SQL audits run on the deployment's copies (not on what readers see),
//! the choice of deployment, and a copy that falls behind its source.

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

use crate::deployments::{
    BIG, build, error_code, events_table, insert, ok_json, project, promote, stb,
};

/// Written for the second deployment's `big` (amounts over 20): the first one fails it.
const AUDIT: &str = "AUDIT (name big_over_twenty, severity error);\nSELECT amount FROM __ref(\"big\") WHERE amount <= 20\n";

fn audit(dir: &std::path::Path, id: Option<&str>) -> Value {
    let mut args = vec!["deployment", "audit", "--json"];
    args.extend(id);
    ok_json(dir, &args)
}

fn root<'a>(report: &'a Value, model: &str) -> &'a Value {
    report["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .find(|r| r["model"] == model)
        .unwrap_or_else(|| panic!("no root {model}: {report}"))
}

#[test]
fn a_staged_deployment_is_judged_on_its_own_copies() {
    let db = TestDatabase::create("deploy_audit");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);
    std::fs::create_dir_all(dir.path().join("audits")).expect("audits");
    std::fs::write(dir.path().join("audits/big.sql"), AUDIT).expect("write");

    // Greenfield: the copy holds every source row, caught up in every partition; the audit
    // reads the staged big (amounts over 10) and fails, so the deployment is not ready.
    let first = build(dir.path(), &[]);
    let built = execute(&format!(
        "SELECT mode, outcome FROM {}._streambuild_invocations WHERE command = 'build' AND deployment_id = '{first}' FORMAT TSV",
        db.name
    ));
    assert_eq!(
        built.trim(),
        "virtual_environment\tsucceeded",
        "the build's record names its deployment"
    );
    let report = audit(dir.path(), None);
    assert_eq!(report["deployment_id"], first.as_str(), "{report}");
    assert_eq!(report["assessment"], "not_ready", "{report}");
    let clean = root(&report, "clean");
    assert_eq!(clean["assessment"], "ready", "{report}");
    assert_eq!(clean["boundary_mode"], "offsets");
    assert_eq!(clean["staged_rows"], 60);
    assert_eq!(clean["replay_source_rows"], 60);
    assert_eq!(clean["replay_source"], format!("{}.events", db.name));
    assert_eq!(clean["active_relation"], Value::Null);
    assert_eq!(clean["partitions_compared"], 3);
    assert_eq!(clean["partitions_missing"], 0);
    assert_eq!(clean["partitions_lagging"], 0);
    assert_eq!(clean["lag_seconds"], 0.0);
    assert_eq!(report["audits"][0]["name"], "big_over_twenty");
    assert_eq!(report["audits"][0]["status"], "failed", "{report}");
    assert!(
        report["reasons"][0]
            .as_str()
            .is_some_and(|r| r.starts_with("audit big_over_twenty found")),
        "{report}"
    );
    // A report, not a gate: it exits 0; promoting stays the operator's decision.
    promote(dir.path(), &first);

    // A partial deployment: big reads clean's active copy; the audit passes on the staged
    // big while readers' big still fails it.
    std::fs::write(
        dir.path().join("pipelines/pl__v/big.sql"),
        BIG.replace("amount > 10", "amount > 20"),
    )
    .expect("write");
    let second = build(dir.path(), &[]);
    let report = audit(dir.path(), None);
    assert_eq!(report["deployment_id"], second.as_str(), "{report}");
    assert_eq!(report["audits"][0]["status"], "passed", "{report}");
    let live = stb(dir.path(), &["audit", "--json"]);
    assert!(!live.status.success(), "the live big fails the audit");
    let big = root(&report, "big");
    assert_eq!(
        big["replay_source"],
        format!("{}.tbl__clean__{first}", db.name),
        "{report}"
    );
    assert_eq!(big["active_relation"], format!("tbl__big__{first}"));
    let (staged, active) = (
        big["staged_rows"].as_u64().expect("staged"),
        big["active_rows"].as_u64().expect("active"),
    );
    assert!(staged * 2 < active, "{report}");
    // Fewer rows than half the active copy's: a caution, not a refusal.
    assert_eq!(big["assessment"], "caution", "{report}");
    assert_eq!(report["assessment"], "caution", "{report}");
    let recorded = execute(&format!(
        "SELECT count() FROM {0}._streambuild_node_results WHERE trigger = 'deployment' AND node_name = 'big_over_twenty' AND invocation_id IN (SELECT invocation_id FROM {0}._streambuild_invocations WHERE deployment_id = '{second}') FORMAT TSV",
        db.name
    ));
    assert_eq!(recorded.trim(), "1", "the audit's result is kept");

    // Two staged deployments: which one is meant must be said.
    let third = build(dir.path(), &["--select", "clean", "--full-refresh"]);
    let output = stb(dir.path(), &["deployment", "audit", "--json"]);
    assert!(!output.status.success());
    let refused: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(refused["error"]["code"], "STB-DEPLOY-001");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("ambiguous"), "{message}");
    assert!(
        message.contains(&second) && message.contains(&third),
        "{message}"
    );
    assert_eq!(
        error_code(
            dir.path(),
            &["deployment", "audit", "20261130T000000Z_nope", "--json"]
        ),
        "STB-DEPLOY-001"
    );

    // A copy missing the newest source rows is behind its source: not ready once the
    // newest source row is more than the maximum lag (30 s) past the copy's newest.
    execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, 20 + intDiv(number, 3), now64(3, 'UTC') + INTERVAL 1 MINUTE, 1 FROM numbers(3)",
        db.name
    ));
    execute(&format!(
        "DELETE FROM {}.tbl__clean__{third} WHERE _replay_offset = 20",
        db.name
    ));
    let report = audit(dir.path(), Some(&third));
    let clean = root(&report, "clean");
    assert_eq!(clean["partitions_lagging"], 3, "{report}");
    assert_eq!(clean["max_offset_gap"], 1, "{report}");
    assert!(
        clean["lag_seconds"].as_f64().is_some_and(|lag| lag > 30.0),
        "{report}"
    );
    assert_eq!(clean["assessment"], "not_ready", "{report}");
    assert_eq!(report["assessment"], "not_ready", "{report}");
}
