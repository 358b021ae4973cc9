//! `stb runs list | show` end to end: a finished build reads `succeeded` with its scope and
//! rows; a build killed with SIGKILL reads `running`, then `unresponsive`, then
//! `presumed_failed` as its silence passes the (test-short) windows, all on the warehouse's
//! clock.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{TestDatabase, wait_for, wait_for_statements};

use crate::deployments::{events_table, insert, ok_json, project};

/// `stb runs <args> --json` with the signal window at 3 s and presumed failure at 8 s.
fn runs_output(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .arg("runs")
        .args(args)
        .args(["--json", "--project-dir"])
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env("STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS", "3")
        .env("STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS", "8")
        .output()
        .expect("stb runs")
}

/// As [`runs_output`], for a command that must succeed: its JSON.
fn runs(dir: &Path, args: &[&str]) -> Value {
    let output = runs_output(dir, args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn status_of(dir: &Path, invocation: &str) -> String {
    runs(dir, &["list"])["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["invocation_id"] == invocation)
        .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[test]
fn runs_show_their_status_as_it_is_derived_from_their_records() {
    let db = TestDatabase::create("runs");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);
    let built = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(built["status"], "succeeded");
    let listed = runs(dir.path(), &["list"]);
    let run = &listed["runs"][0];
    assert_eq!(run["status"], "succeeded", "{listed}");
    assert_eq!(run["command"], "build");
    assert_eq!(run["mode"], "virtual_environment");
    assert!(
        run["scope"]
            .as_array()
            .is_some_and(|s| s.contains(&Value::from("model:clean"))),
        "{listed}"
    );
    assert!(
        run["written_rows"].as_u64().is_some_and(|n| n >= 60),
        "{listed}"
    );
    let id = run["invocation_id"].as_str().expect("id").to_owned();
    // The list prints the short id, and `show` takes it (any unique prefix).
    let text = std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(["runs", "list", "--project-dir"])
        .arg(dir.path())
        .envs(stb_test_support::warehouse_env())
        .output()
        .expect("stb runs list");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("  {}  succeeded", &id[..8])),
        "{text}"
    );
    let by_short_id = runs(dir.path(), &["show", &id[..8]]);
    assert_eq!(by_short_id["run"]["invocation_id"], id.as_str());
    let shown = runs(dir.path(), &["show", &id]);
    let statements = shown["statements"].as_array().expect("statements");
    assert_eq!(
        Some(statements.len() as u64),
        run["total_statements"].as_u64(),
        "every statement is on the timeline"
    );
    assert!(
        statements.iter().all(|s| s["elapsed_ms"].is_u64()),
        "{shown}"
    );

    // A build killed in the middle: silent from then on.
    let invocation = stb_test_support::unique_name("killed");
    let mut child = stb_test_support::spawn_on_project(
        dir.path(),
        &[
            "build",
            "--auto-approve",
            "--json",
            "--select",
            "clean",
            "--full-refresh",
        ],
        &invocation,
    );
    wait_for_statements(&db.name, &invocation, 3);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_eq!(status_of(dir.path(), &invocation), "running");
    for expected in ["unresponsive", "presumed_failed"] {
        let reached = wait_for(Duration::from_secs(30), || {
            status_of(dir.path(), &invocation) == expected
        });
        assert!(reached, "never {expected}");
    }
    let shown = runs(dir.path(), &["show", &invocation]);
    assert!(
        shown["run"]["silent_seconds"]
            .as_i64()
            .is_some_and(|s| s >= 8),
        "{shown}"
    );
    let unknown = runs_output(dir.path(), &["show", "nope"]);
    let error: Value = serde_json::from_slice(&unknown.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-RUNS-001");
    // Too short a prefix names no run, even where only one run would match it.
    for short in ["", &invocation[..3]] {
        let refused = runs_output(dir.path(), &["show", short]);
        let error: Value = serde_json::from_slice(&refused.stdout).expect("JSON");
        assert_eq!(error["error"]["code"], "STB-RUNS-001", "{short:?}: {error}");
        assert!(
            error["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains("at least its first 4 characters")),
            "{error}"
        );
    }
    // A prefix two runs share names both and asks for more: a record of a second run whose
    // id differs from the killed one's in its last character only.
    let sibling = format!("{}x", &invocation[..invocation.len() - 1]);
    let first_event = stb_test_support::execute(&format!(
        "SELECT * FROM {}._streambuild_run_events WHERE invocation_id = '{invocation}' LIMIT 1 FORMAT JSONEachRow",
        db.name
    ));
    let mut row: Value = serde_json::from_str(first_event.trim()).expect("one event as JSON");
    row["invocation_id"] = Value::from(sibling.as_str());
    stb_test_support::execute(&format!(
        "INSERT INTO {}._streambuild_run_events FORMAT JSONEachRow {row}",
        db.name
    ));
    let shared = &invocation[..invocation.len() - 1];
    let ambiguous = runs_output(dir.path(), &["show", shared]);
    let error: Value = serde_json::from_slice(&ambiguous.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-RUNS-001", "{error}");
    let message = error["error"]["message"].as_str().expect("message");
    assert!(
        message.contains(&sibling) && message.contains(&invocation),
        "{message}"
    );
}

/// A direct pipeline whose replay hashes every row heavily: seconds over millions of rows.
pub(crate) fn heavy_files(database: &str) -> Vec<(String, String)> {
    vec![
        (
            "streambuild_project.toml".into(),
            format!("name = \"heavy\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/events.yml".into(),
            "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n".into(),
        ),
        (
            "pipelines/pl__heavy/heavy.sql".into(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount, cityHash64(repeat(toString(_replay_offset), 1500))::UInt64 AS h\nFROM __source(\"events\")\n".into(),
        ),
    ]
}

fn heavy_project(database: &str) -> tempfile::TempDir {
    stb_test_support::project_dir(&heavy_files(database))
}

/// Waits (at most 60 s) until run `invocation` has started step `step`.
pub(crate) fn wait_for_step(database: &str, invocation: &str, step: &str) {
    let started = wait_for(Duration::from_secs(60), || {
        let recorded = stb_test_support::execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{database}' AND name = '_streambuild_run_events' FORMAT TSV"
        ));
        recorded.trim() == "1"
            && stb_test_support::execute(&format!(
                "SELECT count() FROM {database}._streambuild_run_events WHERE invocation_id = '{invocation}' AND event_kind = 'statement_started' AND step_id = '{step}' FORMAT TSV"
            ))
            .trim()
                == "1"
    });
    assert!(started, "{step} never started");
}

#[test]
fn a_long_replay_is_cancelled_within_seconds_and_a_rerun_gives_exact_rows() {
    let db = TestDatabase::create("runs_cancel");
    events_table(&db.name);
    stb_test_support::execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number % 25 FROM numbers(3000000)",
        db.name
    ));
    let dir = heavy_project(&db.name);
    let invocation = stb_test_support::unique_name("cancelled");
    let mut child = stb_test_support::spawn_on_project(
        dir.path(),
        &["build", "--auto-approve", "--json"],
        &invocation,
    );
    wait_for_step(&db.name, &invocation, "replay_heavy");
    let asked = std::time::Instant::now();
    let cancelled = runs(dir.path(), &["cancel", &invocation, "--auto-approve"]);
    let took = asked.elapsed();
    eprintln!(
        "cancelled a replay of 3,000,000 rows in {:.2} s",
        took.as_secs_f64()
    );
    assert_eq!(
        cancelled["cancellation"]["status"], "cancelled",
        "{cancelled}"
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
    let status = child.wait().expect("the build ends");
    assert_eq!(status.code(), Some(130), "a cancelled build exits 130");
    assert_eq!(status_of(dir.path(), &invocation), "cancelled");
    let again = runs_output(dir.path(), &["cancel", &invocation, "--auto-approve"]);
    let again: Value = serde_json::from_slice(&again.stdout).expect("JSON");
    assert_eq!(
        again["error"]["code"], "STB-RUNS-002",
        "nothing left to cancel: {again}"
    );

    // A rerun replays everything once.
    let rerun = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(rerun["status"], "succeeded", "{rerun}");
    let counted = |sql: String| stb_test_support::execute(&format!("{sql} FORMAT TSV"));
    assert_eq!(
        counted(format!(
            "SELECT count(), uniqExact(_replay_partition, _replay_offset), sum(amount) FROM {}.tbl__heavy",
            db.name
        )),
        counted(format!(
            "SELECT count(), uniqExact(p, o), sum(amount) FROM {}.events",
            db.name
        ))
    );
}

#[test]
fn a_long_replay_reports_its_progress_as_events_and_at_a_terminal() {
    let db = TestDatabase::create("runs_progress");
    events_table(&db.name);
    stb_test_support::execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number % 25 FROM numbers(3000000)",
        db.name
    ));
    let dir = heavy_project(&db.name);
    let output =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--events"], "");
    assert!(output.status.success());
    let progress: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "statement_progress" && e["stepId"] == "replay_heavy")
        .collect();
    assert!(!progress.is_empty(), "a replay of seconds reports progress");
    let last = progress.last().expect("progress");
    assert!(last["readRows"].as_u64().is_some_and(|n| n > 0), "{last}");
    assert!(
        last["elapsedMs"].as_u64().is_some_and(|ms| ms >= 1000),
        "{last}"
    );
    assert!(last["queryId"].is_string(), "{last}");
    // The share of the replay window in the target: over the 3 partitions' 1,000,000
    // offsets each, never going backwards.
    let shares: Vec<f64> = progress
        .iter()
        .map(|e| {
            assert_eq!(e["replayOffsetsTotal"], 3_000_000, "{e}");
            e["replayPercent"].as_f64().expect("a share")
        })
        .collect();
    assert!(
        shares.windows(2).all(|w| w[0] <= w[1]) && shares.iter().all(|p| (0.0..=100.0).contains(p)),
        "{shares:?}"
    );
    // An ETA once something is written.
    for event in &progress {
        if event["replayOffsetsDone"].as_u64().is_some_and(|d| d > 0) {
            assert!(event["etaMs"].is_u64(), "{event}");
        }
    }
    // The warehouse keeps the same events.
    let kept = stb_test_support::execute(&format!(
        "SELECT count() FROM {}._streambuild_run_events WHERE event_kind = 'statement_progress' FORMAT TSV",
        db.name
    ));
    assert_eq!(kept.trim(), progress.len().to_string());
    // At a terminal: a live line on stderr.
    let (code, shown) =
        crate::destruction::at_terminal(dir.path(), &["build", "--auto-approve"], "");
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("replay_heavy: "), "{shown}");
    assert!(shown.contains("rows read"), "{shown}");
    assert!(shown.contains("% of the replay window written"), "{shown}");
}
