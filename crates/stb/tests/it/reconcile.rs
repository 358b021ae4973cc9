//! `stb reconcile` end to end: a change applied by hand (a materialized view recreated with
//! the project's new query) is adopted without a rebuild, for a direct model (its
//! fingerprint: `--changed` stops selecting it) and a virtual one (a `reconcile` record:
//! the plan is a no-op); views and tables whose shape differs are rejected with reasons.

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

use crate::deployments::{BIG, events_table, insert, mixed_project, ok_json, promote};

const PLAIN: &str = "MODEL (order_by [\"p\", \"o\"]);\nSELECT _replay_partition::UInt32 AS p, _replay_offset::UInt64 AS o, amount::UInt64 AS amount\nFROM __source(\"events\")\n";

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|e| e["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_change_applied_by_hand_is_adopted_without_a_rebuild() {
    let db = TestDatabase::create("reconcile");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = mixed_project(&db.name, None);
    let built = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    let first = built["virtual"]["deployment_id"]
        .as_str()
        .expect("deployment")
        .to_owned();
    promote(dir.path(), &first);

    // Both changes made in the project and applied by hand to the live views.
    std::fs::write(
        dir.path().join("pipelines/pl__d/plain.sql"),
        PLAIN.replace("amount::UInt64", "(amount * 2)::UInt64"),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("pipelines/pl__v/big.sql"),
        BIG.replace("amount > 10", "amount > 20"),
    )
    .expect("write");
    let db_name = &db.name;
    execute(&format!("DROP VIEW {db_name}.mv__plain"));
    execute(&format!(
        "CREATE MATERIALIZED VIEW {db_name}.mv__plain TO {db_name}.tbl__plain AS SELECT p, o, amount * 2 AS amount FROM {db_name}.events"
    ));
    execute(&format!("DROP VIEW {db_name}.mv__big__{first}"));
    execute(&format!(
        "CREATE MATERIALIZED VIEW {db_name}.mv__big__{first} TO {db_name}.tbl__big__{first} AS SELECT _replay_partition, _replay_offset, amount FROM {db_name}.tbl__clean__{first} WHERE amount > 20"
    ));
    // --changed looks at direct pipelines only, in a project that has both kinds.
    let changed = ok_json(dir.path(), &["plan", "--changed", "--json"]);
    assert_eq!(changed["entries"][0]["model"], "plain", "{changed}");

    // A dry run records nothing and says what it would adopt and why not the rest.
    let dry = ok_json(dir.path(), &["reconcile", "--json"]);
    assert_eq!(dry["applied"], false);
    let mut eligible = names(&dry["eligible"]);
    eligible.sort();
    assert_eq!(eligible, ["big", "clean", "plain"], "{dry}");
    assert_eq!(names(&dry["rejected"]), ["report"], "{dry}");
    assert!(
        dry["rejected"][0]["reasons"][0]
            .as_str()
            .is_some_and(|r| r.contains("redeploy the view")),
        "{dry}"
    );
    let plan = ok_json(
        dir.path(),
        &["plan", "--json", "--select", "pipeline:pl__v"],
    );
    assert_ne!(plan["rebuild_subtrees"], serde_json::json!([]), "{plan}");

    let applied = ok_json(
        dir.path(),
        &[
            "reconcile",
            "--select",
            "big",
            "--select",
            "plain",
            "--apply",
            "--json",
        ],
    );
    assert_eq!(applied["applied"], true, "{applied}");
    assert!(
        applied["record_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("reconcile_")),
        "{applied}"
    );
    let big = applied["eligible"]
        .as_array()
        .expect("eligible")
        .iter()
        .find(|e| e["model"] == "big")
        .expect("big");
    assert_eq!(big["mode"], "virtual");
    assert_eq!(big["deployment_id"], first.as_str());
    // The adopted state is the baseline: nothing to deploy, nothing changed.
    let plan = ok_json(
        dir.path(),
        &["plan", "--json", "--select", "pipeline:pl__v"],
    );
    assert_eq!(plan["rebuild_subtrees"], serde_json::json!([]), "{plan}");
    let output = crate::deployments::stb(dir.path(), &["plan", "--changed"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "No changed models to build."
    );
    // Live rows follow the adopted query.
    insert(&db.name, 20, 5);
    let count = |sql: String| execute(&format!("{sql} FORMAT TSV")).trim().to_owned();
    assert_eq!(
        count(format!(
            "SELECT count() FROM {db_name}.tbl__big WHERE _replay_offset >= 20"
        )),
        count(format!(
            "SELECT count() FROM {db_name}.events WHERE o >= 20 AND amount > 20"
        ))
    );

    // A table whose live columns differ from the project's is not adopted.
    std::fs::write(
        dir.path().join("pipelines/pl__d/plain.sql"),
        PLAIN.replace(" AS amount\n", " AS amount, 1::UInt8 AS flag\n"),
    )
    .expect("write");
    let refused = ok_json(dir.path(), &["reconcile", "--select", "plain", "--json"]);
    assert_eq!(names(&refused["rejected"]), ["plain"], "{refused}");
    assert!(
        refused["rejected"][0]["reasons"][0]
            .as_str()
            .is_some_and(|r| r.starts_with("columns differ")),
        "{refused}"
    );
}
