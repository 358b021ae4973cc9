//! `stb admin` end to end: accounts in the project's SQLite control store and in a real
//! PostgreSQL one, passwords from standard input or a terminal prompt (never echoed), the
//! last-admin rule, and no secret in any output.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const PASSWORD: &str = "a long enough password";

fn admin_at(dir: &Path, url: Option<&str>, args: &[&str], input: &str) -> Output {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("stb"));
    command
        .arg("admin")
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .env_remove("STREAMBUILD_CONTROL_STORE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(url) = url {
        command.env("STREAMBUILD_CONTROL_STORE_URL", url);
    }
    let mut child = command.spawn().expect("stb admin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("input");
    child.wait_with_output().expect("ran")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The same account lifecycle against whichever store `url` names.
fn lifecycle(dir: &Path, url: Option<&str>) {
    let run = |args: &[&str], input: &str| admin_at(dir, url, args, input);
    let ok = |args: &[&str], input: &str| {
        let output = run(args, input);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let code = |args: &[&str], input: &str| {
        let output = run(&[args, &["--json"]].concat(), input);
        assert!(!output.status.success(), "{args:?} should fail");
        let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        json["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(ok(&["migrate"], ""), "StreamBuild account schema is ready");
    let created = ok(
        &[
            "create-user",
            "--username",
            " Ana ",
            "--authentication-source",
            "password",
            "--role",
            "admin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(created.starts_with("Created user ana ("), "{created}");
    // JSON: the user, never its password or hash.
    let output = run(
        &[
            "create-user",
            "--username",
            "proxy.ops",
            "--authentication-source",
            "trusted_proxy",
            "--json",
        ],
        "",
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["user"]["username"], "proxy.ops", "{json}");
    assert_eq!(json["user"]["roles"], serde_json::json!(["viewer"]));
    assert_eq!(
        code(
            &[
                "create-user",
                "--username",
                "ANA",
                "--authentication-source",
                "password"
            ],
            &format!("{PASSWORD}\n")
        ),
        "STB-CONTROL-004"
    );
    assert_eq!(
        code(
            &[
                "create-user",
                "--username",
                "bob",
                "--authentication-source",
                "password"
            ],
            "\n"
        ),
        "STB-ADMIN-001"
    );
    assert_eq!(
        code(
            &[
                "create-user",
                "--username",
                "bob",
                "--authentication-source",
                "password"
            ],
            "short\n"
        ),
        "STB-CONTROL-005"
    );
    // The last active admin stays one.
    assert_eq!(
        code(&["disable-user", "--username", "ana"], ""),
        "STB-CONTROL-006"
    );
    assert_eq!(
        code(&["revoke-role", "--username", "ana", "--role", "admin"], ""),
        "STB-CONTROL-006"
    );
    assert_eq!(
        ok(
            &["grant-role", "--username", "proxy.ops", "--role", "admin"],
            ""
        ),
        "Granted admin to proxy.ops"
    );
    assert_eq!(
        ok(&["disable-user", "--username", "ana"], ""),
        "Disabled ana"
    );
    assert_eq!(ok(&["enable-user", "--username", "ana"], ""), "Enabled ana");
    assert_eq!(
        ok(
            &["revoke-role", "--username", "proxy.ops", "--role", "admin"],
            ""
        ),
        "Revoked admin from proxy.ops"
    );
    assert_eq!(
        ok(
            &["reset-password", "--username", "ana"],
            "another long password\n"
        ),
        "Reset password for ana"
    );
    let missing = run(
        &["reset-password", "--username", "ghost"],
        &format!("{PASSWORD}\n"),
    );
    assert!(
        text(&missing).contains("User 'ghost' was not found"),
        "{}",
        text(&missing)
    );
    assert_eq!(
        code(
            &["grant-role", "--username", "ana", "--role", "operator"],
            ""
        ),
        "STB-CONTROL-005"
    );
}

#[test]
fn accounts_live_in_the_projects_sqlite_store_by_default() {
    let dir = tempfile::tempdir().expect("dir");
    lifecycle(dir.path(), None);
    let file = dir.path().join(".streambuild/control.db");
    assert!(file.is_file());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&file.metadata().expect("meta").permissions());
    assert_eq!(mode & 0o077, 0, "only its owner reads the store: {mode:o}");
    let bytes = std::fs::read(&file).expect("read");
    assert!(
        !String::from_utf8_lossy(&bytes).contains(PASSWORD),
        "no password in clear"
    );
}

#[test]
fn the_same_commands_work_on_a_postgres_store_whose_password_never_shows() {
    let dir = tempfile::tempdir().expect("dir");
    let name = stb_test_support::unique_name("admin");
    let server = stb_test_support::postgres_url();
    let created = Command::new("psql")
        .args([server, "-qAtc", &format!("CREATE DATABASE {name}")])
        .output()
        .expect("psql");
    assert!(created.status.success(), "{created:?}");
    let url = stb_test_support::postgres_database_url(&name);
    lifecycle(dir.path(), Some(&url));
    assert!(
        !dir.path().join(".streambuild").exists(),
        "no SQLite file when a URL is given"
    );
    // A URL with a password: shown redacted.
    let with_password = url.replace("stb@", "stb:pg-secret-value@");
    let output = admin_at(dir.path(), Some(&with_password), &["migrate", "--json"], "");
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(!shown.contains("pg-secret-value"), "{shown}");
    assert!(shown.contains("stb:***@"), "{shown}");
}

#[test]
fn a_terminal_prompts_twice_without_echo() {
    let dir = tempfile::tempdir().expect("dir");
    let stb = assert_cmd::cargo::cargo_bin("stb");
    // Each answer is typed once its prompt shows (typed earlier, the terminal would echo
    // it before the prompt turns echo off).
    let typed = |username: &str, answers: [&str; 2]| {
        let line = format!(
            "'{}' admin create-user --username {username} --authentication-source password --project-dir '{}'",
            stb.display(),
            dir.path().display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env_remove("STREAMBUILD_CONTROL_STORE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("script runs");
        let mut stdout = child.stdout.take().expect("stdout");
        let shown = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let reader = {
            let shown = std::sync::Arc::clone(&shown);
            std::thread::spawn(move || {
                let mut chunk = [0_u8; 256];
                while let Ok(n) = std::io::Read::read(&mut stdout, &mut chunk) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut all) = shown.lock() {
                        all.push_str(&String::from_utf8_lossy(&chunk[..n]));
                    }
                }
            })
        };
        let mut stdin = child.stdin.take().expect("stdin");
        for (prompt, answer) in ["Password: ", "Confirm password: "].iter().zip(answers) {
            let appeared = stb_test_support::wait_for(std::time::Duration::from_secs(20), || {
                shown.lock().is_ok_and(|s| s.contains(prompt))
            });
            assert!(appeared, "no prompt {prompt:?}");
            std::thread::sleep(std::time::Duration::from_millis(100));
            stdin
                .write_all(format!("{answer}\n").as_bytes())
                .expect("typed");
        }
        drop(stdin);
        let status = child.wait().expect("ran");
        let _ = reader.join();
        let shown = shown.lock().map(|s| s.clone()).unwrap_or_default();
        (status.code(), shown)
    };
    let (code, shown) = typed("carol", [PASSWORD, PASSWORD]);
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("Password: "), "{shown}");
    assert!(shown.contains("Confirm password: "), "{shown}");
    assert!(shown.contains("Created user carol"), "{shown}");
    assert!(
        !shown.contains(PASSWORD),
        "the password is not echoed: {shown}"
    );
    let (code, shown) = typed("dave", [PASSWORD, "something else entirely"]);
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("Passwords do not match"), "{shown}");
}
