//! `stb init` writes a project that builds on the local stack as it is written, and whose
//! SQL test and audits pass once rows flow (issue 25): with a Kafka source fed by
//! `stb local produce`, and with `--adopted` over a table the test fills.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{execute, stack, stb_on_project, unique_name};

/// Drops the new project's database when the test ends, however it ends.
struct DropDatabase(String);

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let _ = stb_test_support::http()
            .post(&stack().clickhouse_url)
            .body(format!("DROP DATABASE IF EXISTS {} SYNC", self.0))
            .send();
    }
}

fn stb(args: &[&str], stdin: &str) -> Output {
    assert_cmd::Command::cargo_bin("stb")
        .expect("the stb binary")
        .args(args)
        .write_stdin(stdin)
        .output()
        .expect("stb runs")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// `stb init DIR --name NAME [extra]`: the JSON it printed.
fn init(dir: &Path, name: &str, extra: &[&str]) -> Value {
    let dir = dir.to_str().expect("UTF-8 path");
    let mut args = vec!["init", dir, "--name", name, "--json"];
    args.extend_from_slice(extra);
    json_of(&stb(&args, ""))
}

fn vars() -> String {
    serde_json::json!({ "kafka_brokers": stack().kafka_brokers }).to_string()
}

/// Events and amounts per kind in the aggregate model.
fn sums(database: &str) -> String {
    execute(&format!(
        "SELECT kind, sum(events), sum(total_amount) FROM {database}.tbl__amount_per_kind \
         GROUP BY kind ORDER BY kind FORMAT TSV"
    ))
}

/// The three events both projects get: two clicks (amounts 2 and 3) and one view.
const EVENTS: [(&str, &str, u64); 3] = [("e1", "click", 2), ("e2", "click", 3), ("e3", "view", 1)];

#[test]
fn a_new_kafka_project_builds_on_the_local_stack_and_its_test_and_audits_pass() {
    let name = unique_name("init");
    let database = format!("{name}_dev");
    let _cleanup = DropDatabase(database.clone());
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("shop");
    let created = init(&dir, &name, &[]);
    assert_eq!(created["database"], database.as_str(), "{created}");
    assert_eq!(created["source"], "kafka", "{created}");
    let gitignore = std::fs::read_to_string(dir.join(".gitignore")).expect(".gitignore");
    for ignored in ["streambuild_local.toml", ".streambuild/", "target/"] {
        assert!(
            gitignore.lines().any(|l| l == ignored),
            "{ignored}: {gitignore}"
        );
    }

    let vars = vars();
    json_of(&stb_on_project(
        &dir,
        &["build", "--auto-approve", "--json", "--vars", &vars],
        "",
    ));
    // The events reach the topic through `stb local produce`, on the stack's broker.
    let lines: String = EVENTS
        .iter()
        .map(|(id, kind, amount)| {
            format!("{{\"event_id\":\"{id}\",\"kind\":\"{kind}\",\"amount\":{amount}}}\n")
        })
        .collect();
    let state_dir = stack().layout.state_dir.to_str().expect("UTF-8").to_owned();
    let topic = format!("{name}.events");
    let sent = json_of(&stb(
        &[
            "local",
            "produce",
            "--topic",
            &topic,
            "--state-dir",
            &state_dir,
            "--json",
        ],
        &lines,
    ));
    assert_eq!(sent["messages"], 3, "{sent}");
    checked_after_rows_arrive(&dir, &database);
}

#[test]
fn a_new_adopted_project_builds_over_its_table_and_its_test_and_audits_pass() {
    let name = unique_name("init_adopted");
    let database = format!("{name}_dev");
    let _cleanup = DropDatabase(database.clone());
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("adopted");
    let created = init(&dir, &name, &["--adopted"]);
    assert_eq!(created["source"], "stream_table", "{created}");
    // The table is made with the DDL stb init printed, and filled before the build: the
    // build replays it.
    execute(&format!("CREATE DATABASE IF NOT EXISTS `{database}`"));
    execute(
        created["adopted_table_ddl"]
            .as_str()
            .expect("the table's DDL"),
    );
    let rows: Vec<String> = EVENTS
        .iter()
        .map(|(id, kind, amount)| {
            format!("('{id}', '{}', {amount}, now64(3))", kind.to_uppercase())
        })
        .collect();
    execute(&format!(
        "INSERT INTO {database}.events_in VALUES {}",
        rows.join(", ")
    ));
    let vars = vars();
    json_of(&stb_on_project(
        &dir,
        &["build", "--auto-approve", "--json", "--vars", &vars],
        "",
    ));
    checked_after_rows_arrive(&dir, &database);
}

/// Waits for the three events in amount_per_kind, checks their sums, then runs `stb test`
/// and `stb audit`: both pass, every audit over rows (not over an empty model).
fn checked_after_rows_arrive(dir: &Path, database: &str) {
    let arrived = stb_test_support::wait_for(Duration::from_secs(120), || {
        execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{database}' AND name = 'tbl__amount_per_kind' FORMAT TSV"
        ))
        .trim()
            == "1"
            && execute(&format!(
                "SELECT sum(events) FROM {database}.tbl__amount_per_kind FORMAT TSV"
            ))
            .trim()
                == "3"
    });
    assert!(arrived, "the three events never reached amount_per_kind");
    assert_eq!(sums(database), "click\t2\t5\nview\t1\t1\n");
    let vars = vars();
    let tested = json_of(&stb_on_project(
        dir,
        &["test", "--json", "--vars", &vars],
        "",
    ));
    assert_eq!(tested["passed"], 1, "{tested}");
    assert_eq!(tested["failed"], 0, "{tested}");
    let audited = json_of(&stb_on_project(
        dir,
        &["audit", "--json", "--vars", &vars],
        "",
    ));
    assert_eq!(audited["result"], "PASS", "{audited}");
    let results = audited["results"].as_array().expect("results");
    assert!(
        results.len() >= 2,
        "the custom and the column audits ran: {audited}"
    );
    for result in results {
        assert_eq!(result["status"], "passed", "{audited}");
        let checked = result["checked_rows"].as_array().expect("checked rows");
        assert!(
            !checked.is_empty() && checked.iter().all(|r| r["rows"].as_u64() > Some(0)),
            "every audit read rows: {audited}"
        );
    }
}

#[test]
fn init_never_writes_over_a_project() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("p");
    init(&dir, "p", &[]);
    let project = std::fs::read_to_string(dir.join("streambuild_project.toml")).expect("read");
    let again = stb(&["init", dir.to_str().expect("UTF-8"), "--json"], "");
    assert_eq!(again.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&again.stdout).expect("JSON");
    assert_eq!(error["error"]["code"], "STB-INIT-001", "{error}");
    assert_eq!(
        std::fs::read_to_string(dir.join("streambuild_project.toml")).expect("read"),
        project
    );
    // A name that is not an identifier is refused before anything is written.
    let bad = stb(
        &[
            "init",
            root.path().join("q").to_str().expect("UTF-8"),
            "--name",
            "no-dash",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("STB-INIT-002"));
    assert!(!root.path().join("q").exists());
}
