//! `stb compile --validate`: every model's SQL and table checked offline, on a scratch
//! embedded engine, with no warehouse reachable; what cannot be checked offline is listed
//! with why (issue 33).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// The demo project's files, as they are in the repository.
fn demo_files() -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(root, &path, files);
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let relative = path.strip_prefix(root).expect("under the root");
                files.push((relative.to_string_lossy().into_owned(), text));
            }
        }
    }
    let root = stb_test_support::package_dir().join("../../examples/orders");
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    files
}

/// `stb compile --validate --json` with no warehouse: its address points nowhere.
fn validate(dir: &Path, venv: Option<&Path>) -> (Output, Value) {
    // The embedded engine's environment is the test stack's.
    let stack = stb_test_support::stack();
    let venv = venv.map_or_else(|| stack.layout.venv_dir.clone(), Path::to_path_buf);
    let output = assert_cmd::Command::cargo_bin("stb")
        .expect("the stb binary")
        .args(["compile", "--validate", "--json", "--project-dir"])
        .arg(dir)
        .env("STB_VENV", venv)
        .env("STREAMBUILD_CLICKHOUSE_HOST", "127.0.0.1")
        .env("STREAMBUILD_CLICKHOUSE_PORT", "1")
        .output()
        .expect("stb runs");
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, json)
}

#[test]
fn the_demo_is_checked_offline_and_a_typo_is_located() {
    let dir = stb_test_support::project_dir(&demo_files());
    let (output, valid) = validate(dir.path(), None);
    assert!(output.status.success(), "{valid}");
    let validation = &valid["validation"];
    // Five models (a query and a table each) and the Kafka landing.
    assert_eq!(validation["checked"], 11, "{valid}");
    assert_eq!(validation["unchecked"], serde_json::json!([]), "{valid}");
    assert!(
        validation["engine_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("26.")),
        "{valid}"
    );
    assert!(
        valid["artifacts"].as_array().is_some_and(|a| !a.is_empty()),
        "the artifacts are written too: {valid}"
    );

    let model = dir.path().join("pipelines/pl__orders/paid_orders.sql");
    let text = std::fs::read_to_string(&model).expect("read");
    std::fs::write(
        &model,
        text.replace("  amount_cents::UInt64", "  amount_centz::UInt64"),
    )
    .expect("write");
    let (output, refused) = validate(dir.path(), None);
    assert_eq!(output.status.code(), Some(1), "{refused}");
    let error = &refused["errors"][0];
    assert_eq!(error["code"], "STB-PLAN-006", "{refused}");
    assert_eq!(
        error["location"]["file"], "pipelines/pl__orders/paid_orders.sql",
        "{refused}"
    );
    assert_eq!(error["location"]["line"], 9, "{refused}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("amount_centz")),
        "{refused}"
    );
    // ClickHouse's words without its exception prefix or the query it rewrote.
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("(ClickHouse UNKNOWN_IDENTIFIER)")
                && !m.contains("DB::Exception")
                && !m.contains("In scope")),
        "{refused}"
    );
}

#[test]
fn an_adopted_input_is_listed_as_not_checked_offline_with_why() {
    let mut files = demo_files();
    files.push((
        "sources/side.yml".into(),
        "sources:\n  - name: side_feed\n    kind: stream_table\n    table_name: side_events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n".into(),
    ));
    files.push((
        "pipelines/pl__side/side.sql".into(),
        "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __source(\"side_feed\")\n".into(),
    ));
    files.push((
        "pipelines/pl__side/side_totals.sql".into(),
        "MODEL (order_by [\"n\"]);\nSELECT count()::UInt64 AS n FROM __ref(\"side\")\n".into(),
    ));
    let dir = stb_test_support::project_dir(&files);
    let (output, valid) = validate(dir.path(), None);
    assert!(output.status.success(), "{valid}");
    let unchecked = &valid["validation"]["unchecked"];
    assert_eq!(unchecked.as_array().map(Vec::len), Some(1), "{valid}");
    assert_eq!(unchecked[0]["model"], "side", "{valid}");
    assert!(
        unchecked[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("side_events")
                && r.contains("whose columns only the target's warehouse knows")),
        "{valid}"
    );
    // Its reader is checked against its typed table.
    assert_eq!(valid["validation"]["checked"], 11 + 3, "{valid}");
}

#[test]
fn without_the_engine_installed_it_says_how_to_get_it() {
    let dir = stb_test_support::project_dir(&demo_files());
    let missing = tempfile::tempdir().expect("dir");
    let (output, refused) = validate(dir.path(), Some(&missing.path().join("venv")));
    assert_eq!(output.status.code(), Some(1), "{refused}");
    assert_eq!(refused["error"]["code"], "STB-LOCAL-009", "{refused}");
    assert!(
        refused["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("stb local up")),
        "{refused}"
    );
}

/// A chain of `count` table models after `paid_orders`, in a pipeline of its own; the
/// model at `side_reader` also joins the model at `side` (a stand-in made in an earlier
/// session of the validation, so made again in its own).
fn long_chain(count: usize, side: usize, side_reader: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| {
            let input = if i == 0 {
                "paid_orders".to_owned()
            } else {
                format!("c{}", i - 1)
            };
            let join = if i == side_reader {
                format!(" AS d LEFT JOIN __ref(\"c{side}\", ref_type='reference') AS s ON d.order_id = s.order_id")
            } else {
                String::new()
            };
            let select = if i == side_reader {
                "d.order_id::String AS order_id, d.amount_cents::UInt64 AS amount_cents"
            } else {
                "order_id::String AS order_id, amount_cents::UInt64 AS amount_cents"
            };
            (
                format!("pipelines/pl__chain/c{i}.sql"),
                format!(
                    "MODEL (order_by [\"order_id\"]);\nSELECT {select}\nFROM __ref(\"{input}\"){join}\n"
                ),
            )
        })
        .collect()
}

#[test]
fn a_large_project_is_checked_in_bounded_sessions_and_every_refusal_is_located() {
    // 260 models: the validation's tables are made in sessions of 100, its queries go
    // many to a request with their stand-ins inline, and a model late in the chain reads
    // one made two sessions before it.
    let mut chain = long_chain(260, 3, 240);
    // A query the inline stand-ins cannot judge (`FINAL` needs an engine that has it):
    // it is checked again against its upstream's real table, and passes.
    chain[99].1 = chain[99].1.replace(
        "[\"order_id\"]",
        "[\"order_id\"], engine \"ReplacingMergeTree()\"",
    );
    chain[100].1 = chain[100]
        .1
        .replace("__ref(\"c99\")", "__ref(\"c99\") FINAL");
    assert!(chain[100].1.contains("FINAL") && chain[99].1.contains("Replacing"));
    let mut files = demo_files();
    files.extend(chain.iter().cloned());
    let dir = stb_test_support::project_dir(&files);
    let (output, valid) = validate(dir.path(), None);
    assert!(output.status.success(), "{valid}");
    // The demo's 11 checks, and a query and a table for each model of the chain.
    assert_eq!(valid["validation"]["checked"], 11 + 2 * 260, "{valid}");

    // A typo early, one in the model that reads across sessions, and an engine the
    // warehouse refuses late in the chain (a sum over a String): each refused, located in
    // its own file, nothing else.
    let break_model = |index: usize, from: &str, to: &str| {
        let path = dir.path().join(format!("pipelines/pl__chain/c{index}.sql"));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains(from), "{text}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    };
    break_model(7, "amount_cents::", "amount_centz::");
    break_model(240, "s.order_id", "s.order_idd");
    break_model(
        250,
        "[\"order_id\"]",
        "[\"order_id\"], engine \"SummingMergeTree(order_id)\"",
    );
    let (output, refused) = validate(dir.path(), None);
    assert_eq!(output.status.code(), Some(1), "{refused}");
    let located: Vec<(String, u64)> = refused["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            assert_eq!(e["code"], "STB-PLAN-006", "{refused}");
            (
                e["location"]["file"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["location"]["line"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        located,
        // Diagnostics are listed by file.
        vec![
            ("pipelines/pl__chain/c240.sql".to_owned(), 3),
            ("pipelines/pl__chain/c250.sql".to_owned(), 1),
            ("pipelines/pl__chain/c7.sql".to_owned(), 2),
        ],
        "{refused}"
    );
    assert!(
        refused["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("order_idd")),
        "{refused}"
    );
}
