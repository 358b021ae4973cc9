//! `stb status` end to end: activity evidence and freshness per source and model, on the
//! test stack (which keeps the query views log and the part log), on a server that keeps
//! only the part log, and on one that keeps no log (part times, marked approximate).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stb_test_support::{PrivateClickHouse, SystemLogs, TestDatabase, execute, execute_at};

use crate::deployments::{build, promote};

const TABLE: &str = "(p UInt32, o UInt64, ts DateTime64(3, 'UTC'), amount UInt64) ENGINE = MergeTree ORDER BY (p, o)";

fn source(name: &str, freshness: &str) -> (String, String) {
    (
        format!("sources/{name}.yml"),
        format!(
            "sources:\n  - name: {name}\n    kind: stream_table\n    table_name: {name}\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n{freshness}"
        ),
    )
}

const FRESHNESS: &str = "    freshness:\n      warn_after: 30s\n      error_after: 2m\n";

fn copy_of(source: &str) -> String {
    format!(
        "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __source(\"{source}\")\n"
    )
}

/// Sources `events` (virtual pipeline `pl__v`: clean, big, report) and `archive` (direct
/// pipeline `pl__d`: copy), both expected within 30 s / 2 m; `quiet` (direct `pl__q`:
/// quiet_copy) with the project's default expectation.
fn project(database: &str) -> tempfile::TempDir {
    let files = vec![
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"s\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n[defaults.freshness]\nerror_after = \"1h\"\n"
            ),
        ),
        source("events", FRESHNESS),
        source("archive", FRESHNESS),
        source("quiet", ""),
        // Its event-time column is text: freshness cannot be read from it.
        source("odd", FRESHNESS),
        (
            "pipelines/pl__v/pipeline.toml".to_owned(),
            "mode = \"virtual\"\n".to_owned(),
        ),
        ("pipelines/pl__v/clean.sql".to_owned(), copy_of("events")),
        (
            "pipelines/pl__v/big.sql".to_owned(),
            crate::deployments::BIG.to_owned(),
        ),
        (
            "pipelines/pl__v/report.sql".to_owned(),
            "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"big\")\n".to_owned(),
        ),
        ("pipelines/pl__d/copy.sql".to_owned(), copy_of("archive")),
        (
            "pipelines/pl__q/quiet_copy.sql".to_owned(),
            copy_of("quiet"),
        ),
        // Its view fails on an amount of 999: a stalled materialized view.
        (
            "pipelines/pl__q/fragile.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, (amount + throwIf(amount = 999))::UInt64 AS amount\nFROM __source(\"quiet\")\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn status(dir: &Path, port: u16) -> Value {
    let output = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(["status", "--json", "--project-dir"])
        .arg(dir)
        .env("STREAMBUILD_CLICKHOUSE_HOST", "127.0.0.1")
        .env("STREAMBUILD_CLICKHOUSE_PORT", port.to_string())
        .output()
        .expect("stb status");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn entry<'a>(status: &'a Value, list: &str, name: &str) -> &'a Value {
    status[list]
        .as_array()
        .expect(list)
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {status}"))
}

/// `(activity state, evidence source)` of `name`.
fn activity(status: &Value, list: &str, name: &str) -> (String, String) {
    let found = &entry(status, list, name)["activity"];
    (
        found["state"].as_str().unwrap_or_default().to_owned(),
        found["source"].as_str().unwrap_or_default().to_owned(),
    )
}

fn freshness(status: &Value, list: &str, name: &str) -> String {
    entry(status, list, name)["freshness"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The logs the status says the warehouse keeps.
fn assert_logs(status: &Value, query_views_log: bool, part_log: bool) {
    assert_eq!(
        (
            &status["capabilities"]["query_views_log"],
            &status["capabilities"]["part_log"]
        ),
        (&Value::from(query_views_log), &Value::from(part_log)),
        "{status}"
    );
}

fn pair(state: &str, source: &str) -> (String, String) {
    (state.to_owned(), source.to_owned())
}

/// Rows now (`ago` = 0) or an hour ago, relative to the run.
fn insert(run: &dyn Fn(&str) -> String, database: &str, table: &str, rows: u64, hour_ago: bool) {
    let ts = if hour_ago {
        "now64(3, 'UTC') - INTERVAL 1 HOUR"
    } else {
        "now64(3, 'UTC')"
    };
    run(&format!(
        "INSERT INTO {database}.{table} SELECT number % 3, intDiv(number, 3) + (SELECT count() FROM {database}.{table}), {ts}, number % 25 FROM numbers({rows})"
    ));
}

#[test]
fn status_reports_activity_from_the_views_log_and_the_part_log_and_freshness_from_the_data() {
    let db = TestDatabase::create("status");
    let run = |sql: &str| execute(sql);
    for table in ["events", "archive", "quiet"] {
        execute(&format!("CREATE TABLE {}.{table} {TABLE}", db.name));
    }
    execute(&format!(
        "CREATE TABLE {}.odd (p UInt32, o UInt64, ts String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)",
        db.name
    ));
    insert(&run, &db.name, "events", 30, false);
    insert(&run, &db.name, "archive", 30, true);
    let dir = project(&db.name);
    let id = build(dir.path(), &["--select", "pipeline:pl__v"]);
    promote(dir.path(), &id);
    crate::deployments::ok_json(
        dir.path(),
        &[
            "build",
            "--auto-approve",
            "--json",
            "--select",
            "pipeline:pl__d",
            "--select",
            "pipeline:pl__q",
        ],
    );
    // New events through the active copies' materialized views.
    insert(&run, &db.name, "events", 30, false);
    execute("SYSTEM FLUSH LOGS");

    let port = stb_test_support::stack().clickhouse_port;
    let now = status(dir.path(), port);
    assert_logs(&now, true, true);
    assert!(now["lock_holder"].is_null(), "{now}");
    // A virtual model is read through its active copy, where the views write.
    let clean = entry(&now, "models", "clean");
    assert_eq!(clean["relation"], format!("tbl__clean__{id}"), "{clean}");
    assert_eq!(
        activity(&now, "models", "clean"),
        pair("moving", "query_views_log")
    );
    assert!(
        clean["activity"]["rowsWritten"]
            .as_u64()
            .is_some_and(|n| n >= 30),
        "the view wrote the 30 new events: {clean}"
    );
    // Its rows, and the bytes they take (a table's parts know both; a view has no bytes).
    assert!(clean["rows"].as_u64().is_some_and(|n| n >= 30), "{clean}");
    assert!(clean["bytes"].as_u64().is_some_and(|n| n > 0), "{clean}");
    assert!(entry(&now, "models", "report")["bytes"].is_null());
    assert_eq!(
        activity(&now, "models", "big"),
        pair("moving", "query_views_log")
    );
    // A view writes nothing to watch.
    assert!(entry(&now, "models", "report")["activity"].is_null());
    // Plain inserts into a source are seen by the part log only.
    assert_eq!(
        activity(&now, "sources", "events"),
        pair("moving", "part_log")
    );
    // Freshness from the data: events are new; archive's newest row is an hour old.
    assert_eq!(freshness(&now, "sources", "events"), "fresh");
    assert_eq!(freshness(&now, "sources", "archive"), "stalled");
    let archive = &entry(&now, "sources", "archive")["freshness"];
    assert!(
        archive["lagSeconds"].as_i64().is_some_and(|s| s >= 3_600),
        "{archive}"
    );
    assert_eq!(archive["errorAfterSeconds"], 120);
    // No rows at all, judged by the project's default expectation.
    assert_eq!(freshness(&now, "sources", "quiet"), "stalled");
    assert_eq!(
        entry(&now, "sources", "quiet")["freshness"]["errorAfterSeconds"],
        3_600
    );
    // A time column that is not a time: unknown, and the others are still judged.
    assert_eq!(freshness(&now, "sources", "odd"), "unknown");
    // Models carry no time column here: their freshness is unknown.
    assert_eq!(freshness(&now, "models", "copy"), "unknown");

    // A view that fails: its table is stalled by the views log's latest execution.
    let failed = stb_test_support::http()
        .post(&stb_test_support::stack().clickhouse_url)
        .body(format!(
            "INSERT INTO {}.quiet SELECT 0, 0, now64(3, 'UTC'), 999",
            db.name
        ))
        .send()
        .expect("sent");
    assert!(
        !failed.status().is_success(),
        "the view throws: {}",
        failed.text().unwrap_or_default()
    );
    execute("SYSTEM FLUSH LOGS");
    let after = status(dir.path(), port);
    let fragile = &entry(&after, "models", "fragile")["activity"];
    assert_eq!(fragile["state"], "stalled", "{fragile}");
    assert_eq!(
        fragile["detail"],
        "The latest materialized-view execution failed."
    );

    // The text shows the same.
    let output = stb_test_support::stb_on_project(dir.path(), &["status"], "");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("clean (table): ").contains(" bytes; moving"), "{text}");
    assert!(
        line("archive (stream_table): ").contains(" bytes; moving"),
        "{text}"
    );
    assert!(text.contains("freshness stalled"), "{text}");
}

/// A direct project on a server of its own: `copy` over `archive`, `quiet_copy` over the
/// empty `quiet`. Returns the server, the project and its status after new rows arrived.
fn on_private_server(logs: SystemLogs) -> (PrivateClickHouse, Value) {
    let server = PrivateClickHouse::with_system_logs(logs);
    let url = server.url();
    let run = |sql: &str| execute_at(&url, sql);
    let database = stb_test_support::unique_name("status_private");
    run(&format!("CREATE DATABASE {database}"));
    for table in ["events", "archive", "quiet"] {
        run(&format!("CREATE TABLE {database}.{table} {TABLE}"));
    }
    insert(&run, &database, "archive", 30, false);
    let dir = project(&database);
    let built = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args([
            "build",
            "--auto-approve",
            "--json",
            "--select",
            "pipeline:pl__d",
            "--select",
            "pipeline:pl__q",
            "--project-dir",
        ])
        .arg(dir.path())
        .env("STREAMBUILD_CLICKHOUSE_HOST", "127.0.0.1")
        .env(
            "STREAMBUILD_CLICKHOUSE_PORT",
            server.started.port.to_string(),
        )
        .output()
        .expect("stb build");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stdout)
    );
    insert(&run, &database, "archive", 30, false);
    if logs != SystemLogs::None {
        run("SYSTEM FLUSH LOGS");
    }
    let found = status(dir.path(), server.started.port);
    (server, found)
}

#[test]
fn without_the_views_log_the_part_log_speaks_and_without_logs_part_times_do() {
    let (_server, part_log) = on_private_server(SystemLogs::PartLog);
    assert_logs(&part_log, false, true);
    // The view's writes into copy are new parts.
    assert_eq!(
        activity(&part_log, "models", "copy"),
        pair("moving", "part_log")
    );
    assert_eq!(
        activity(&part_log, "sources", "archive"),
        pair("moving", "part_log")
    );
    assert_eq!(
        activity(&part_log, "sources", "quiet"),
        pair("idle", "part_log")
    );
    assert_eq!(freshness(&part_log, "sources", "archive"), "fresh");
    assert_eq!(
        entry(&part_log, "models", "copy")["activity"]["approximate"],
        false
    );

    let (_server, no_logs) = on_private_server(SystemLogs::None);
    assert_logs(&no_logs, false, false);
    assert_eq!(
        activity(&no_logs, "models", "copy"),
        pair("moving", "system_parts")
    );
    let copy = &entry(&no_logs, "models", "copy")["activity"];
    assert_eq!(copy["approximate"], true, "{copy}");
    assert_eq!(copy["sourceAvailable"], false);
    // An empty table has no parts: nothing to tell by.
    assert_eq!(
        activity(&no_logs, "sources", "quiet"),
        pair("unknown", "unavailable")
    );
    assert_eq!(freshness(&no_logs, "sources", "archive"), "fresh");
}
