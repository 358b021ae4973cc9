//! `stb destroy` and `stb reset-target` end to end, at a terminal: `script` gives the
//! command a pseudo-terminal and types the answers. Refused without a terminal, with a
//! wrong challenge, or when a view outside the destruction reads what it would drop; a
//! confirmed destruction drops exactly the pipeline's relations and records its run.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use stb_test_support::{TestDatabase, execute};

use crate::deployments::{events_table, insert, mixed_project, ok_json, promote};

/// Runs `stb <args>` on the project in `dir` at a pseudo-terminal, typing `input`.
/// The OS user `at_terminal` runs as.
const OPERATOR: &str = "destroyer";

/// `stb admin <args>` on the project in `dir`'s control store, `input` on stdin.
fn admin(dir: &Path, args: &[&str], input: &str) -> std::process::Output {
    let mut command = vec!["admin"];
    command.extend_from_slice(args);
    stb_test_support::stb_on_project(dir, &command, input)
}

pub(crate) fn at_terminal(dir: &Path, args: &[&str], input: &str) -> (i32, String) {
    let stb = assert_cmd::cargo::cargo_bin("stb");
    let quote = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
    let mut line = quote(&stb.to_string_lossy());
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line.push_str(" --project-dir ");
    line.push_str(&quote(&dir.to_string_lossy()));
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .envs(stb_test_support::warehouse_env())
        // The local account the control store must know as an admin to destroy.
        .env("USER", OPERATOR)
        .env("LOGNAME", OPERATOR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("typed");
    let output = child.wait_with_output().expect("finished");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

fn relations(database: &str) -> Vec<String> {
    execute(&format!(
        "SELECT name FROM system.tables WHERE database = '{database}' AND name NOT LIKE '\\_streambuild\\_%' ORDER BY name FORMAT TSV"
    ))
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
fn a_pipeline_is_destroyed_only_when_reviewed_and_typed_at_a_terminal() {
    let db = TestDatabase::create("destroy");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = mixed_project(&db.name, None);
    let built = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    let first = built["virtual"]["deployment_id"]
        .as_str()
        .expect("id")
        .to_owned();
    promote(dir.path(), &first);
    let before = relations(&db.name);
    assert!(before.contains(&"tbl__plain".to_owned()), "{before:?}");

    // No terminal: refused before anything is read.
    let piped = stb_test_support::stb_on_project(
        dir.path(),
        &["destroy", "--select", "pipeline:pl__d", "--json"],
        "y\npl__d\n",
    );
    assert!(!piped.status.success());
    let error: serde_json::Value = serde_json::from_slice(&piped.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-DESTROY-002");

    // Only an active admin of the control store may destroy.
    let destroy = ["destroy", "--select", "pipeline:pl__d"];
    let (code, output) = at_terminal(dir.path(), &destroy, "y\npl__d\n");
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("STB-DESTROY-003"), "{output}");
    assert!(output.contains("'destroyer' is not an account"), "{output}");
    let created = admin(
        dir.path(),
        &[
            "create-user",
            "--username",
            OPERATOR,
            "--authentication-source",
            "password",
        ],
        "a long enough password\n",
    );
    assert!(created.status.success(), "{created:?}");
    let (code, output) = at_terminal(dir.path(), &destroy, "y\npl__d\n");
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("is not an admin"), "{output}");
    assert_eq!(relations(&db.name), before);
    let granted = admin(
        dir.path(),
        &["grant-role", "--username", OPERATOR, "--role", "admin"],
        "",
    );
    assert!(granted.status.success(), "{granted:?}");

    // A wrong challenge drops nothing; neither does declining the review.
    let (code, output) = at_terminal(dir.path(), &destroy, "y\npl__x\n");
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("Destruction cancelled"), "{output}");
    let (code, _) = at_terminal(dir.path(), &destroy, "n\n");
    assert_eq!(code, 1);
    assert_eq!(relations(&db.name), before);

    // A view outside the destruction reads the pipeline's table: refused.
    execute(&format!(
        "CREATE VIEW {0}.by_hand AS SELECT count() FROM {0}.tbl__plain",
        db.name
    ));
    let (code, output) = at_terminal(dir.path(), &destroy, "y\npl__d\n");
    assert_eq!(code, 1, "{output}");
    assert!(output.contains("STB-DESTROY-001"), "{output}");
    assert!(output.contains(&format!("{}.by_hand", db.name)), "{output}");
    execute(&format!("DROP VIEW {}.by_hand", db.name));

    // Reviewed and typed: the plan says what it drops in rows, then drops exactly that.
    let (code, output) = at_terminal(dir.path(), &destroy, "y\npl__d\n");
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("DROP TABLE IF EXISTS"), "{output}");
    assert!(output.contains("(30 rows"), "{output}");
    let after = relations(&db.name);
    let expected: Vec<String> = before
        .iter()
        .filter(|r| *r != "tbl__plain" && *r != "mv__plain")
        .cloned()
        .collect();
    assert_eq!(after, expected);
    let recorded = execute(&format!(
        "SELECT command, mode, outcome FROM {}._streambuild_invocations WHERE command = 'destroy' FORMAT TSV",
        db.name
    ));
    assert_eq!(recorded.trim(), "destroy\tdestructive\tsucceeded");
    let statements = execute(&format!(
        "SELECT count() FROM {0}._streambuild_run_statements WHERE invocation_id IN (SELECT invocation_id FROM {0}._streambuild_invocations WHERE command = 'destroy') FORMAT TSV",
        db.name
    ));
    assert_eq!(statements.trim(), "2");

    // A reset drops everything the project owns, copies and stable views included; the
    // adopted table and the lifecycle tables stay.
    let (code, output) = at_terminal(dir.path(), &["reset-target"], "y\npl__v\n");
    assert_eq!(code, 0, "{output}");
    assert_eq!(relations(&db.name), ["events"]);
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM {}.events FORMAT TSV",
            db.name
        ))
        .trim(),
        "30"
    );
}
