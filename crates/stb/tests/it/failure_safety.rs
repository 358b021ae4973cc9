//! A build that cannot succeed must leave the target as it found it (issue 33).
//!
//! Validation: `stb plan` and `stb build` check every statement a build would run against
//! the warehouse (queries with `EXPLAIN`, tables as session-scoped temporary copies)
//! before anything changes, and fail with the model's file, line and column. The tests
//! compare the whole target before and after, relation by relation (identity, definition
//! and row multiset), so "nothing changed" is checked, not assumed.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

const EVENTS: &str = "CREATE TABLE {db}.events_existing (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), kind String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)";

const SOURCE: &str = "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n";

const AMOUNT: &str = "amount::UInt64 AS amount";
const SUMMING: &str = "SummingMergeTree";
const CLEAN: &str = "pipelines/pl__events/clean.sql";
const TOTALS: &str = "pipelines/pl__events/totals.sql";

/// clean (root, lineage-keyed) -> totals (aggregate) -> report (view); `amount` is
/// `clean`'s last projection, `engine` the engine `totals` is stored with.
fn files(database: &str, mode: &str, amount: &str, engine: &str) -> Vec<(String, String)> {
    vec![
        (
            "streambuild_project.toml".into(),
            format!(
                "name = \"events\"\ndefault_target = \"dev\"\n[defaults]\npipeline_mode = \"{mode}\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        ("sources/events.yml".into(), SOURCE.into()),
        (
            CLEAN.into(),
            format!("MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset,\n  kind::String AS kind,\n  {amount}\nFROM __source(\"events\")\n"),
        ),
        (
            TOTALS.into(),
            format!("MODEL (order_by [\"kind\"], engine \"{engine}\");\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount\nFROM __ref(\"clean\")\nGROUP BY kind\n"),
        ),
        (
            "pipelines/pl__events/report.sql".into(),
            "MODEL (kind view);\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount FROM __ref(\"totals\") GROUP BY kind\n".into(),
        ),
    ]
}

fn write(dir: &Path, files: &[(String, String)]) {
    for (path, text) in files {
        std::fs::write(dir.join(path), text).expect("write");
    }
}

fn stb(dir: &Path, args: &[&str]) -> Output {
    stb_test_support::stb_on_project(dir, args, "")
}

fn insert_events(database: &str, from: u64, to: u64) {
    // A fixed past instant: nothing here has a TTL or compares it with the clock.
    execute(&format!(
        "INSERT INTO {database}.events_existing SELECT number % 3, intDiv(number, 3), toDateTime64('2026-11-01 00:00:00', 3, 'UTC'), ['a', 'b', 'c'][number % 3 + 1], number % 25 FROM numbers({}, {})",
        from * 3,
        (to - from) * 3
    ));
}

/// Every relation of the target but the lifecycle tables: its name, identity, definition
/// and its rows, sorted (the multiset).
fn target_state(database: &str) -> Vec<(String, String)> {
    let relations = execute(&format!(
        "SELECT name, uuid, engine, create_table_query FROM system.tables WHERE database = '{database}' AND name NOT LIKE '\\_streambuild%' ORDER BY name FORMAT TSV"
    ));
    relations
        .lines()
        .map(|line| {
            let name = line.split('\t').next().unwrap_or_default().to_owned();
            let rows = if line.contains("\tKafka\t") {
                String::new()
            } else {
                execute(&format!(
                    "SELECT * FROM {database}.`{name}` ORDER BY ALL FORMAT TSV"
                ))
            };
            (line.to_owned(), rows)
        })
        .collect()
}

fn built(database: &str, mode: &str) -> tempfile::TempDir {
    execute(&EVENTS.replace("{db}", database));
    insert_events(database, 0, 40);
    let dir = stb_test_support::project_dir(&files(database, mode, AMOUNT, SUMMING));
    let output = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert!(
        output.status.success(),
        "first build\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if mode == "virtual" {
        // Readers see a deployment once it is promoted.
        let result: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        let id = result["deployment_id"].as_str().expect("a deployment id");
        let promoted = stb(dir.path(), &["deployment", "promote", id, "--json"]);
        assert!(
            promoted.status.success(),
            "{}",
            String::from_utf8_lossy(&promoted.stderr)
        );
    }
    dir
}

/// The plan and the build refuse `broken`, naming `file`:`line`, and change nothing.
fn refused_everywhere(dir: &Path, database: &str, file: &str, line: u64) {
    let before = target_state(database);
    let plan = stb(dir, &["plan", "--json"]);
    assert_eq!(plan.status.code(), Some(1), "plan must fail");
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    let error = &plan["errors"][0];
    assert_eq!(error["code"], "STB-PLAN-006", "{plan}");
    assert_eq!(error["location"]["file"], file, "{plan}");
    assert_eq!(error["location"]["line"], line, "{plan}");
    let text = stb(dir, &["plan"]);
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains(&format!("error[STB-PLAN-006] {file}:{line}:")),
        "{stderr}"
    );
    let build = stb(dir, &["build", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert_eq!(build.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("STB-PLAN-006"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(target_state(database), before, "the target changed");
    // The refusal is on record as a failed invocation.
    let outcome = execute(&format!(
        "SELECT outcome FROM {database}._streambuild_invocations ORDER BY started_at DESC LIMIT 1 FORMAT TSV"
    ));
    assert_eq!(outcome.trim(), "failed");
}

fn broken_sql_and_ddl_are_refused_before_anything_changes(mode: &str) {
    let db = TestDatabase::create(&format!("invalid_{mode}"));
    let dir = built(&db.name, mode);
    // An unknown column, on line 4 of clean.sql.
    write(
        dir.path(),
        &files(&db.name, mode, "amount_centz::UInt64 AS amount", SUMMING),
    );
    refused_everywhere(dir.path(), &db.name, CLEAN, 4);
    // A column type that does not exist, on the same line: the table's DDL fails too.
    write(
        dir.path(),
        &files(&db.name, mode, "amount::UInt65 AS amount", SUMMING),
    );
    refused_everywhere(dir.path(), &db.name, CLEAN, 4);
    // A table the warehouse cannot create: its engine sums a column it does not have
    // (the header, line 1; only the warehouse knows what an engine accepts).
    write(
        dir.path(),
        &files(&db.name, mode, AMOUNT, "SummingMergeTree(amountz)"),
    );
    refused_everywhere(dir.path(), &db.name, TOTALS, 1);
    // Live rows still flow through the untouched views.
    let before: u64 = execute(&format!(
        "SELECT count() FROM {}.events_existing FORMAT TSV",
        db.name
    ))
    .trim()
    .parse()
    .expect("count");
    insert_events(&db.name, 40, 50);
    // The table (direct), or the stable view readers use (virtual).
    let reached: u64 = execute(&format!(
        "SELECT count() FROM {}.tbl__clean FORMAT TSV",
        db.name
    ))
    .trim()
    .parse()
    .expect("count");
    assert_eq!(reached, before + 30, "live rows reach the model");
}

#[test]
fn broken_sql_and_ddl_are_refused_before_a_direct_build_changes_anything() {
    broken_sql_and_ddl_are_refused_before_anything_changes("direct");
}

#[test]
fn broken_sql_and_ddl_are_refused_before_a_virtual_build_changes_anything() {
    broken_sql_and_ddl_are_refused_before_anything_changes("virtual");
}
