//! `stb local up | status | env | down` end to end, in a private state directory, run from
//! an unrelated working directory.

use std::net::TcpListener;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn stb(cwd: &std::path::Path) -> Command {
    let mut command = Command::cargo_bin("stb").expect("the stb binary");
    command.current_dir(cwd).env_remove("STB_LOCAL_HOME");
    command
}

fn json(output: &[u8]) -> Value {
    serde_json::from_slice(output).expect("JSON on stdout")
}

#[test]
fn version_and_help_describe_the_tool() {
    let cwd = tempfile::tempdir().expect("tempdir");
    stb(cwd.path())
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("stb "));
    stb(cwd.path())
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("local"));
}

#[test]
fn up_status_env_down_are_idempotent_from_any_directory() {
    // The shared test stack has installed the Python environment this stack reuses.
    let _ = stb_test_support::stack();
    let state = tempfile::tempdir().expect("state dir");
    let elsewhere = tempfile::tempdir().expect("unrelated cwd");
    let state_arg = state.path().to_str().expect("utf-8 path");
    let up = [
        "local",
        "up",
        "--state-dir",
        state_arg,
        "--clickhouse-port",
        "0",
        "--kafka-port",
        "0",
        "--json",
    ];

    let first = json(
        &stb(elsewhere.path())
            .args(up)
            .assert()
            .success()
            .get_output()
            .stdout,
    );
    assert_eq!(first["clickhouse"]["running"], true);
    assert_eq!(first["kafka"]["running"], true);
    assert_eq!(first["clickhouse"]["version"], "26.9.2.1");
    let second = json(
        &stb(std::path::Path::new("/"))
            .args(up)
            .assert()
            .success()
            .get_output()
            .stdout,
    );
    assert_eq!(
        second["clickhouse"]["pid"], first["clickhouse"]["pid"],
        "a second up reuses the server"
    );
    assert_eq!(second["kafka"]["pid"], first["kafka"]["pid"]);

    // A server started by another stb (its code fingerprint differs) is replaced, on the
    // same port; the broker keeps running.
    let state_file = state.path().join("stack.json");
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).expect("stack.json"))
            .expect("JSON");
    let mut stale = recorded.clone();
    stale["clickhouse"]["server_fingerprint"] = "0000000000000000".into();
    std::fs::write(&state_file, stale.to_string()).expect("write stack.json");
    let output = stb(elsewhere.path())
        .args(up)
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("runs code from another stb version: restarting it"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let restarted = json(&output.stdout);
    assert_ne!(restarted["clickhouse"]["pid"], first["clickhouse"]["pid"]);
    assert_eq!(restarted["clickhouse"]["port"], first["clickhouse"]["port"]);
    assert_eq!(restarted["kafka"]["pid"], first["kafka"]["pid"]);
    let rewritten: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).expect("stack.json"))
            .expect("JSON");
    assert_eq!(
        rewritten["clickhouse"]["server_fingerprint"],
        recorded["clickhouse"]["server_fingerprint"]
    );

    let port = first["clickhouse"]["port"].as_u64().expect("port");
    let version = stb_localstack::probe::http_get(
        u16::try_from(port).expect("port"),
        "/?query=SELECT%20version()",
    )
    .expect("query");
    assert_eq!(version, (200, "26.9.2.1\n".to_owned()));

    let status = json(
        &stb(elsewhere.path())
            .args(["local", "status", "--state-dir", state_arg, "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    );
    assert_eq!(status["clickhouse"]["port"], first["clickhouse"]["port"]);
    let env_file = std::fs::read_to_string(state.path().join("stack.env")).expect("env file");
    assert!(
        env_file.contains(&format!("STB_LOCAL_CLICKHOUSE_PORT={port}")),
        "{env_file}"
    );
    stb(elsewhere.path())
        .args(["local", "env", "--state-dir", state_arg])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "export STB_LOCAL_CLICKHOUSE_URL=http://127.0.0.1:{port}"
        )));

    for _ in 0..2 {
        let down = json(
            &stb(elsewhere.path())
                .args(["local", "down", "--state-dir", state_arg, "--json"])
                .assert()
                .success()
                .get_output()
                .stdout,
        );
        assert_eq!(down["clickhouse"]["running"], false);
        assert_eq!(down["kafka"]["running"], false);
    }
    assert!(!stb_localstack::probe::port_open(
        u16::try_from(port).expect("port")
    ));
    stb(elsewhere.path())
        .args(["local", "env", "--state-dir", state_arg])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("STB-LOCAL-008"));
}

#[test]
fn a_busy_port_is_a_coded_error_with_a_hint() {
    let _ = stb_test_support::stack();
    let holder = TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = holder.local_addr().expect("addr").port().to_string();
    let state = tempfile::tempdir().expect("state dir");
    let state_arg = state.path().to_str().expect("utf-8 path");
    let output = stb(state.path())
        .args([
            "local",
            "up",
            "--state-dir",
            state_arg,
            "--kafka-port",
            &busy,
            "--json",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let error = json(&output);
    assert_eq!(error["error"]["code"], "STB-LOCAL-003");
    assert!(
        error["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--kafka-port"))
    );
    stb(state.path())
        .args(["local", "down", "--state-dir", state_arg])
        .assert()
        .success();
}
