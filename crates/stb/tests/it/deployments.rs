//! Virtual deployments end to end on the local stack: build, list, promote, roll back, a
//! partial deployment reading its unchanged upstream from the active copy, the refusals,
//! and rows under a running writer compared as multisets after every build.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

pub(crate) const CLEAN: &str = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __source(\"events\")\n";
pub(crate) const BIG: &str = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, amount::UInt64 AS amount\nFROM __ref(\"clean\")\nWHERE amount > 10\n";

pub(crate) fn project(database: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!("name = \"v\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/events.yml".to_owned(),
            "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n".to_owned(),
        ),
        ("pipelines/pl__v/pipeline.toml".to_owned(), "mode = \"virtual\"\n".to_owned()),
        ("pipelines/pl__v/clean.sql".to_owned(), CLEAN.to_owned()),
        ("pipelines/pl__v/big.sql".to_owned(), BIG.to_owned()),
        (
            "pipelines/pl__v/report.sql".to_owned(),
            "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"big\")\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

pub(crate) fn events_table(database: &str) {
    execute(&format!(
        "CREATE TABLE {database}.events (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), amount UInt64) ENGINE = MergeTree ORDER BY (p, o)"
    ));
}

/// Three rows per step, offsets increasing per partition, event times relative to now.
pub(crate) fn insert(database: &str, from: u64, count: u64) {
    execute(&format!(
        "INSERT INTO {database}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number % 25 FROM numbers({}, {})",
        from * 3,
        count * 3
    ));
}

pub(crate) fn stb(dir: &Path, args: &[&str]) -> std::process::Output {
    stb_test_support::stb_on_project(dir, args, "")
}

pub(crate) fn ok_json(dir: &Path, args: &[&str]) -> Value {
    succeeded(args, &stb(dir, args))
}

/// The JSON of a command that succeeded; both streams when it did not.
fn succeeded(args: &[&str], output: &std::process::Output) -> Value {
    assert!(
        output.status.success(),
        "{args:?} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

pub(crate) fn error_code(dir: &Path, args: &[&str]) -> String {
    let output = stb(dir, args);
    assert!(!output.status.success(), "{args:?} should fail");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn build(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["build", "--auto-approve", "--json"];
    args.extend_from_slice(extra);
    let result = ok_json(dir, &args);
    assert_eq!(result["mode"], "virtual environments", "{result}");
    assert_eq!(result["status"], "succeeded", "{result}");
    result["deployment_id"].as_str().expect("id").to_owned()
}

pub(crate) fn promote(dir: &Path, id: &str) {
    let published = ok_json(dir, &["deployment", "promote", id, "--json"]);
    assert_eq!(published["publication"]["deployment_id"], id);
    // The reference's top-level names too.
    assert_eq!(published["operation"], "promote", "{published}");
    assert_eq!(published["deployment_id"], id, "{published}");
    assert_eq!(
        published["previous_deployment_id"], published["publication"]["previous_deployment_id"],
        "{published}"
    );
}

pub(crate) fn states(dir: &Path) -> Vec<(String, String)> {
    ok_json(dir, &["deployment", "list", "--json"])["deployments"]
        .as_array()
        .expect("deployments")
        .iter()
        .map(|d| {
            (
                d["deployment_id"].as_str().unwrap_or_default().to_owned(),
                d["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn rows(sql: &str) -> Vec<String> {
    execute(&format!("SELECT * FROM ({sql}) ORDER BY ALL FORMAT TSV"))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// clean and big through their stable views against the models run over the events.
fn assert_stable_views_match(database: &str, big_floor: u64) {
    assert_eq!(
        rows(&format!("SELECT * FROM {database}.tbl__clean")),
        rows(&format!("SELECT p, o, amount FROM {database}.events")),
        "clean"
    );
    assert_eq!(
        rows(&format!("SELECT * FROM {database}.tbl__big")),
        rows(&format!(
            "SELECT p, o, amount FROM {database}.events WHERE amount > {big_floor}"
        )),
        "big"
    );
}

#[test]
fn a_deployment_is_staged_promoted_superseded_and_rolled_back() {
    let db = TestDatabase::create("deploy_life");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);

    let first = build(dir.path(), &[]);
    assert_eq!(states(dir.path()), [(first.clone(), "staged".to_owned())]);
    // Staged beside production: the copies hold the history, no stable view exists yet.
    assert_eq!(
        rows(&format!("SELECT * FROM {}.tbl__clean__{first}", db.name)),
        rows(&format!("SELECT p, o, amount FROM {}.events", db.name))
    );
    let views = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name IN ('tbl__clean', 'tbl__big', 'view__report') FORMAT TSV",
        db.name
    ));
    assert_eq!(views.trim(), "0");

    promote(dir.path(), &first);
    assert_stable_views_match(&db.name, 10);
    assert_eq!(states(dir.path()), [(first.clone(), "active".to_owned())]);
    // Live rows reach the active copies.
    insert(&db.name, 20, 5);
    assert_stable_views_match(&db.name, 10);
    // Nothing changed: the plan is all no_op, and a build builds no deployment.
    let plan = ok_json(dir.path(), &["plan", "--json"]);
    assert_eq!(plan["rebuild_subtrees"], serde_json::json!([]), "{plan}");
    let nothing = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(nothing["status"], "nothing_changed", "{nothing}");
    assert_eq!(states(dir.path()).len(), 1);

    // A partial deployment: only big changes; its copy reads clean's active copy.
    std::fs::write(
        dir.path().join("pipelines/pl__v/big.sql"),
        BIG.replace("amount > 10", "amount > 20"),
    )
    .expect("write");
    // The plan shows what changed against what the active deployment recorded.
    let plan = ok_json(dir.path(), &["plan", "--json"]);
    let diffs = plan["sql_diffs"].as_array().expect("sql_diffs");
    assert_eq!(diffs.len(), 1, "{plan}");
    assert_eq!(diffs[0]["name"], "mv__big", "{plan}");
    let lines = diffs[0]["diff_lines"].to_string();
    assert!(
        lines.contains("\"-WHERE amount > 10\"") && lines.contains("\"+WHERE amount > 20\""),
        "{plan}"
    );
    let second = build(dir.path(), &[]);
    let mv = execute(&format!(
        "SELECT create_table_query FROM system.tables WHERE database = '{}' AND name = 'mv__big__{second}' FORMAT TSVRaw",
        db.name
    ));
    assert!(mv.contains(&format!("tbl__clean__{first}")), "{mv}");
    let copies = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name = 'tbl__clean__{second}' FORMAT TSV",
        db.name
    ));
    assert_eq!(copies.trim(), "0", "clean is not copied");
    // Readers still see the first deployment until the promotion; the diff says what the
    // promotion would change.
    assert_stable_views_match(&db.name, 10);
    let diff = ok_json(dir.path(), &["deployment", "diff", &second, "--json"]);
    let status = |name: &str| {
        diff["diff"]["relations"]
            .as_array()
            .expect("relations")
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
            .expect(name)
    };
    assert_eq!(status("tbl__clean"), "unchanged", "{diff}");
    assert_eq!(status("tbl__big"), "changed", "{diff}");
    let big = diff["diff"]["relations"]
        .as_array()
        .expect("relations")
        .iter()
        .find(|r| r["name"] == "tbl__big")
        .expect("big");
    assert!(
        big["to_rows"].as_u64() < big["from_rows"].as_u64(),
        "{diff}"
    );
    promote(dir.path(), &second);
    insert(&db.name, 25, 5);
    assert_stable_views_match(&db.name, 20);
    assert_eq!(
        states(dir.path()),
        [
            (second.clone(), "active".to_owned()),
            (first.clone(), "active".to_owned()),
        ],
        "clean stays bound to the first deployment"
    );

    // Back to the first deployment's big: its copy kept receiving live rows.
    let output = stb(
        dir.path(),
        &[
            "deployment",
            "rollback",
            "--previous",
            "--auto-approve",
            "--json",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let rolled: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(rolled["publication"]["operation"], "rollback");
    assert_eq!(rolled["publication"]["deployment_id"], first.as_str());
    assert_eq!(
        rolled["publication"]["previous_deployment_id"],
        second.as_str()
    );
    // As the reference prints them: at the top level.
    assert_eq!(rolled["operation"], "rollback", "{rolled}");
    assert_eq!(rolled["deployment_id"], first.as_str(), "{rolled}");
    assert_eq!(
        rolled["previous_deployment_id"],
        second.as_str(),
        "{rolled}"
    );
    assert_stable_views_match(&db.name, 10);

    // Refusals, each with its code.
    assert_eq!(
        error_code(
            dir.path(),
            &["deployment", "rollback", &first, "--auto-approve", "--json"]
        ),
        "STB-DEPLOY-003"
    );
    assert_eq!(
        error_code(
            dir.path(),
            &["deployment", "promote", "20261130T000000Z_nope", "--json"]
        ),
        "STB-DEPLOY-001"
    );
    assert_eq!(
        error_code(
            dir.path(),
            &[
                "build",
                "--auto-approve",
                "--json",
                "--deployment-id",
                &first
            ]
        ),
        "STB-BUILD-006"
    );
    assert_eq!(
        error_code(
            dir.path(),
            &["deployment", "rollback", "--previous", "--json"]
        ),
        "STB-BUILD-001"
    );
}

const RUN: u8 = 0;
const PAUSE: u8 = 1;
const PAUSED: u8 = 2;
const STOP: u8 = 3;

#[test]
fn virtual_builds_under_a_running_writer_lose_no_row_and_double_none() {
    let db = TestDatabase::create("deploy_writer");
    events_table(&db.name);
    insert(&db.name, 0, 50);
    let dir = project(&db.name);
    let state = Arc::new(AtomicU8::new(RUN));
    let writer = {
        let state = Arc::clone(&state);
        let database = db.name.clone();
        std::thread::spawn(move || {
            let mut next = 50;
            loop {
                match state.load(Ordering::SeqCst) {
                    STOP => return next,
                    PAUSE | PAUSED => {
                        state.store(PAUSED, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    _ => {
                        insert(&database, next, 1);
                        next += 1;
                        std::thread::sleep(std::time::Duration::from_millis(3));
                    }
                }
            }
        })
    };
    let rest = || {
        state.store(PAUSE, Ordering::SeqCst);
        while state.load(Ordering::SeqCst) != PAUSED {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let mut floor = 10;
    // Ten deployments: the greenfield one, then full refreshes of the root and partial
    // deployments of big alone, in turn.
    for round in 0..10 {
        let extra: Vec<&str> = match round {
            0 => Vec::new(),
            odd if odd % 2 == 1 => vec!["--select", "clean", "--full-refresh"],
            _ => {
                floor = if floor == 10 { 20 } else { 10 };
                std::fs::write(
                    dir.path().join("pipelines/pl__v/big.sql"),
                    BIG.replace("amount > 10", &format!("amount > {floor}")),
                )
                .expect("write");
                Vec::new()
            }
        };
        let id = build(dir.path(), &extra);
        promote(dir.path(), &id);
        rest();
        assert_stable_views_match(&db.name, floor);
        state.store(RUN, Ordering::SeqCst);
    }
    state.store(STOP, Ordering::SeqCst);
    let written = writer.join().expect("writer");
    assert!(written > 60, "the writer kept writing: {written}");
}

/// The step files of the last build in `dir`, in order.
fn build_steps(dir: &Path) -> Vec<std::path::PathBuf> {
    stb_test_support::sorted_files(&dir.join("target/run/build/steps"))
}

/// The file names of `paths`.
fn file_names(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn a_virtual_build_records_its_boundaries_and_its_step_files_reproduce_the_deployment() {
    let db = TestDatabase::create("deploy_steps");
    events_table(&db.name);
    // Partitions 0, 1 and 2, offsets 0 to 9 in each.
    insert(&db.name, 0, 10);
    let dir = project(&db.name);
    // A virtual plan writes target/run/plan/ as a direct one does: its JSON, and the
    // deployment's build as step files (replays and boundary records are templates).
    let planned = ok_json(dir.path(), &["plan", "--json"]);
    let plan_dir = dir.path().join("target/run/plan");
    let artifact: Value = serde_json::from_str(
        &std::fs::read_to_string(plan_dir.join("plan.json")).expect("plan.json"),
    )
    .expect("JSON");
    assert_eq!(artifact["deployment_id"], planned["deployment_id"]);
    assert_eq!(
        artifact["steps"], planned["steps"],
        "the reference's step labels"
    );
    let plan_steps = stb_test_support::sorted_files(&plan_dir.join("steps"));
    assert_eq!(
        Some(plan_steps.len()),
        artifact["workflow_steps"].as_array().map(Vec::len)
    );
    let plan_names = file_names(&plan_steps);
    for wanted in [
        "_persist_candidate_metadata.sql",
        "_capture_watermark_clean.sql.template",
        "_replay_clean.sql.template",
        "_complete_deployment.sql",
    ] {
        assert!(
            plan_names.iter().any(|n| n.ends_with(wanted)),
            "{wanted}: {plan_names:?}"
        );
    }
    let template = std::fs::read_to_string(plan_dir.join("workflow.template.sql"))
        .expect("workflow.template.sql");
    let texts: Vec<String> = plan_steps
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("step"))
        .collect();
    assert_eq!(template, texts.join("\n"));

    let id = build(dir.path(), &[]);
    // One row per partition of the root's driving input, at the highest offset replayed.
    let boundaries = |db: &str| {
        rows(&format!(
            "SELECT deployment_id, root_database_name, root_object_type, root_object_name, anchor_object_type, anchor_object_name, boundary_kind, value_kind, partition_value, lower_value, cutoff_value, cutoff_inclusive, captured_at FROM {db}._streambuild_virtual_replay_boundaries"
        ))
    };
    let recorded = boundaries(&db.name);
    let expected: Vec<String> = (0..3)
        .map(|p| {
            format!(
                "{id}\t{}\ttable\ttbl__clean__{id}\ttable\tevents\toffsets\tinteger\t{p}\t\\N\t9\ttrue",
                db.name
            )
        })
        .collect();
    let without_time = |rows: &[String]| -> Vec<String> {
        rows.iter()
            .map(|r| {
                r.rsplit_once('\t')
                    .map_or(r.as_str(), |(head, _)| head)
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(without_time(&recorded), expected);

    // The step files hold every statement the build ran, the records included, and
    // workflow.sql is exactly them joined.
    let steps = build_steps(dir.path());
    let names = file_names(&steps);
    for wanted in [
        "_persist_candidate_metadata.sql",
        "_capture_watermark_clean.sql",
        "_complete_deployment.sql",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(wanted)),
            "{wanted}: {names:?}"
        );
    }
    assert!(
        names
            .last()
            .is_some_and(|n| n.ends_with("_complete_deployment.sql")),
        "the header is written last: {names:?}"
    );
    let read_all: Vec<String> = steps
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("step"))
        .collect();
    let workflow = std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
        .expect("workflow.sql");
    assert_eq!(workflow, read_all.join("\n"));

    // Take the deployment away (its copies and every record of it), then run the step
    // files in order by hand: the same deployment comes back.
    let copies = |db: &str| {
        rows(&format!(
            "SELECT name FROM system.tables WHERE database = '{db}' AND endsWith(name, '__{id}')"
        ))
    };
    let header = |db: &str| {
        rows(&format!(
            "SELECT deployment_id, workflow_fingerprint, replay_lineage_mode, created_at, tool_version FROM {db}._streambuild_virtual_deployments"
        ))
    };
    let objects = |db: &str| {
        rows(&format!(
            "SELECT state_id, state_kind, deployment_id, logical_object_type, logical_object_name, physical_relation_name, is_selected_root, object_fingerprint, canonical_query FROM {db}._streambuild_virtual_object_state"
        ))
    };
    let contents = |db: &str| {
        [
            rows(&format!("SELECT * FROM {db}.tbl__clean__{id}")),
            rows(&format!("SELECT * FROM {db}.tbl__big__{id}")),
            rows(&format!("SELECT * FROM {db}.view__report__{id}")),
        ]
    };
    let before = (
        copies(&db.name),
        header(&db.name),
        objects(&db.name),
        contents(&db.name),
    );
    assert_eq!(before.1.len(), 1, "one header");
    assert!(!before.2.is_empty(), "objects recorded");
    for copy in &before.0 {
        execute(&format!("DROP TABLE {}.{copy} SYNC", db.name));
    }
    for table in [
        "_streambuild_virtual_deployments",
        "_streambuild_virtual_object_state",
        "_streambuild_virtual_replay_boundaries",
    ] {
        execute(&format!("TRUNCATE TABLE {}.{table}", db.name));
    }
    assert!(copies(&db.name).is_empty());
    for sql in &read_all {
        if sql
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
        {
            continue;
        }
        execute(sql.trim_end().trim_end_matches(';'));
    }
    assert_eq!(
        (
            copies(&db.name),
            header(&db.name),
            objects(&db.name),
            contents(&db.name)
        ),
        before
    );
    assert_eq!(boundaries(&db.name), recorded, "the same boundaries");
    // And the deployment is one `stb` knows: staged, and promotable.
    assert!(states(dir.path()).contains(&(id.clone(), "staged".to_owned())));
    promote(dir.path(), &id);
    assert_stable_views_match(&db.name, 10);
}

#[test]
fn a_build_killed_once_its_header_is_on_record_is_left_complete_by_unlock() {
    let db = TestDatabase::create("deploy_header_kill");
    events_table(&db.name);
    insert(&db.name, 0, 5);
    let dir = project(&db.name);
    let id = build(dir.path(), &[]);
    let copies = || {
        rows(&format!(
            "SELECT name FROM system.tables WHERE database = '{}' AND endsWith(name, '__{id}')",
            db.name
        ))
    };
    let built = copies();
    assert!(!built.is_empty());
    // As if killed right after its header: the end of the workflow and of the run never
    // reached its records, and its lock is still held.
    let invocation = execute(&format!(
        "SELECT invocation_id FROM {}._streambuild_run_events WHERE event_kind = 'restore_point' FORMAT TSV",
        db.name
    ))
    .trim()
    .to_owned();
    execute(&format!(
        "DELETE FROM {}._streambuild_run_events WHERE invocation_id = '{invocation}' AND event_kind IN ('workflow_completed', 'run_completed')",
        db.name
    ));
    let client = stb_warehouse::Client::new(stb_warehouse::ConnectionConfig {
        port: stb_test_support::stack().clickhouse_port,
        ..stb_warehouse::ConnectionConfig::default()
    })
    .expect("client");
    let _held = stb_warehouse::TargetLock::acquire(&client, &db.name, &invocation, false)
        .expect("the lock");
    std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE);
    let unlock = ["unlock", "--json"];
    let unlocked = succeeded(
        &unlock,
        &stb_test_support::stb_on_project_with(
            dir.path(),
            &unlock,
            "",
            &stb_test_support::SHORT_SIGNAL_WINDOW,
        ),
    );
    assert_eq!(unlocked["broken_owner"], invocation.as_str(), "{unlocked}");
    // Its restore point says the deployment is complete: nothing is given back.
    assert!(unlocked["given_back"].is_null(), "{unlocked}");
    assert_eq!(copies(), built, "every copy is kept");
    assert!(states(dir.path()).contains(&(id.clone(), "staged".to_owned())));
    promote(dir.path(), &id);
    assert_stable_views_match(&db.name, 10);
}

/// Starts `stb build` for deployment `id` in the background, as run `invocation`.
fn spawn_build(dir: &Path, id: &str, invocation: &str) -> std::process::Child {
    stb_test_support::spawn_on_project(
        dir,
        &["build", "--auto-approve", "--json", "--deployment-id", id],
        invocation,
    )
}

/// A project with the first deployment promoted and big changed: the next build is a
/// partial deployment of big and report.
fn partial_ready(prefix: &str) -> (TestDatabase, tempfile::TempDir) {
    let db = TestDatabase::create(prefix);
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    std::fs::write(
        dir.path().join("pipelines/pl__v/big.sql"),
        BIG.replace("amount > 10", "amount > 20"),
    )
    .expect("write");
    (db, dir)
}

/// A partial deployment's build killed after `k` completed statements: the database, the
/// project, the deployment id, and whether the deployment completed before the kill.
type KilledDeployment = (TestDatabase, tempfile::TempDir, String, bool);

fn kill_deployment_after(k: u64) -> KilledDeployment {
    let (db, dir) = partial_ready(&format!("deploy_kill_{k}"));
    let id = format!("20261130T000000Z_kill{k}");
    let invocation = format!("kill-{k}-{}", db.name);
    let mut child = spawn_build(dir.path(), &id, &invocation);
    stb_test_support::wait_for_statements(&db.name, &invocation, k);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // Readers still see the first deployment.
    assert_stable_views_match(&db.name, 10);
    let listed = states(dir.path());
    // After the last statements the build may write its header before the kill lands
    // (it may still hold the lock): it is complete.
    let complete = listed.contains(&(id.clone(), "staged".to_owned()));
    assert!(
        complete || listed.contains(&(id.clone(), "incomplete".to_owned())),
        "{listed:?}"
    );
    (db, dir, id, complete)
}

#[test]
fn a_virtual_build_killed_after_any_statement_is_rerun_with_its_id_to_the_right_rows() {
    // How many statements the partial deployment runs, from an uninterrupted one.
    let (probe_db, probe) = partial_ready("deploy_kill_probe");
    let mut args = vec!["build", "--auto-approve", "--json"];
    args.extend(["--deployment-id", "20261130T000000Z_probe"]);
    let result = ok_json(probe.path(), &args);
    let total = result["completed_steps"].as_u64().expect("steps");
    assert!(total >= 8, "{result}");
    drop((probe_db, probe));

    // Targets prepared and killed two at a time, side by side.
    let points: Vec<u64> = (1..total).collect();
    let killed = stb_test_support::two_at_a_time(&points, kill_deployment_after);
    let last_kill = std::time::Instant::now();
    assert!(
        killed.iter().any(|(_, _, _, complete)| !complete),
        "some builds were killed before they completed"
    );
    // Silence marks a killed run as stopped: two seconds of it with a short signal window
    // (the 45 s default is the subject of the admission and runs tests).
    std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE.saturating_sub(last_kill.elapsed()));
    let after_kills = |dir: &Path, args: &[&str]| {
        stb_test_support::stb_on_project_with(dir, args, "", &stb_test_support::SHORT_SIGNAL_WINDOW)
    };
    for (db, dir, id, complete) in &killed {
        let unlock = ["unlock", "--json"];
        succeeded(&unlock, &after_kills(dir.path(), &unlock));
        let rerun = ["build", "--auto-approve", "--json", "--deployment-id", id];
        let output = after_kills(dir.path(), &rerun);
        if *complete {
            // A complete deployment is never built again: its id is refused.
            assert!(!output.status.success(), "{id} was built again");
            let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
            assert_eq!(json["error"]["code"], "STB-BUILD-006", "{json}");
        } else {
            // The same id: its unfinished copies are rebuilt from retained history.
            let result = succeeded(&rerun, &output);
            assert_eq!(result["status"], "succeeded", "{result}");
            assert_eq!(result["deployment_id"], id.as_str(), "{result}");
        }
        promote(dir.path(), id);
        assert_stable_views_match(&db.name, 20);
        insert(&db.name, 20, 5);
        assert_stable_views_match(&db.name, 20);
    }
}

#[test]
fn doctor_repairs_a_dropped_stable_view_and_the_janitor_drops_only_what_is_not_needed() {
    let db = TestDatabase::create("deploy_care");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    let second = build(dir.path(), &["--select", "clean", "--full-refresh"]);
    promote(dir.path(), &second);

    // A stable view dropped by hand: the doctor says so and names the repair.
    execute(&format!("DROP VIEW {}.tbl__clean", db.name));
    let report = ok_json(dir.path(), &["doctor", "--json"]);
    assert_eq!(report["active_views"], report["tables"], "{report}");
    let clean = report["active_views"]
        .as_array()
        .expect("active_views")
        .iter()
        .find(|t| t["table_name"] == "tbl__clean")
        .expect("tbl__clean");
    assert_eq!(clean["state_kind"], "logical_view_missing", "{report}");
    assert_eq!(
        clean["repair"],
        format!("stb repair active-view --table tbl__clean --deployment-id {second}")
    );
    let repaired = ok_json(
        dir.path(),
        &[
            "repair",
            "active-view",
            "--table",
            "tbl__clean",
            "--deployment-id",
            &second,
            "--json",
        ],
    );
    assert_eq!(
        repaired["target_table_name"],
        format!("tbl__clean__{second}")
    );
    assert_eq!(ok_json(dir.path(), &["doctor", "--json"])["problems"], 0);
    assert_stable_views_match(&db.name, 10);

    // Every copy of the first deployment is superseded once the second is promoted (the
    // full refresh of clean copied big and report too): the janitor may drop it. A dry
    // run drops nothing and says what it would, in rows.
    let limits = [
        "--retention-days",
        "0",
        "--minimum-rollback-deployments",
        "0",
        "--minimum-age-minutes",
        "0",
    ];
    let mut args = vec!["janitor", "--json"];
    args.extend(limits);
    let dry = ok_json(dir.path(), &args);
    assert_eq!(dry["applied"], false);
    let decided = |report: &Value| -> Vec<(String, bool)> {
        report["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|c| {
                (
                    c["deployment_id"].as_str().unwrap_or_default().to_owned(),
                    c["delete"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    assert_eq!(
        decided(&dry),
        [(second.clone(), false), (first.clone(), true)],
        "{dry}"
    );
    let tables = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name LIKE '%{first}' FORMAT TSV",
        db.name
    ));
    assert_eq!(tables.trim(), "5", "a dry run drops nothing");
    assert_eq!(dry["rows"][format!("tbl__clean__{first}")], 60, "{dry}");
    let mut args = vec!["janitor", "--json", "--apply", "--auto-approve"];
    args.extend(limits);
    let applied = ok_json(dir.path(), &args);
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(
        applied["dropped"].as_array().map(Vec::len),
        Some(5),
        "{applied}"
    );
    let listed = states(dir.path());
    assert!(
        listed.contains(&(first.clone(), "physical_missing".to_owned())),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(second.clone(), "active".to_owned())),
        "{listed:?}"
    );
    assert_stable_views_match(&db.name, 10);
    // The defaults keep a rollback point and anything built in the last hour.
    let kept = ok_json(dir.path(), &["janitor", "--json"]);
    assert!(decided(&kept).iter().all(|(_, delete)| !delete), "{kept}");
}

#[test]
fn a_seeded_deployment_keeps_the_history_its_source_lost() {
    let db = TestDatabase::create("deploy_seed");
    events_table(&db.name);
    // Twenty steps two hours old, ten from now: the start time falls between them.
    execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC') - INTERVAL 2 HOUR, number % 25 FROM numbers(60)",
        db.name
    ));
    insert(&db.name, 20, 10);
    let dir = project(&db.name);
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    // The source loses its oldest history; the active copies still hold it.
    execute(&format!("DELETE FROM {}.events WHERE o < 10", db.name));
    let start = execute(
        "SELECT formatDateTime(now() - INTERVAL 1 HOUR, '%Y-%m-%dT%H:%i:%SZ', 'UTC') FORMAT TSVRaw",
    );
    let start = start.trim();
    let scope = ["--select", "clean", "--start-time", start];
    let mut args = vec!["plan", "--json"];
    args.extend(scope);
    let plan = ok_json(dir.path(), &args);
    assert_eq!(
        plan["rebuild_subtrees"][0]["execution_mode"], "seeded_bounded_rebuild",
        "{plan}"
    );
    assert!(
        !plan["warnings"].to_string().contains("fewer rows"),
        "a seeded copy loses nothing: {plan}"
    );
    let mut args = vec!["build", "--auto-approve", "--json"];
    args.extend(scope);
    let built = ok_json(dir.path(), &args);
    assert_eq!(built["seeds"][0]["model"], "clean", "{built}");
    let second = built["deployment_id"].as_str().expect("id");
    // Each copy of the subtree holds exactly what the active one does: the seed brought
    // the offsets before the start (the purged ones among them), the replay the rest.
    for table in ["tbl__clean", "tbl__big"] {
        assert_eq!(
            rows(&format!("SELECT * FROM {}.{table}__{second}", db.name)),
            rows(&format!("SELECT * FROM {}.{table}__{first}", db.name)),
            "{table}"
        );
    }
    assert_eq!(
        rows(&format!("SELECT * FROM {}.tbl__clean__{second}", db.name)).len(),
        90
    );
    // Live rows keep arriving in the new copies once the build is done.
    insert(&db.name, 30, 2);
    assert_eq!(
        rows(&format!("SELECT * FROM {}.tbl__clean__{second}", db.name)),
        rows(&format!("SELECT * FROM {}.tbl__clean__{first}", db.name))
    );
}

#[test]
fn a_column_added_to_a_virtual_model_is_seeded_unless_its_policy_says_full() {
    let db = TestDatabase::create("deploy_policy");
    events_table(&db.name);
    execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC') - INTERVAL 2 HOUR, number % 25 FROM numbers(60)",
        db.name
    ));
    let dir = project(&db.name);
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    execute(&format!("DELETE FROM {}.events WHERE o < 10", db.name));
    let clean = dir.path().join("pipelines/pl__v/clean.sql");
    std::fs::write(
        &clean,
        CLEAN.replace(
            " AS amount\n",
            " AS amount, (amount * 2)::UInt64 AS doubled\n",
        ),
    )
    .expect("write");
    // No policy: the added column keeps the active rows, seeded up to the frontier.
    let plan = ok_json(dir.path(), &["plan", "--json"]);
    let subtree = &plan["rebuild_subtrees"][0];
    assert_eq!(
        subtree["execution_mode"], "seeded_bounded_rebuild",
        "{plan}"
    );
    assert_eq!(subtree["configured_backfill_mode"], Value::Null);
    assert!(subtree["execution_start_time"].is_string(), "{plan}");
    let second = build(dir.path(), &[]);
    assert_eq!(
        rows(&format!(
            "SELECT _replay_partition, _replay_offset, amount FROM {}.tbl__clean__{second}",
            db.name
        )),
        rows(&format!("SELECT * FROM {}.tbl__clean__{first}", db.name)),
        "every row the active copy held, the purged ones too"
    );
    promote(dir.path(), &second);
    // A policy of full rebuilds for added columns: retained history only, and said so.
    std::fs::write(
        dir.path().join("pipelines/pl__v/pipeline.toml"),
        "mode = \"virtual\"\nreplay_on_change = { non_breaking = \"full\" }\n",
    )
    .expect("write");
    std::fs::write(
        &clean,
        CLEAN.replace(
            " AS amount\n",
            " AS amount, (amount * 2)::UInt64 AS doubled, 1::UInt8 AS flag\n",
        ),
    )
    .expect("write");
    let plan = ok_json(dir.path(), &["plan", "--json"]);
    let subtree = &plan["rebuild_subtrees"][0];
    assert_eq!(subtree["execution_mode"], "full_rebuild", "{plan}");
    assert_eq!(subtree["configured_backfill_mode"], "full");
    assert!(
        plan["warnings"].to_string().contains("fewer rows"),
        "{plan}"
    );
    let third = build(dir.path(), &[]);
    assert_eq!(
        rows(&format!("SELECT * FROM {}.tbl__clean__{third}", db.name)).len(),
        30
    );
}

#[test]
fn a_deployment_restoring_less_than_the_active_copy_holds_is_built_with_a_warning() {
    let db = TestDatabase::create("deploy_shrink");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = project(&db.name);
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    // History the active copies hold is gone from the source (retention, a purge).
    execute(&format!("DELETE FROM {}.events WHERE o < 10", db.name));
    let plan = ok_json(
        dir.path(),
        &["plan", "--json", "--select", "clean", "--full-refresh"],
    );
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings
            .contains("promoting this deployment would show fewer rows than the active copy holds"),
        "{plan}"
    );
    assert!(warnings.contains("clean"), "{plan}");
    // Not refused: nothing readers see is dropped, and a rollback shows the rows again.
    let second = build(dir.path(), &["--select", "clean", "--full-refresh"]);
    let copy = execute(&format!(
        "SELECT count() FROM {}.tbl__clean__{second} FORMAT TSV",
        db.name
    ));
    let active = execute(&format!(
        "SELECT count() FROM {}.tbl__clean FORMAT TSV",
        db.name
    ));
    assert_eq!(copy.trim(), "30");
    assert_eq!(active.trim(), "60", "readers still see the active copy");
    // Nothing left to replay: said as such, with what the active copy holds.
    execute(&format!("TRUNCATE TABLE {}.events", db.name));
    let plan = ok_json(
        dir.path(),
        &["plan", "--json", "--select", "clean", "--full-refresh"],
    );
    let warnings: Vec<&str> = plan["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings.contains(
            &"empty_replay_source: clean replays from events, which holds no rows; its active copy holds 60 rows"
        ),
        "{plan}"
    );
}

/// A one-model virtual project over `events` in `mode` (`timestamp` or `cursor`).
fn scalar_project(database: &str, mode: &str) -> tempfile::TempDir {
    let (columns, lineage) = match mode {
        "cursor" => (
            "        _replay_cursor: o\n        _replay_timestamp: ts\n",
            "_replay_cursor::UInt64 AS _replay_cursor",
        ),
        _ => (
            "        _replay_timestamp: ts\n",
            "_replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp",
        ),
    };
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"v\"\ndefault_target = \"dev\"\n[defaults]\npipeline_mode = \"virtual\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/events.yml".to_owned(),
            format!(
                "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: {mode}\n      columns:\n{columns}"
            ),
        ),
        (
            "pipelines/pl__v/clean.sql".to_owned(),
            format!(
                "MODEL (order_by [\"p\", \"o\"]);\nSELECT p::UInt32 AS p, o::UInt64 AS o, amount::UInt64 AS amount, {lineage}\nFROM __source(\"events\")\n"
            ),
        ),
    ];
    stb_test_support::project_dir(&files)
}

#[test]
fn timestamp_and_cursor_sources_stage_promote_and_list_deployments() {
    for mode in ["timestamp", "cursor"] {
        let db = TestDatabase::create(&format!("deploy_{mode}"));
        events_table(&db.name);
        // A single writer: offsets (the cursor) grow with time, as cursor mode needs.
        execute(&format!(
            "INSERT INTO {}.events SELECT 0, number, now64(3, 'UTC') - INTERVAL 1 HOUR + toIntervalMillisecond(number), number % 25 FROM numbers(40)",
            db.name
        ));
        let dir = scalar_project(&db.name, mode);
        let first = build(dir.path(), &[]);
        promote(dir.path(), &first);
        let expected =
            |database: &str| rows(&format!("SELECT p, o, amount FROM {database}.events"));
        assert_eq!(
            rows(&format!("SELECT p, o, amount FROM {}.tbl__clean", db.name)),
            expected(&db.name),
            "{mode}"
        );
        execute(&format!(
            "INSERT INTO {}.events SELECT 0, 40 + number, now64(3, 'UTC'), number % 25 FROM numbers(10)",
            db.name
        ));
        let second = build(dir.path(), &["--select", "clean", "--full-refresh"]);
        // Both copies are fed live: the same rows, the same newest position.
        let report = ok_json(dir.path(), &["deployment", "audit", &second, "--json"]);
        let root = &report["roots"][0];
        assert_eq!(root["boundary_mode"], mode, "{report}");
        assert_eq!(root["staged_rows"], 50, "{report}");
        assert_eq!(root["active_rows"], 50, "{report}");
        assert_eq!(root["staged_max"], root["active_max"], "{report}");
        assert_eq!(report["assessment"], "ready", "{report}");
        promote(dir.path(), &second);
        assert_eq!(
            rows(&format!("SELECT p, o, amount FROM {}.tbl__clean", db.name)),
            expected(&db.name),
            "{mode}"
        );
        assert_eq!(
            states(dir.path()),
            [
                (second.clone(), "active".to_owned()),
                (first.clone(), "superseded".to_owned())
            ],
            "{mode}"
        );
        let diff = ok_json(
            dir.path(),
            &["deployment", "diff", &format!("{first}:{second}"), "--json"],
        );
        // The first copy kept receiving the new rows live: the same columns, the same rows.
        let clean = &diff["diff"]["relations"][0];
        assert_eq!(clean["status"], "unchanged", "{mode}: {diff}");
        assert_eq!(clean["from_rows"], 50, "{mode}: {diff}");
        assert_eq!(clean["to_rows"], 50, "{mode}: {diff}");
    }
}

/// The deployments project plus a direct pipeline over the same events; `clean` fails its
/// replay on any amount above `limit` when one is given.
pub(crate) fn mixed_project(database: &str, limit: Option<u64>) -> tempfile::TempDir {
    let dir = project(database);
    let plain = "MODEL (order_by [\"p\", \"o\"]);\nSELECT _replay_partition::UInt32 AS p, _replay_offset::UInt64 AS o, amount::UInt64 AS amount\nFROM __source(\"events\")\n";
    std::fs::create_dir_all(dir.path().join("pipelines/pl__d")).expect("dir");
    std::fs::write(dir.path().join("pipelines/pl__d/plain.sql"), plain).expect("write");
    if let Some(limit) = limit {
        std::fs::write(
            dir.path().join("pipelines/pl__v/clean.sql"),
            CLEAN.replace(
                " AS amount\n",
                &format!(" AS amount, throwIf(amount > {limit}, 'amount over the limit')::UInt8 AS checked\n"),
            ),
        )
        .expect("write");
    }
    dir
}

#[test]
fn a_mixed_build_stages_the_virtual_phase_then_applies_the_direct_one_under_one_lock() {
    let db = TestDatabase::create("deploy_mixed");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = mixed_project(&db.name, None);
    let result = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(result["mode"], "mixed", "{result}");
    assert_eq!(
        result["execution_order"],
        serde_json::json!(["virtual", "direct"])
    );
    assert_eq!(result["virtual"]["status"], "succeeded", "{result}");
    assert_eq!(result["direct"]["status"], "succeeded", "{result}");
    let id = result["virtual"]["deployment_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(states(dir.path()), [(id.clone(), "staged".to_owned())]);
    assert_eq!(
        rows(&format!("SELECT * FROM {}.tbl__plain", db.name)),
        rows(&format!("SELECT p, o, amount FROM {}.events", db.name)),
        "the direct phase applied"
    );
    let invocations = execute(&format!(
        "SELECT count(), countIf(outcome = 'succeeded') FROM {}._streambuild_invocations FORMAT TSV",
        db.name
    ));
    assert_eq!(invocations.trim(), "2\t2", "one invocation per phase");
    let lock = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name = '_streambuild_target_mutation_lock' FORMAT TSV",
        db.name
    ));
    assert_eq!(lock.trim(), "0", "the lock is released");
    // Promoted and unchanged: the next mixed build stages nothing and rebuilds the direct
    // part.
    promote(dir.path(), &id);
    let again = ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(again["virtual"]["status"], "nothing_changed", "{again}");
    assert_eq!(again["direct"]["status"], "succeeded", "{again}");
    assert_eq!(states(dir.path()), [(id, "active".to_owned())]);
}

#[test]
fn a_mixed_build_whose_virtual_phase_fails_skips_the_direct_one() {
    let db = TestDatabase::create("deploy_mixed_fail");
    events_table(&db.name);
    insert(&db.name, 0, 20);
    let dir = mixed_project(&db.name, Some(20));
    let output = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(result["virtual"]["status"], "failed", "{result}");
    assert_eq!(result["direct"]["status"], "skipped", "{result}");
    let plain = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name = 'tbl__plain' FORMAT TSV",
        db.name
    ));
    assert_eq!(plain.trim(), "0", "nothing of the direct phase ran");
    let outcomes = execute(&format!(
        "SELECT outcome FROM {}._streambuild_invocations ORDER BY outcome FORMAT TSV",
        db.name
    ));
    assert_eq!(outcomes.trim(), "cancelled\nfailed");
}

#[test]
fn a_data_diff_finds_the_rows_one_deployment_changed_added_and_removed() {
    let db = TestDatabase::create("deploy_data_diff");
    events_table(&db.name);
    // Four offsets in each of three partitions.
    insert(&db.name, 0, 4);
    let dir = project(&db.name);
    for model in ["big", "report"] {
        std::fs::remove_file(dir.path().join(format!("pipelines/pl__v/{model}.sql"))).expect(model);
    }
    let clean = dir.path().join("pipelines/pl__v/clean.sql");
    let write = |amount: &str, left_out: (u32, u64)| {
        std::fs::write(
            &clean,
            format!(
                "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, ({amount})::UInt64 AS amount, (amount % 3)::UInt8 AS n, 'b'::String AS bucket\nFROM __source(\"events\")\nWHERE NOT (_replay_partition = {} AND _replay_offset = {})\n",
                left_out.0, left_out.1
            ),
        )
        .expect("model");
    };
    // The first deployment leaves out partition 1's offset 1; the second leaves out
    // partition 0's offset 2 instead, and adds 100 to partition 2's offset 1. Columns named
    // `n` and `bucket` are the model's own, never taken for the diff's.
    write("amount", (1, 1));
    let first = build(dir.path(), &[]);
    promote(dir.path(), &first);
    write(
        "if(_replay_partition = 2 AND _replay_offset = 1, amount + 100, amount)",
        (0, 2),
    );
    let second = build(dir.path(), &[]);

    let range = format!("{first}:{second}");
    let diff = ok_json(
        dir.path(),
        &["deployment", "diff", &range, "--data", "--json"],
    );
    let data = diff["data"].as_array().expect("data");
    assert_eq!(data.len(), 1, "{diff}");
    let clean = &data[0];
    assert_eq!(clean["name"], "tbl__clean", "{diff}");
    assert_eq!(
        clean["key"],
        serde_json::json!(["_replay_partition", "_replay_offset"]),
        "the model's ORDER BY: {diff}"
    );
    assert_eq!(clean["key_source"], "order_by");
    assert_eq!(clean["window"]["kind"], "offsets", "{diff}");
    assert_eq!(
        (
            &clean["only_in_from"],
            &clean["only_in_to"],
            &clean["changed"]
        ),
        (&Value::from(1), &Value::from(1), &Value::from(1)),
        "{diff}"
    );
    let sample = |kind: &str| {
        clean["samples"]
            .as_array()
            .expect("samples")
            .iter()
            .find(|s| s["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind} sample: {diff}"))
            .clone()
    };
    let removed = sample("only_in_from");
    assert_eq!(
        removed["key"],
        serde_json::json!({"_replay_partition": "0", "_replay_offset": "2"})
    );
    assert_eq!(removed["from_rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(removed["to_rows"], serde_json::json!([]));
    let added = sample("only_in_to");
    assert_eq!(
        added["key"],
        serde_json::json!({"_replay_partition": "1", "_replay_offset": "1"})
    );
    let changed = sample("changed");
    assert_eq!(
        changed["key"],
        serde_json::json!({"_replay_partition": "2", "_replay_offset": "1"})
    );
    let amount = |rows: &Value| {
        rows[0]["amount"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| rows[0]["amount"].to_string())
            .parse::<u64>()
            .expect("amount")
    };
    assert_eq!(
        amount(&changed["to_rows"]),
        amount(&changed["from_rows"]) + 100,
        "{changed}"
    );

    // Matched by another key: every row's amount is part of it, so the changed row is
    // one removed and one added.
    let by_amount = ok_json(
        dir.path(),
        &[
            "deployment",
            "diff",
            &range,
            "--data",
            "--key",
            "_replay_partition,_replay_offset,amount",
            "--json",
        ],
    );
    let clean = &by_amount["data"][0];
    assert_eq!(clean["key_source"], "--key", "{by_amount}");
    assert_eq!(
        (
            &clean["only_in_from"],
            &clean["only_in_to"],
            &clean["changed"]
        ),
        (&Value::from(2), &Value::from(2), &Value::from(0)),
        "{by_amount}"
    );
    // A key no copy has is refused, with a code.
    let typo = stb(
        dir.path(),
        &[
            "deployment",
            "diff",
            &range,
            "--data",
            "--key",
            "_replay_ofset",
            "--json",
        ],
    );
    assert_eq!(typo.status.code(), Some(1), "{typo:?}");
    let typo: Value = serde_json::from_slice(&typo.stdout).expect("JSON");
    assert_eq!(typo["error"]["code"], "STB-DEPLOY-005", "{typo}");
    // The text says the same.
    let text = stb(dir.path(), &["deployment", "diff", &range, "--data"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("changed: 1"), "{text}");
    assert!(text.contains("only_in_from {"), "{text}");
}
