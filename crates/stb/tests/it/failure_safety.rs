//! A build that cannot succeed must leave the target as it found it (issue 33).
//!
//! Validation: `stb plan` and `stb build` check every statement a build would run against
//! the warehouse (queries with `EXPLAIN`, tables as session-scoped temporary copies)
//! before anything changes, and fail with the model's file, line and column. The tests
//! compare the whole target before and after, relation by relation (identity, definition
//! and row multiset), so "nothing changed" is checked, not assumed.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

const EVENTS: &str = "CREATE TABLE {db}.events_existing (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), kind String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)";

const SOURCE: &str = "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n";

pub(crate) const AMOUNT: &str = "amount::UInt64 AS amount";
pub(crate) const SUMMING: &str = "SummingMergeTree";
const CLEAN: &str = "pipelines/pl__events/clean.sql";
const TOTALS: &str = "pipelines/pl__events/totals.sql";

/// A virtual pipeline beside the direct one in a `mixed` project.
pub(crate) const SIDE: &str = "pipelines/pl__side/side.sql";

/// `side`'s SQL with `amount` as its last projection.
pub(crate) fn side_sql(amount: &str) -> String {
    format!(
        "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset,\n  {amount}\nFROM __source(\"events\")\n"
    )
}

/// clean (root, lineage-keyed) -> totals (aggregate) -> report (view); `amount` is
/// `clean`'s last projection, `engine` the engine `totals` is stored with. Mode `mixed`:
/// those in a direct pipeline, and `side` in a virtual one beside them.
pub(crate) fn files(
    database: &str,
    mode: &str,
    amount: &str,
    engine: &str,
) -> Vec<(String, String)> {
    let mut files = pipeline_files(database, mode, amount, engine);
    if mode == "mixed" {
        files.push((
            "pipelines/pl__side/pipeline.toml".into(),
            "mode = \"virtual\"\n".into(),
        ));
        files.push((SIDE.into(), side_sql(AMOUNT)));
    }
    files
}

fn pipeline_files(database: &str, mode: &str, amount: &str, engine: &str) -> Vec<(String, String)> {
    let mode = if mode == "mixed" { "direct" } else { mode };
    vec![
        (
            "streambuild_project.toml".into(),
            format!(
                "name = \"events\"\ndefault_target = \"dev\"\n[defaults]\npipeline_mode = \"{mode}\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        ("sources/events.yml".into(), SOURCE.into()),
        (
            CLEAN.into(),
            format!("MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset,\n  kind::String AS kind,\n  {amount}\nFROM __source(\"events\")\n"),
        ),
        (
            TOTALS.into(),
            format!("MODEL (order_by [\"kind\"], engine \"{engine}\");\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount\nFROM __ref(\"clean\")\nGROUP BY kind\n"),
        ),
        (
            "pipelines/pl__events/report.sql".into(),
            "MODEL (kind view);\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount FROM __ref(\"totals\") GROUP BY kind\n".into(),
        ),
    ]
}

pub(crate) fn write(dir: &Path, files: &[(String, String)]) {
    for (path, text) in files {
        std::fs::write(dir.join(path), text).expect("write");
    }
}

pub(crate) fn stb(dir: &Path, args: &[&str]) -> Output {
    stb_test_support::stb_on_project(dir, args, "")
}

pub(crate) fn insert_events(database: &str, from: u64, to: u64) {
    // A fixed past instant: nothing here has a TTL or compares it with the clock.
    execute(&format!(
        "INSERT INTO {database}.events_existing SELECT number % 3, intDiv(number, 3), toDateTime64('2026-11-01 00:00:00', 3, 'UTC'), ['a', 'b', 'c'][number % 3 + 1], number % 25 FROM numbers({}, {})",
        from * 3,
        (to - from) * 3
    ));
}

/// Every relation of the target but the lifecycle tables: its name, identity, definition
/// and its rows, sorted (the multiset).
///
/// A table keeps its identity (the same table, never a copy); a view given back is created
/// again from its definition, so its definition is what is compared.
pub(crate) fn target_state(database: &str) -> Vec<(String, String)> {
    let relations = execute(&format!(
        "SELECT name, if(engine IN ('View', 'MaterializedView'), '', toString(uuid)), engine, create_table_query FROM system.tables WHERE database = '{database}' AND name NOT LIKE '\\_streambuild%' ORDER BY name FORMAT TSV"
    ));
    relations
        .lines()
        .map(|line| {
            let name = line.split('\t').next().unwrap_or_default().to_owned();
            let rows = if line.contains("\tKafka\t") {
                String::new()
            } else {
                execute(&format!(
                    "SELECT * FROM {database}.`{name}` ORDER BY ALL FORMAT TSV"
                ))
            };
            (line.to_owned(), rows)
        })
        .collect()
}

pub(crate) fn built(database: &str, mode: &str) -> tempfile::TempDir {
    built_over(database, mode, 40)
}

/// `built` over offsets `0..offsets` in each of the three partitions.
fn built_over(database: &str, mode: &str, offsets: u64) -> tempfile::TempDir {
    execute(&EVENTS.replace("{db}", database));
    insert_events(database, 0, offsets);
    let dir = stb_test_support::project_dir(&files(database, mode, AMOUNT, SUMMING));
    let output = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert!(
        output.status.success(),
        "first build\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if mode != "direct" {
        // Readers see a deployment once it is promoted.
        let result: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        let staged = if mode == "mixed" {
            &result["virtual"]
        } else {
            &result
        };
        let id = staged["deployment_id"].as_str().expect("a deployment id");
        let promoted = stb(dir.path(), &["deployment", "promote", id, "--json"]);
        assert!(
            promoted.status.success(),
            "{}",
            String::from_utf8_lossy(&promoted.stderr)
        );
    }
    dir
}

/// The plan and the build refuse `broken`, naming `file`:`line`, and change nothing.
fn refused_everywhere(dir: &Path, database: &str, file: &str, line: u64) {
    let before = target_state(database);
    let plan = stb(dir, &["plan", "--json"]);
    assert_eq!(plan.status.code(), Some(1), "plan must fail");
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    let error = &plan["errors"][0];
    assert_eq!(error["code"], "STB-PLAN-006", "{plan}");
    assert_eq!(error["location"]["file"], file, "{plan}");
    assert_eq!(error["location"]["line"], line, "{plan}");
    let text = stb(dir, &["plan"]);
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains(&format!("error[STB-PLAN-006] {file}:{line}:")),
        "{stderr}"
    );
    let build = stb(dir, &["build", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert_eq!(build.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("STB-PLAN-006"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(target_state(database), before, "the target changed");
    // The refusal is on record as a failed invocation.
    let outcome = execute(&format!(
        "SELECT outcome FROM {database}._streambuild_invocations ORDER BY started_at DESC LIMIT 1 FORMAT TSV"
    ));
    assert_eq!(outcome.trim(), "failed");
}

pub(crate) fn broken_sql_and_ddl_are_refused_before_anything_changes(mode: &str) {
    let db = TestDatabase::create(&format!("invalid_{mode}"));
    let dir = built(&db.name, mode);
    // An unknown column, on line 4 of clean.sql.
    write(
        dir.path(),
        &files(&db.name, mode, "amount_centz::UInt64 AS amount", SUMMING),
    );
    refused_everywhere(dir.path(), &db.name, CLEAN, 4);
    // A column type that does not exist, on the same line: the table's DDL fails too.
    write(
        dir.path(),
        &files(&db.name, mode, "amount::UInt65 AS amount", SUMMING),
    );
    refused_everywhere(dir.path(), &db.name, CLEAN, 4);
    // A table the warehouse cannot create: its engine sums a column it does not have
    // (the header, line 1; only the warehouse knows what an engine accepts).
    write(
        dir.path(),
        &files(&db.name, mode, AMOUNT, "SummingMergeTree(amountz)"),
    );
    refused_everywhere(dir.path(), &db.name, TOTALS, 1);
    // Live rows still flow through the untouched views.
    let before: u64 = execute(&format!(
        "SELECT count() FROM {}.events_existing FORMAT TSV",
        db.name
    ))
    .trim()
    .parse()
    .expect("count");
    insert_events(&db.name, 40, 50);
    // The table (direct), or the stable view readers use (virtual).
    let reached: u64 = execute(&format!(
        "SELECT count() FROM {}.tbl__clean FORMAT TSV",
        db.name
    ))
    .trim()
    .parse()
    .expect("count");
    assert_eq!(reached, before + 30, "live rows reach the model");
}

#[test]
fn broken_sql_and_ddl_are_refused_before_a_direct_build_changes_anything() {
    broken_sql_and_ddl_are_refused_before_anything_changes("direct");
}

#[test]
fn broken_sql_and_ddl_are_refused_before_a_virtual_build_changes_anything() {
    broken_sql_and_ddl_are_refused_before_anything_changes("virtual");
}

pub(crate) fn count(database: &str, relation: &str) -> u64 {
    execute(&format!(
        "SELECT count() FROM {database}.{relation} FORMAT TSV"
    ))
    .trim()
    .parse()
    .expect("count")
}

/// The graph holds exactly what the adopted table implies.
pub(crate) fn assert_graph_matches(database: &str) {
    let expected = |sql: &str| execute(&format!("SELECT * FROM ({sql}) ORDER BY ALL FORMAT TSV"));
    assert_eq!(
        expected(&format!("SELECT * FROM {database}.tbl__clean")),
        expected(&format!(
            "SELECT p, o, kind, amount FROM {database}.events_existing"
        )),
        "clean"
    );
    assert_eq!(
        expected(&format!("SELECT * FROM {database}.view__report")),
        expected(&format!(
            "SELECT kind, sum(amount) FROM {database}.events_existing GROUP BY kind"
        )),
        "report"
    );
}

/// A statement that fails on one late row of the replay (offset 35 of 40): nothing the
/// warehouse can see before it reads that row.
pub(crate) const FAILS_LATE: &str =
    "(amount + throwIf(_replay_offset = 35, 'a late row'))::UInt64 AS amount";

#[test]
fn a_direct_build_that_fails_mid_replay_gives_the_target_back_live() {
    let db = TestDatabase::create("undo_direct");
    let dir = built(&db.name, "direct");
    assert_graph_matches(&db.name);
    let before = target_state(&db.name);
    write(dir.path(), &files(&db.name, "direct", FAILS_LATE, SUMMING));
    let plan = stb(dir.path(), &["plan"]);
    assert!(plan.status.success(), "the plan cannot see a late row");
    let build = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(build.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["failed_step"], "replay_clean", "{result}");
    assert_eq!(result["restored"]["finished"], false, "{result}");
    assert_eq!(
        result["restored"]["errors"],
        serde_json::json!([]),
        "{result}"
    );
    // The one thing an undo cannot give back is said, with what mends it.
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        stderr.contains("adopted source(s) events") && stderr.contains("stb build --select clean"),
        "{stderr}"
    );
    assert_eq!(
        result["created"],
        serde_json::json!([]),
        "nothing was left created"
    );
    assert_eq!(
        target_state(&db.name),
        before,
        "the target was not given back"
    );
    // Live rows flow into the relations given back.
    insert_events(&db.name, 40, 50);
    assert_eq!(count(&db.name, "tbl__clean"), 150);
    assert_graph_matches(&db.name);
    // The baseline is the previous build's: the change is still pending.
    let changed = stb(dir.path(), &["plan", "--changed", "--json"]);
    let changed: Value = serde_json::from_slice(&changed.stdout).expect("JSON");
    assert_eq!(changed["entries"][0]["model"], "clean", "{changed}");
    let outcome = execute(&format!(
        "SELECT outcome FROM {}._streambuild_invocations ORDER BY started_at DESC LIMIT 1 FORMAT TSV",
        db.name
    ));
    assert_eq!(outcome.trim(), "failed");
    // Fixed, the same --changed build rebuilds it.
    fixed_and_rebuilt_by_changed(dir.path(), &db.name, "direct");
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM system.tables WHERE database = '{}' AND name LIKE '%\\_\\_stb\\_prev' FORMAT TSV",
            db.name
        ))
        .trim(),
        "0",
        "no previous copy is left"
    );
}

/// The project fixed (`clean` as first built), `stb build --changed` rebuilds what failed
/// and the graph holds what the adopted table implies.
pub(crate) fn fixed_and_rebuilt_by_changed(dir: &Path, database: &str, mode: &str) {
    write(dir, &files(database, mode, AMOUNT, SUMMING));
    let rebuilt = stb(dir, &["build", "--changed", "--auto-approve", "--json"]);
    assert!(
        rebuilt.status.success(),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    assert_graph_matches(database);
}

/// Unlocks the target a killed rebuild (doubling `clean`'s amounts) left: no aside may be
/// left, and a build that was finished holds the doubled amounts. Whether it was finished
/// (`None`: nothing was given back).
pub(crate) fn unlock_and_check(database: &str, dir: &Path, label: &str) -> Option<bool> {
    let unlocked = unlock(dir);
    let finished = unlocked["given_back"]["finished"].as_bool();
    let prev = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{database}' AND name LIKE '%\\\\_\\\\_stb\\\\_prev' FORMAT TSV"
    ));
    assert_eq!(prev.trim(), "0", "{label}: an aside is left: {unlocked}");
    if finished == Some(true) {
        // Killed after its replays: finished as it would have ended.
        assert!(
            holds_the_rebuild(database),
            "{label}: clean does not hold the rebuild: {unlocked}"
        );
    }
    finished
}

/// `clean` holds the doubled amounts of the rebuild: with nothing given back, the rebuild
/// had done every statement before the kill (only its run's end was missing).
pub(crate) fn holds_the_rebuild(database: &str) -> bool {
    execute(&format!(
        "SELECT sum(amount) FROM {database}.tbl__clean FORMAT TSV"
    )) == execute(&format!(
        "SELECT sum(amount * 2) FROM {database}.events_existing FORMAT TSV"
    ))
}

/// `stb unlock` with a two-second signal window: a killed run is silent by then.
fn unlock(dir: &Path) -> Value {
    let output = stb_test_support::stb_on_project_with(
        dir,
        &["unlock", "--json"],
        "",
        &stb_test_support::SHORT_SIGNAL_WINDOW,
    );
    assert!(
        output.status.success(),
        "unlock\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn statements_of(database: &str, invocation: &str) -> u64 {
    execute(&format!(
        "SELECT count() FROM {database}._streambuild_run_statements FINAL WHERE invocation_id = '{invocation}' FORMAT TSV"
    ))
    .trim()
    .parse()
    .expect("count")
}

/// Doubles `clean`'s amounts and starts the rebuild as run `invocation`, in the background.
fn start_rebuild(database: &str, dir: &Path, invocation: &str) -> std::process::Child {
    write(
        dir,
        &files(
            database,
            "direct",
            "(amount * 2)::UInt64 AS amount",
            SUMMING,
        ),
    );
    stb_test_support::spawn_on_project(dir, &["build", "--auto-approve", "--json"], invocation)
}

#[test]
fn a_direct_build_killed_at_any_statement_is_given_back_or_finished_by_unlock() {
    // How many statements the rebuild after a SQL change runs, from one that completes.
    let reference = TestDatabase::create("kill_reference");
    let dir = built(&reference.name, "direct");
    let invocation = format!("reference-{}", reference.name);
    let mut child = start_rebuild(&reference.name, dir.path(), &invocation);
    assert!(child.wait().expect("waits").success());
    let total = statements_of(&reference.name, &invocation);
    assert!(total >= 15, "{total} statements");
    // Targets prepared and killed two at a time, side by side.
    let kill_after = |k: u64| {
        let db = TestDatabase::create(&format!("kill_{k}"));
        let dir = built(&db.name, "direct");
        let before = target_state(&db.name);
        let invocation = format!("kill-{k}-{}", db.name);
        let mut child = start_rebuild(&db.name, dir.path(), &invocation);
        stb_test_support::wait_for_statements(&db.name, &invocation, k);
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        (db, dir, before, invocation)
    };
    let points: Vec<u64> = (1..total).collect();
    let killed = stb_test_support::two_at_a_time(&points, kill_after);
    std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE);
    let mut outcomes = Vec::new();
    for (db, dir, before, invocation) in &killed {
        let finished = unlock_and_check(&db.name, dir.path(), invocation);
        outcomes.push(finished);
        let completed =
            finished.is_none() && target_state(&db.name) != *before && holds_the_rebuild(&db.name);
        if completed {
            // Killed after its last statement: on the far side of the replays too.
            *outcomes.last_mut().expect("pushed") = Some(true);
        }
        if finished != Some(true) && !completed {
            // The lock may have been broken before the build changed anything (nothing to
            // give back) or after: either way the target is as the build found it.
            assert_eq!(&target_state(&db.name), before, "{invocation}");
            insert_events(&db.name, 40, 50);
            assert_eq!(
                count(&db.name, "tbl__clean"),
                150,
                "{invocation}: live flow"
            );
            assert_graph_matches(&db.name);
        }
    }
    // The kills landed on both sides of the replays: some builds were undone, some
    // finished (by unlock, or complete when killed).
    eprintln!(
        "given back (Some(false)), finished or complete (Some(true)), untouched (None): {outcomes:?}"
    );
    assert!(outcomes.contains(&Some(false)), "{outcomes:?}");
    assert!(outcomes.contains(&Some(true)), "{outcomes:?}");
}

#[test]
fn a_virtual_build_that_fails_mid_replay_leaves_production_and_nothing_staged() {
    let db = TestDatabase::create("undo_virtual");
    let dir = built(&db.name, "virtual");
    let before = target_state(&db.name);
    write(dir.path(), &files(&db.name, "virtual", FAILS_LATE, SUMMING));
    let build = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(build.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["restored"]["finished"], false, "{result}");
    assert_eq!(
        result["restored"]["errors"],
        serde_json::json!([]),
        "{result}"
    );
    assert_eq!(
        target_state(&db.name),
        before,
        "the failed deployment's copies are gone, the active ones untouched"
    );
    insert_events(&db.name, 40, 50);
    assert_eq!(
        count(&db.name, "tbl__clean"),
        150,
        "live rows reach production"
    );
}

/// A cast that fails only on the last offsets of a 1,000,002-row replay of `clean` (in the
/// mode's direct or virtual pipeline): every relation comes back with every row, and live
/// rows flow.
fn a_late_failure_in_a_million_row_replay_leaves_every_row_in_place(mode: &str) {
    let db = TestDatabase::create(&format!("undo_million_{mode}"));
    // 333,334 offsets in each of 3 partitions: 1,000,002 rows.
    let dir = built_over(&db.name, mode, 333_334);
    assert_eq!(count(&db.name, "tbl__clean"), 1_000_002);
    let before = target_state(&db.name);
    write(
        dir.path(),
        &files(
            &db.name,
            mode,
            "(amount + throwIf(_replay_offset >= 333333, 'a late row'))::UInt64 AS amount",
            SUMMING,
        ),
    );
    let build = stb(dir.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(build.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    // A mixed build fails in its direct phase (its virtual part is unchanged).
    let failed = if mode == "mixed" {
        &result["direct"]
    } else {
        &result
    };
    assert_eq!(failed["status"], "failed", "{result}");
    assert_eq!(failed["restored"]["finished"], false, "{result}");
    assert!(
        failed["failed_step"]
            .as_str()
            .is_some_and(|step| step.starts_with("replay_clean")),
        "{result}"
    );
    assert_eq!(target_state(&db.name), before, "every row is back in place");
    insert_events(&db.name, 333_334, 333_344);
    assert_eq!(count(&db.name, "tbl__clean"), 1_000_032, "live rows flow");
    assert_graph_matches(&db.name);
}

#[test]
fn a_cast_that_fails_late_in_a_million_row_replay_leaves_every_row_in_place() {
    a_late_failure_in_a_million_row_replay_leaves_every_row_in_place("direct");
}

#[test]
fn a_cast_that_fails_late_in_a_million_row_virtual_replay_leaves_production_whole() {
    a_late_failure_in_a_million_row_replay_leaves_every_row_in_place("virtual");
}

#[test]
fn a_cast_that_fails_late_in_a_million_row_mixed_replay_leaves_every_row_in_place() {
    a_late_failure_in_a_million_row_replay_leaves_every_row_in_place("mixed");
}

fn status(dir: &Path) -> Value {
    let output = stb(dir, &["status", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn model<'v>(status: &'v Value, name: &str) -> &'v Value {
    status["models"]
        .as_array()
        .and_then(|models| models.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("{name} in {status}"))
}

#[test]
fn status_tells_a_half_built_or_incomplete_target_and_changed_mends_it() {
    let db = TestDatabase::create("status_truth");
    let dir = built(&db.name, "direct");
    let healthy = status(dir.path());
    assert_eq!(healthy["target"]["state"], "healthy", "{healthy}");
    assert_eq!(model(&healthy, "clean")["rows"], 120, "{healthy}");
    // A view is built when it exists, and is counted.
    assert_eq!(model(&healthy, "report")["built"], true, "{healthy}");
    assert_eq!(model(&healthy, "report")["rows"], 3, "{healthy}");
    // A build stopped by hand half-way: a table set aside, its view gone.
    let db_name = &db.name;
    execute(&format!("DROP TABLE {db_name}.mv__totals"));
    execute(&format!(
        "RENAME TABLE {db_name}.tbl__totals TO {db_name}.tbl__totals__stb_prev"
    ));
    let half = status(dir.path());
    assert_eq!(half["target"]["state"], "half_built", "{half}");
    assert_eq!(half["target"]["mend"], "stb unlock", "{half}");
    assert_eq!(
        half["target"]["set_aside"],
        serde_json::json!(["tbl__totals__stb_prev"])
    );
    let text = stb(dir.path(), &["status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("TARGET HALF-BUILT"), "{text}");
    // A plan refuses to build over it rather than lose the set-aside rows.
    let build = stb(
        dir.path(),
        &["build", "--select", "totals", "--auto-approve", "--json"],
    );
    assert_eq!(build.status.code(), Some(1));
    let refused: Value = serde_json::from_slice(&build.stdout).expect("JSON");
    assert!(
        refused["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("stb unlock")),
        "{refused}"
    );
    assert_eq!(
        count(&db.name, "tbl__totals__stb_prev"),
        3,
        "the aside is kept"
    );
    // Put back by hand but for the view: incomplete, and --changed picks the model.
    execute(&format!("DROP TABLE IF EXISTS {db_name}.tbl__totals SYNC"));
    execute(&format!(
        "RENAME TABLE {db_name}.tbl__totals__stb_prev TO {db_name}.tbl__totals"
    ));
    let incomplete = status(dir.path());
    assert_eq!(incomplete["target"]["state"], "incomplete", "{incomplete}");
    assert_eq!(incomplete["target"]["mend"], "stb build --changed");
    let totals = model(&incomplete, "totals");
    assert!(
        totals["relations"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r["name"] == "mv__totals" && r["present"] == false)),
        "{totals}"
    );
    let changed = stb(
        dir.path(),
        &["build", "--changed", "--auto-approve", "--json"],
    );
    assert!(
        changed.status.success(),
        "{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    let mended = status(dir.path());
    assert_eq!(mended["target"]["state"], "healthy", "{mended}");
    insert_events(&db.name, 40, 50);
    assert_graph_matches(&db.name);
}
