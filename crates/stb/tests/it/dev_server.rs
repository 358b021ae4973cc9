//! `stb dev` end to end: it refuses unsafe settings, starts on a free port, reaches the
//! warehouse in the background, serves runs to a password session, and stops on SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{TestDatabase, wait_for};

use crate::deployments::{events_table, insert, ok_json, project};

fn dev(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("stb"));
    command
        .arg("dev")
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env_remove("STREAMBUILD_AUTH_MODE")
        .env_remove("STREAMBUILD_CONTROL_STORE_URL");
    command
}

#[test]
fn unsafe_settings_are_refused_before_anything_starts() {
    let db = TestDatabase::create("dev_refused");
    let dir = project(&db.name);
    for (args, says) in [
        (
            vec!["--ui-host", "0.0.0.0"],
            "authentication is disabled and --ui-host 0.0.0.0 is not a loopback address",
        ),
        (
            vec![
                "--ui-host",
                "0.0.0.0",
                "--auth-mode",
                "password",
                "--auth-insecure-cookie",
            ],
            "insecure password cookies may only be used on a loopback address.",
        ),
        (
            vec![
                "--auth-mode",
                "trusted_proxy",
                "--auth-default-role",
                "admin",
            ],
            "auto-provisioned users are viewers",
        ),
        (
            vec!["--auth-session-ttl-seconds", "0"],
            "must be greater than 0",
        ),
    ] {
        let output = dev(dir.path(), &args).output().expect("stb dev");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("STB-DEV-001"), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn the_server_signs_in_serves_runs_and_stops_on_sigterm() {
    let db = TestDatabase::create("dev");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = project(&db.name);
    let built = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(built["status"], "succeeded");
    let created = stb_test_support::stb_on_project(
        dir.path(),
        &[
            "admin",
            "create-user",
            "--username",
            "ana",
            "--authentication-source",
            "password",
            "--role",
            "admin",
        ],
        "a long enough password\n",
    );
    assert!(created.status.success(), "{created:?}");

    let mut child = dev(
        dir.path(),
        &[
            "--ui-port",
            "0",
            "--auth-mode",
            "password",
            "--auth-insecure-cookie",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("stb dev starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let api = loop {
        let line = lines
            .next()
            .expect("the banner names the API")
            .expect("a line");
        if let Some(url) = line.trim().strip_prefix("api") {
            break url.trim().to_owned();
        }
    };
    let http = stb_test_support::http();
    let get = |path: &str, cookie: Option<&str>| {
        let mut request = http.get(format!("{api}{path}"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let response = request.send().expect("answered");
        let status = response.status().as_u16();
        let body = response.text().unwrap_or_default();
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    assert_eq!(get("/auth/me", None).0, 401);
    // The warehouse is reached in the background.
    let response = http
        .post(format!("{api}/auth/login"))
        .header("content-type", "application/json")
        .body(r#"{"username": "ana", "password": "a long enough password"}"#)
        .send()
        .expect("login");
    assert!(response.status().is_success(), "{response:?}");
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let ready = wait_for(Duration::from_secs(30), || {
        get("/status", Some(&cookie)).1["warehouse"]["connected"] == true
    });
    assert!(ready, "the warehouse connects");
    let (status, runs) = get("/runs", Some(&cookie));
    assert_eq!(status, 200, "{runs}");
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "succeeded", "{runs}");
    let id = run["invocation_id"].as_str().expect("id");
    let (status, detail) = get(&format!("/runs/{id}"), Some(&cookie));
    assert_eq!(status, 200);
    assert!(
        detail["statements"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(get("/runs/nope", Some(&cookie)).0, 404);
    assert_eq!(get("/nothing-here", Some(&cookie)).0, 404);

    let signalled = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(signalled.success());
    let status = child.wait().expect("stops");
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l == "dev server stopped"), "{rest:?}");
}
