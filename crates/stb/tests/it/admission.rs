//! Admission end to end: while a long replay runs, a build that overlaps it is refused with
//! a message naming the run, its owner, its scope and what to do, and a build of another
//! pipeline is admitted and queues behind the target lock. A killed run blocks overlapping
//! builds while it may still be alive, its lock is refused as stale, and once it is
//! presumed failed `stb unlock` recovers the target (its statement still running in the
//! warehouse is killed first) and a rebuild gives exact rows.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{TestDatabase, execute, wait_for};

use crate::deployments::events_table;
use crate::runs::{heavy_files, wait_for_step};

/// The heavy pipeline of the runs tests and a light one over the same source.
fn two_pipelines(database: &str) -> tempfile::TempDir {
    let mut files = heavy_files(database);
    files.push((
        "pipelines/pl__light/light.sql".into(),
        "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __source(\"events\")\n".into(),
    ));
    stb_test_support::project_dir(&files)
}

/// `stb` on `dir` with the run windows at 3 s (signal) and 30 s (presumed failed).
fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("stb"));
    command
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env("STREAMBUILD_LIVE_STABILIZATION_SECONDS", "1")
        .env("STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS", "3")
        // Far enough from the signal window that a loaded machine cannot pass from one
        // state to the next between two of the test's steps.
        .env("STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS", "30");
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().expect("stb runs")
}

fn spawn(dir: &Path, args: &[&str], invocation: &str) -> std::process::Child {
    command(dir, args)
        .env("STREAMBUILD_RUN_INVOCATION_ID", invocation)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns")
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A `--select <model>` build's refusal: its error object.
fn refused(dir: &Path, model: &str) -> Value {
    let output = run(
        dir,
        &["build", "--auto-approve", "--json", "--select", model],
    );
    assert!(!output.status.success(), "{model} was built");
    json(&output)["error"].clone()
}

fn status_of(dir: &Path, invocation: &str) -> String {
    let shown = json(&run(dir, &["runs", "show", invocation, "--json"]));
    shown["run"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn heavy_source(database: &str, rows: u64) {
    events_table(database);
    execute(&format!(
        "INSERT INTO {database}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number % 25 FROM numbers({rows})"
    ));
}

fn assert_exact(database: &str, model: &str) {
    let counted = |sql: String| execute(&format!("{sql} FORMAT TSV"));
    assert_eq!(
        counted(format!(
            "SELECT count(), uniqExact(_replay_partition, _replay_offset), sum(amount) FROM {database}.tbl__{model}"
        )),
        counted(format!(
            "SELECT count(), uniqExact(p, o), sum(amount) FROM {database}.events"
        )),
        "{model} holds every event once"
    );
}

#[test]
fn an_overlapping_build_is_refused_and_another_pipeline_queues_behind_the_lock() {
    let db = TestDatabase::create("admission");
    heavy_source(&db.name, 6_000_000);
    let dir = two_pipelines(&db.name);
    let heavy = stb_test_support::unique_name("heavy");
    let mut first = spawn(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "heavy"],
        &heavy,
    );
    wait_for_step(&db.name, &heavy, "replay_heavy");

    // The same model: refused, naming the run, its owner, its scope and what to do.
    let error = refused(dir.path(), "heavy");
    assert_eq!(error["code"], "STB-RUNS-003", "{error}");
    let message = error["message"].as_str().expect("message");
    for part in [
        format!("Run {heavy} is still running"),
        "(pid ".to_owned(),
        "it writes model:heavy".to_owned(),
        "both touch model:heavy".to_owned(),
        "No new run was started".to_owned(),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
    assert!(
        error["hint"]
            .as_str()
            .is_some_and(|h| h.contains(&format!("stb runs cancel {heavy}"))),
        "{error}"
    );

    // Another pipeline over the same source: admitted, it waits for the lock.
    let light = stb_test_support::unique_name("light");
    let second = spawn(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "light"],
        &light,
    );
    let second = second.wait_with_output().expect("the light build ends");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert_eq!(json(&second)["status"], "succeeded");
    assert!(
        stderr.contains(&format!("Waiting for run {heavy}")),
        "{stderr}"
    );
    assert!(first.wait().expect("the heavy build ends").success());
    // It ran once the heavy run's workflow was over: its first statement started after
    // that run's last one completed (the lock is given back between the two).
    let order = execute(&format!(
        "SELECT minIf(emitted_at, invocation_id = '{light}' AND event_kind = 'statement_started') >= maxIf(emitted_at, invocation_id = '{heavy}' AND event_kind = 'statement_completed'), \
         countIf(invocation_id = '{light}' AND event_kind = 'lock_waiting') > 0 \
         FROM {}._streambuild_run_events FORMAT TSV",
        db.name
    ));
    assert_eq!(
        order.trim(),
        "1\t1",
        "light ran after heavy, and said it waited"
    );
    assert_exact(&db.name, "heavy");
    assert_exact(&db.name, "light");
}

#[test]
fn a_killed_run_blocks_until_presumed_failed_and_unlock_recovers_the_target() {
    let db = TestDatabase::create("admission_killed");
    heavy_source(&db.name, 3_000_000);
    let dir = two_pipelines(&db.name);
    let killed = stb_test_support::unique_name("killed");
    let mut child = spawn(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "heavy"],
        &killed,
    );
    wait_for_step(&db.name, &killed, "replay_heavy");
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    // Still within its signal window: running, so an overlapping build is refused.
    assert_eq!(refused(dir.path(), "heavy")["code"], "STB-RUNS-003");

    // Unresponsive: overlapping builds are still refused, with how long is left.
    assert!(wait_for(Duration::from_secs(30), || status_of(
        dir.path(),
        &killed
    ) == "unresponsive"));
    let error = refused(dir.path(), "heavy");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains(&format!("Run {killed} is unresponsive: no signal for"))
            && message
                .contains("configured safety window: 30s via defaults.run_presumed_failed_after")
            && message.contains("Retry after that."),
        "{message}"
    );
    // Another pipeline is admitted, but the lock of a silent run is not waited for.
    let error = refused(dir.path(), "light");
    assert_eq!(error["code"], "STB-RUNS-004", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains(&killed) && m.contains("unresponsive")),
        "{error}"
    );

    // Presumed failed: admission lets builds through; the lock it left still stops them,
    // and says how to recover.
    assert!(wait_for(Duration::from_secs(120), || status_of(
        dir.path(),
        &killed
    ) == "presumed_failed"));
    let error = refused(dir.path(), "heavy");
    assert_eq!(error["code"], "STB-RUNS-004", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("presumed failed")),
        "{error}"
    );
    assert!(
        error["hint"]
            .as_str()
            .is_some_and(|h| h.contains("stb unlock")),
        "{error}"
    );
    let unlocked = json(&run(dir.path(), &["unlock", "--json"]));
    assert_eq!(unlocked["broken_owner"], killed.as_str(), "{unlocked}");

    let rebuilt = json(&run(dir.path(), &["build", "--auto-approve", "--json"]));
    assert_eq!(rebuilt["status"], "succeeded", "{rebuilt}");
    assert_exact(&db.name, "heavy");
    assert_exact(&db.name, "light");
}

#[test]
fn a_build_beyond_the_pipelines_it_was_authorised_for_does_not_start() {
    let db = TestDatabase::create("admission_scope");
    heavy_source(&db.name, 30);
    let dir = two_pipelines(&db.name);
    let refused = command(dir.path(), &["build", "--auto-approve", "--json"])
        .env(
            "STREAMBUILD_EXPECTED_BUILD_PIPELINE_SCOPE",
            r#"["pl__light"]"#,
        )
        .output()
        .expect("stb build");
    assert!(!refused.status.success());
    let error = json(&refused)["error"].clone();
    assert_eq!(error["code"], "STB-RUNS-006", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("pl__heavy")),
        "{error}"
    );
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{}' AND name LIKE 'tbl\\_\\_%' FORMAT TSV",
            db.name
        ))
        .trim(),
        "0",
        "nothing was built"
    );
    // Within what was authorised, it builds.
    let built = command(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "light"],
    )
    .env(
        "STREAMBUILD_EXPECTED_BUILD_PIPELINE_SCOPE",
        r#"["pl__light"]"#,
    )
    .output()
    .expect("stb build");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stdout)
    );
    assert_exact(&db.name, "light");
}

/// A third pipeline over an adopted table of its own, `side_events`.
fn side_files(dir: &Path, amount: &str) {
    std::fs::create_dir_all(dir.join("pipelines/pl__side")).expect("dir");
    std::fs::write(
        dir.join("sources/side.yml"),
        "sources:\n  - name: side_feed\n    kind: stream_table\n    table_name: side_events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("pipelines/pl__side/side.sql"),
        format!("MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, {amount}\nFROM __source(\"side_feed\")\n"),
    )
    .expect("write");
}

#[test]
fn a_build_that_waited_for_the_lock_checks_its_statements_again_before_any_change() {
    let db = TestDatabase::create("admission_recheck");
    heavy_source(&db.name, 6_000_000);
    execute(&format!(
        "CREATE TABLE {}.side_events (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), amount UInt64) ENGINE = MergeTree ORDER BY (p, o)",
        db.name
    ));
    execute(&format!(
        "INSERT INTO {}.side_events SELECT number % 3, intDiv(number, 3), toDateTime64('2026-11-01 00:00:00', 3, 'UTC'), number FROM numbers(30)",
        db.name
    ));
    let dir = two_pipelines(&db.name);
    side_files(dir.path(), "amount::UInt64 AS amount");
    let first = json(&run(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "side"],
    ));
    assert_eq!(first["status"], "succeeded", "{first}");
    // Nothing changed between its plan and its lock: one catalog read instead of the checks.
    assert_eq!(
        execute(&format!(
            "SELECT countIf(JSONExtractBool(payload_json, 'unchanged')), count() FROM {}._streambuild_run_events WHERE event_kind = 'statements_rechecked' FORMAT TSV",
            db.name
        ))
        .trim(),
        "1\t1"
    );
    // And that read carried the restore point: the run did not read it again.
    assert_eq!(
        execute(&format!(
            "SELECT countIf(JSONExtractBool(payload_json, 'readAhead')), count() FROM {}._streambuild_run_events WHERE event_kind = 'restore_point' FORMAT TSV",
            db.name
        ))
        .trim(),
        "1\t1"
    );
    let rows = |db: &str| {
        execute(&format!(
            "SELECT * FROM {db}.tbl__side ORDER BY ALL FORMAT TSV"
        ))
    };
    let before = rows(&db.name);
    // A change whose plan and checks pass now.
    side_files(dir.path(), "(amount * 2)::UInt64 AS amount");
    let heavy = stb_test_support::unique_name("heavy");
    let mut holder = spawn(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "heavy"],
        &heavy,
    );
    wait_for_step(&db.name, &heavy, "replay_heavy");
    let side = stb_test_support::unique_name("side");
    let waiting = spawn(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "side"],
        &side,
    );
    let queued = wait_for(Duration::from_secs(60), || {
        execute(&format!(
            "SELECT count() FROM {}._streambuild_run_events WHERE invocation_id = '{side}' AND event_kind = 'lock_waiting' FORMAT TSV",
            db.name
        ))
        .trim()
            == "1"
    });
    assert!(queued, "the side build never waited for the lock");
    // While it waits, the column its query reads goes away.
    execute(&format!(
        "ALTER TABLE {}.side_events RENAME COLUMN amount TO amount_old",
        db.name
    ));
    let output = waiting.wait_with_output().expect("the side build ends");
    assert!(holder.wait().expect("the heavy build ends").success());
    assert_eq!(output.status.code(), Some(1));
    let error = json(&output)["error"].clone();
    assert_eq!(error["code"], "STB-PLAN-006", "{error}");
    assert!(
        error["message"].as_str().is_some_and(|m| m
            .contains("the warehouse changed while this build waited")
            && m.contains("pipelines/pl__side/side.sql:2:")),
        "{error}"
    );
    assert_eq!(rows(&db.name), before, "the side model was not touched");
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{}' AND name = 'mv__side' FORMAT TSV",
            db.name
        ))
        .trim(),
        "1",
        "its view is still there"
    );
    assert_eq!(
        status_of(dir.path(), &side),
        "failed",
        "the refusal is on record"
    );
}
