//! `stb test` and `stb audit` against the local stack: multiset comparisons that report
//! the differing rows, audits that fail, warn or wait for their relations.

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

fn project(database: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml",
            format!("name = \"quality\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/payments.yml",
            "sources:\n  - name: payments\n    kind: stream_table\n    table_name: payments_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: ts\n".to_owned(),
        ),
        (
            "pipelines/pl__pay/clean.sql",
            "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id, amount::Int64 AS amount, ts::DateTime64(3, 'UTC') AS _replay_timestamp\nFROM __source(\"payments\")\n".to_owned(),
        ),
        (
            "tests/clean.sql",
            "TEST (name keeps_every_payment);\nWITH\n  __source__payments AS (\n    SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS ts\n    UNION ALL SELECT 2, -1, toDateTime64('2026-11-01 00:00:01', 3, 'UTC')\n  ),\n  __expected__clean AS (\n    SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS _replay_timestamp\n    UNION ALL SELECT 2, -1, toDateTime64('2026-11-01 00:00:01', 3, 'UTC')\n  )\nSELECT 1\n\nTEST (name duplicates_count);\nWITH\n  __source__payments AS (\n    SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS ts\n  ),\n  __expected__clean AS (\n    SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS _replay_timestamp\n    UNION ALL SELECT 1, 5, toDateTime64('2026-11-01 00:00:00', 3, 'UTC')\n  )\nSELECT 1\n".to_owned(),
        ),
        (
            "audits/amounts.sql",
            "AUDIT (name no_negative_amounts, severity error);\nSELECT id, amount FROM __ref(\"clean\") WHERE amount < 0\n\nAUDIT (name small_amounts, severity warning);\nSELECT id, amount FROM __ref(\"clean\") WHERE amount < 3\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn stb(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    stb_test_support::stb_on_project(dir, args, "")
}

#[test]
fn sql_tests_compare_multisets_and_show_the_rows_that_differ() {
    let db = TestDatabase::create("quality_tests");
    let dir = project(&db.name);
    let output = stb(dir.path(), &["test", "--json"]);
    assert_eq!(output.status.code(), Some(1), "one test fails");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        (json["passed"].clone(), json["failed"].clone()),
        (1.into(), 1.into())
    );
    let failed = json["results"]
        .as_array()
        .and_then(|r| r.iter().find(|t| t["name"] == "duplicates_count"))
        .expect("the failing test");
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["differences"][0]["kind"], "missing");
    assert_eq!(failed["differences"][0]["multiplicity"], 1);
    assert_eq!(failed["differences"][0]["values"][0], "1");
    let text = stb(dir.path(), &["test"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("Results: 1 passed, 1 failed"), "{stdout}");
    assert!(
        stdout.contains("missing x1: (1, 5, 2026-11-01 00:00:00.000)"),
        "{stdout}"
    );
    assert!(
        dir.path()
            .join("target/run/tests/duplicates_count.sql")
            .exists()
    );
    // Selecting the model keeps its tests; an unknown model is an error.
    let selected = stb(dir.path(), &["test", "--json", "--select", "+clean"]);
    let json: Value = serde_json::from_slice(&selected.stdout).expect("JSON");
    assert_eq!(json["results"].as_array().map(Vec::len), Some(2));
    let unknown = stb(dir.path(), &["test", "--json", "--select", "nope"]);
    let json: Value = serde_json::from_slice(&unknown.stdout).expect("JSON");
    assert!(
        json["error"]["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("STB-SELECT")),
        "{json}"
    );
}

#[test]
fn audits_wait_for_their_relations_then_fail_or_warn_by_severity() {
    let db = TestDatabase::create("quality_audits");
    execute(&format!(
        "CREATE TABLE {}.payments_existing (id UInt64, amount Int64, ts DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let dir = project(&db.name);
    let output = stb(dir.path(), &["audit", "--json"]);
    assert!(output.status.success(), "nothing built yet: deferred");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(
        json["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|a| a["status"] == "deferred")),
        "{json}"
    );
    execute(&format!(
        "INSERT INTO {}.payments_existing SELECT number, toInt64(number) - 7, now64(3, 'UTC') FROM numbers(20)",
        db.name
    ));
    // The build runs the audits of what it rebuilt: the error-severity one fails the
    // build (exit 1) without undoing it.
    let build = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(
        build.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    assert!(String::from_utf8_lossy(&build.stderr).contains("STB-BUILD-004"));
    let result: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    assert_eq!(
        result["status"], "succeeded",
        "the workflow itself succeeded"
    );
    assert_eq!(
        (
            result["audits"]["errors"].clone(),
            result["audits"]["warnings"].clone()
        ),
        (1.into(), 1.into())
    );
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM {}.tbl__clean FORMAT TSV",
            db.name
        ))
        .trim(),
        "20",
        "the rebuilt table stays"
    );
    let output = stb(dir.path(), &["audit", "--json"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "an error-severity audit failed"
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let by_name = |name: &str| {
        json["results"]
            .as_array()
            .and_then(|r| r.iter().find(|a| a["name"] == name))
            .cloned()
            .expect("audit")
    };
    let negative = by_name("no_negative_amounts");
    assert_eq!(
        (negative["status"].clone(), negative["failing_rows"].clone()),
        ("failed".into(), 7.into())
    );
    assert_eq!(
        negative["sample"].as_array().map(Vec::len),
        Some(5),
        "a sample of five rows"
    );
    assert_eq!(by_name("small_amounts")["status"], "warning");
    assert_eq!(
        (
            json["error_failure_count"].clone(),
            json["warning_failure_count"].clone()
        ),
        (1.into(), 1.into())
    );
    // The failing audit's record keeps its count and a sample of five rows.
    let payload: Value = serde_json::from_str(
        execute(&format!(
            "SELECT payload_json FROM {}._streambuild_node_results WHERE node_name = 'no_negative_amounts' AND status = 'failed' ORDER BY completed_at DESC LIMIT 1 FORMAT TSVRaw",
            db.name
        ))
        .trim(),
    )
    .expect("payload");
    assert_eq!(payload["failure_count"], 7);
    assert_eq!(payload["sample_rows"].as_array().map(Vec::len), Some(5));
    let text = stb(dir.path(), &["audit"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("Result: FAIL (1 errors, 1 warnings)"));
    // Selecting the model keeps both of its audits.
    let selected = stb(dir.path(), &["audit", "--select", "clean"]);
    assert_eq!(selected.status.code(), Some(1));
    // With only the warning left, the run passes.
    execute(&format!(
        "ALTER TABLE {}.tbl__clean DELETE WHERE amount < 0 SETTINGS mutations_sync = 1",
        db.name
    ));
    let output = stb(dir.path(), &["audit"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("Result: PASS (0 errors, 1 warnings)"),
        "{stdout}"
    );
    // Every result is recorded with its run: the build's and the manual ones.
    let recorded = execute(&format!(
        "SELECT trigger, status, count() FROM {}._streambuild_node_results WHERE node_name = 'no_negative_amounts' GROUP BY trigger, status ORDER BY trigger, status FORMAT TSV",
        db.name
    ));
    assert_eq!(
        recorded.lines().collect::<Vec<_>>(),
        [
            "build\tfailed\t1",
            "manual\tdeferred\t1",
            "manual\tfailed\t3",
            "manual\tpassed\t1"
        ]
    );
}

#[test]
fn a_three_model_chain_a_diamond_and_a_zero_row_assertion_pass() {
    let db = TestDatabase::create("quality_chain");
    let source = "sources:\n  - name: payments\n    kind: stream_table\n    table_name: payments_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: ts\n";
    let model = |body: &str| format!("MODEL (order_by [\"id\"]);\n{body}\n");
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!("name = \"chain\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{}\"\n", db.name),
        ),
        ("sources/payments.yml".to_owned(), source.to_owned()),
        // a -> b -> c is the chain; a -> b and a -> d meet again in e, the diamond.
        ("pipelines/pl__pay/a.sql".to_owned(), model("SELECT id::UInt64 AS id, amount::Int64 AS amount, ts::DateTime64(3, 'UTC') AS _replay_timestamp FROM __source(\"payments\")")),
        ("pipelines/pl__pay/b.sql".to_owned(), model("SELECT id::UInt64 AS id, (amount * 2)::Int64 AS amount, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp FROM __ref(\"a\")")),
        ("pipelines/pl__pay/c.sql".to_owned(), model("SELECT id::UInt64 AS id, (amount + 1)::Int64 AS amount, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp FROM __ref(\"b\")")),
        ("pipelines/pl__pay/d.sql".to_owned(), model("SELECT id::UInt64 AS id, (amount * 10)::Int64 AS amount, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp FROM __ref(\"a\")")),
        ("pipelines/pl__pay/e.sql".to_owned(), "MODEL (kind view);\nSELECT b.id::UInt64 AS id, b.amount::Int64 AS doubled, d.amount::Int64 AS tenfold FROM __ref(\"b\") AS b INNER JOIN __ref(\"d\") AS d ON d.id = b.id\n".to_owned()),
        (
            "tests/shapes.sql".to_owned(),
            [
                "TEST (name chain_of_three);\nWITH\n  __source__payments AS (SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS ts),\n  __expected__c AS (SELECT 1 AS id, 11 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS _replay_timestamp)\nSELECT 1\n",
                "TEST (name diamond);\nWITH\n  __source__payments AS (SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS ts UNION ALL SELECT 2, 1, toDateTime64('2026-11-01 00:00:00', 3, 'UTC')),\n  __expected__e AS (SELECT 1 AS id, 10 AS doubled, 50 AS tenfold UNION ALL SELECT 2, 2, 10)\nSELECT 1\n",
                "TEST (name nothing_negative);\nWITH\n  __source__payments AS (SELECT 1 AS id, 5 AS amount, toDateTime64('2026-11-01 00:00:00', 3, 'UTC') AS ts),\n  __assert__no_negative_amounts AS (SELECT id FROM __ref(\"c\") WHERE amount < 0)\nSELECT 1\n",
            ]
            .join("\n"),
        ),
    ];
    let dir = stb_test_support::project_dir(&files);
    let output = stb(dir.path(), &["test", "--json"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(output.status.success(), "{json}");
    assert_eq!(
        (json["passed"].clone(), json["failed"].clone()),
        (3.into(), 0.into()),
        "{json}"
    );
}

#[test]
fn a_broken_model_fails_its_tests_and_the_build_audits_with_readable_reports() {
    let db = TestDatabase::create("quality_broken");
    execute(&format!(
        "CREATE TABLE {}.payments_existing (id UInt64, amount Int64, ts DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    execute(&format!(
        "INSERT INTO {}.payments_existing SELECT number, toInt64(number) + 5, now64(3, 'UTC') FROM numbers(10)",
        db.name
    ));
    let dir = project(&db.name);
    // The model flips every sign by mistake; an audit that cannot run sits beside it.
    std::fs::write(
        dir.path().join("pipelines/pl__pay/clean.sql"),
        "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id, (-amount)::Int64 AS amount, ts::DateTime64(3, 'UTC') AS _replay_timestamp\nFROM __source(\"payments\")\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("audits/broken.sql"),
        "AUDIT (name reads_a_missing_column, severity error);\nSELECT no_such_column FROM __ref(\"clean\")\n",
    )
    .expect("write");
    let output = stb(dir.path(), &["test"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  keeps_every_payment"), "{stdout}");
    assert!(
        stdout.contains("missing x1: (1, 5, 2026-11-01 00:00:00.000)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unexpected x1: (1, -5, 2026-11-01 00:00:00.000)"),
        "{stdout}"
    );
    let output = stb(dir.path(), &["build", "--auto-approve"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("Direct Build Complete"),
        "the build itself is applied: {stdout}"
    );
    assert!(
        stdout.contains(
            "FAIL (10 rows)  no_negative_amounts  (error, audits/amounts.sql)  10 failing rows"
        ),
        "{stdout}"
    );
    // The audit the warehouse refused is recorded as an error; the others still ran.
    assert!(
        stdout.contains("ERROR (10 rows)  reads_a_missing_column"),
        "{stdout}"
    );
    assert!(stdout.contains("WARN (10 rows)  small_amounts"), "{stdout}");
    assert!(String::from_utf8_lossy(&output.stderr).contains(
        "error[STB-BUILD-004]: build audits failed: no_negative_amounts, reads_a_missing_column"
    ));
}

/// An audit that passes over an empty relation checked nothing: it says so, in text and JSON.
#[test]
fn an_audit_over_an_empty_relation_says_it_checked_no_rows() {
    let db = TestDatabase::create("quality_empty");
    execute(&format!(
        "CREATE TABLE {}.payments_existing (id UInt64, amount Int64, ts DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let dir = project(&db.name);
    let build = stb(dir.path(), &["build", "--auto-approve"]);
    let stdout = String::from_utf8_lossy(&build.stdout);
    assert!(build.status.success(), "{stdout}");
    assert!(
        stdout.contains("PASS (0 rows)  no_negative_amounts  (error, audits/amounts.sql)"),
        "the build's audits say what they checked: {stdout}"
    );
    assert!(
        stdout.contains("Note: 2 audits ran over an empty relation and checked nothing there"),
        "{stdout}"
    );
    let output = stb(dir.path(), &["audit"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("PASS (0 rows)  small_amounts"), "{stdout}");
    assert!(
        stdout.contains("Note: 2 audits ran over an empty relation and checked nothing there: no_negative_amounts, small_amounts"),
        "{stdout}"
    );
    let output = stb(dir.path(), &["audit", "--json"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        json["results"][0]["checked_rows"],
        serde_json::json!([{"model": "clean", "rows": 0}]),
        "{json}"
    );
    assert_eq!(
        json["over_empty_relations"],
        serde_json::json!(["no_negative_amounts", "small_amounts"])
    );
    execute(&format!(
        "INSERT INTO {}.payments_existing SELECT number, toInt64(number) + 5, now64(3, 'UTC') FROM numbers(4)",
        db.name
    ));
    let output = stb(dir.path(), &["audit", "--json"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["results"][0]["checked_rows"][0]["rows"], 4, "{json}");
    assert_eq!(json["over_empty_relations"], serde_json::json!([]));
    let recorded = execute(&format!(
        "SELECT payload_json FROM {}._streambuild_node_results WHERE node_name = 'no_negative_amounts' ORDER BY completed_at DESC LIMIT 1 FORMAT TSVRaw",
        db.name
    ));
    assert!(
        recorded.contains("\"checked_rows\":[{\"model\":\"clean\",\"rows\":4}]"),
        "{recorded}"
    );
}

/// docs/testing.md shows real files and real outputs: a project built from the page's test
/// and audit files prints every output line the page shows.
#[test]
fn the_files_and_outputs_in_docs_testing_md_are_real() {
    let docs =
        std::fs::read_to_string(stb_test_support::package_dir().join("../../docs/testing.md"))
            .expect("docs/testing.md");
    // Fenced blocks, their lines joined.
    let mut blocks: Vec<String> = Vec::new();
    let mut open: Option<String> = None;
    for line in docs.lines() {
        match (&mut open, line.starts_with("```")) {
            (None, true) => open = Some(String::new()),
            (Some(_), true) => blocks.extend(open.take()),
            (Some(block), false) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, false) => {}
        }
    }
    let file = |needle: &str| {
        blocks
            .iter()
            .find(|b| b.starts_with(needle))
            .cloned()
            .unwrap_or_else(|| panic!("docs/testing.md has no block starting {needle:?}"))
    };
    let tests_file = file("TEST (name keeps_every_payment)");
    let audits_file = file("AUDIT (name no_negative_amounts");
    let test_block = blocks
        .iter()
        .find(|b| b.contains("Results:"))
        .expect("a stb test example");
    let audit_block = blocks
        .iter()
        .find(|b| b.contains("Result: FAIL"))
        .expect("a stb audit example");
    let db = TestDatabase::create("quality_docs");
    execute(&format!(
        "CREATE TABLE {}.payments_existing (id UInt64, amount Int64, ts DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    execute(&format!(
        "INSERT INTO {}.payments_existing SELECT number, toInt64(number) - 7, now64(3, 'UTC') FROM numbers(20)",
        db.name
    ));
    let dir = project(&db.name);
    // The project's test and audit files are the ones the page shows.
    std::fs::write(dir.path().join("tests/clean.sql"), &tests_file).expect("write");
    std::fs::write(dir.path().join("audits/amounts.sql"), &audits_file).expect("write");
    let tests = String::from_utf8_lossy(&stb(dir.path(), &["test"]).stdout).into_owned();
    for line in test_block.lines() {
        assert!(tests.contains(line), "docs line {line:?} not in\n{tests}");
    }
    let _ = stb(dir.path(), &["build", "--auto-approve"]);
    let audits = String::from_utf8_lossy(&stb(dir.path(), &["audit"]).stdout).into_owned();
    for line in audit_block.lines() {
        assert!(audits.contains(line), "docs line {line:?} not in\n{audits}");
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            if entry.file_name() != "target" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn a_macro_mode_test_passes_and_a_wrong_one_fails() {
    let db = TestDatabase::create("quality_macro");
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(
        &stb_test_support::package_dir().join("../../examples/macros_quality"),
        dir.path(),
    );
    // Results are recorded in the test's own database, not the example's.
    let output = stb(dir.path(), &["test", "--json", "--database", &db.name]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(output.status.success(), "{json}");
    assert_eq!(json["passed"], 2, "{json}");
    // Expect the macro to round 2.5 to 251 cents: it does not.
    let test = dir.path().join("tests/cents_macro.sql");
    let text = std::fs::read_to_string(&test).expect("read");
    std::fs::write(&test, text.replace("toInt64(250)", "toInt64(251)")).expect("write");
    let output = stb(dir.path(), &["test", "--json", "--database", &db.name]);
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let failed = json["results"]
        .as_array()
        .and_then(|r| r.iter().find(|t| t["mode"] == "macro"))
        .expect("the macro test");
    assert_eq!(failed["status"], "failed", "{json}");
    let kinds: Vec<&str> = failed["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["missing", "unexpected"], "{json}");
}
