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
fn runs(dir: &Path, args: &[&str]) -> Value {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .arg("runs")
        .args(args)
        .args(["--json", "--project-dir"])
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env("STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS", "3")
        .env("STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS", "8")
        .output()
        .expect("stb runs");
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
    let unknown = std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(["runs", "show", "nope", "--json", "--project-dir"])
        .arg(dir.path())
        .envs(stb_test_support::warehouse_env())
        .output()
        .expect("stb runs");
    let error: Value = serde_json::from_slice(&unknown.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-RUNS-001");
}
