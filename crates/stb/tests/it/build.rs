//! `stb build` for direct pipelines against the local stack: greenfield builds and replays
//! from adopted tables in offsets, timestamp and cursor modes, rebuilds after a SQL
//! change, selection closures, bounded start times, protection gates and declines.
//!
//! Every check compares multisets: the target's rows, sorted, against the model's query
//! run directly over the adopted table.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use stb_test_support::{TestDatabase, execute, wait_for_statements};

const EVENTS: &str = "CREATE TABLE {db}.events_existing (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), seq UInt64, kind String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)";

/// The 4-model graph: clean (root) -> big (filter) and totals (aggregate) -> report (view).
fn models(clean_amount: &str) -> Vec<(String, String)> {
    vec![
        (
            "pipelines/pl__events/clean.sql".into(),
            format!("MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp, kind::String AS kind, ({clean_amount})::UInt64 AS amount\nFROM __source(\"events\") AS e\nWHERE kind != 'ignored'\n"),
        ),
        (
            "pipelines/pl__events/big.sql".into(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp, amount::UInt64 AS amount\nFROM __ref(\"clean\")\nWHERE amount > 10\n".into(),
        ),
        (
            "pipelines/pl__events/totals.sql".into(),
            "MODEL (order_by [\"kind\"], engine \"SummingMergeTree\");\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount, count()::UInt64 AS n\nFROM __ref(\"clean\")\nGROUP BY kind\n".into(),
        ),
        (
            "pipelines/pl__events/report.sql".into(),
            "MODEL (kind view);\nSELECT kind::String AS kind, sum(amount)::UInt64 AS amount FROM __ref(\"totals\") GROUP BY kind\n".into(),
        ),
    ]
}

fn project_files(
    database: &str,
    source: &str,
    pipeline_toml: Option<&str>,
) -> Vec<(String, String)> {
    let mut files = vec![
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"events\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        ("sources/events.yml".to_owned(), source.to_owned()),
    ];
    if let Some(toml) = pipeline_toml {
        files.push((
            "pipelines/pl__events/pipeline.toml".to_owned(),
            toml.to_owned(),
        ));
    }
    files
}

const OFFSETS_SOURCE: &str = "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n";

fn offsets_project(
    database: &str,
    clean_amount: &str,
    pipeline_toml: Option<&str>,
) -> tempfile::TempDir {
    let mut files = project_files(database, OFFSETS_SOURCE, pipeline_toml);
    files.extend(models(clean_amount));
    stb_test_support::project_dir(&files)
}

fn rewrite(dir: &Path, files: &[(String, String)]) {
    for (path, text) in files {
        std::fs::write(dir.join(path), text).expect("write");
    }
}

fn stb(dir: &Path, args: &[&str], stdin: &str) -> Output {
    stb_test_support::stb_on_project(dir, args, stdin)
}

fn build(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["build", "--auto-approve", "--json"];
    args.extend_from_slice(extra);
    let output = stb(dir, &args, "");
    assert!(
        output.status.success(),
        "build failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// Rows `p, o, ts, seq, kind, amount` for offsets `from..to` in partitions 0..3.
///
/// The fixed instants the tests pass cannot expire: these tables have no TTL, the only
/// comparison with the clock is the timestamp mode's `<= now()` cutoff, which a past instant
/// always meets, and every `--start-time` is chosen between the instants themselves.
fn insert_events(database: &str, from: u64, to: u64, ts: &str) {
    execute(&format!(
        "INSERT INTO {database}.events_existing SELECT number % 3, intDiv(number, 3), toDateTime64('{ts}', 3, 'UTC'), number, ['a', 'b', 'ignored'][number % 7 % 3 + 1], number % 25 FROM numbers({}, {})",
        from * 3,
        (to - from) * 3
    ));
}

/// A relation's rows as sorted text lines: the multiset to compare.
fn rows(sql: &str) -> Vec<String> {
    let text = execute(&format!("SELECT * FROM ({sql}) ORDER BY ALL FORMAT TSV"));
    text.lines().map(str::to_owned).collect()
}

fn expected_clean(database: &str, amount: &str, filter: &str) -> Vec<String> {
    rows(&format!(
        "SELECT p AS _replay_partition, o AS _replay_offset, ts AS _replay_timestamp, kind, toUInt64({amount}) AS amount FROM {database}.events_existing WHERE kind != 'ignored'{filter}"
    ))
}

fn assert_graph_matches(database: &str, amount: &str) {
    let clean = expected_clean(database, amount, "");
    assert!(!clean.is_empty());
    assert_eq!(
        rows(&format!("SELECT * FROM {database}.tbl__clean")),
        clean,
        "clean"
    );
    assert_eq!(
        rows(&format!("SELECT * FROM {database}.tbl__big")),
        rows(&format!(
            "SELECT p, o, ts, toUInt64({amount}) AS a FROM {database}.events_existing WHERE kind != 'ignored' AND a > 10"
        )),
        "big"
    );
    assert_eq!(
        rows(&format!(
            "SELECT kind, sum(amount), sum(n) FROM {database}.tbl__totals GROUP BY kind"
        )),
        rows(&format!(
            "SELECT kind, sum(toUInt64({amount})), count() FROM {database}.events_existing WHERE kind != 'ignored' GROUP BY kind"
        )),
        "totals"
    );
    assert_eq!(
        rows(&format!("SELECT * FROM {database}.view__report")),
        rows(&format!(
            "SELECT kind, sum(toUInt64({amount})) FROM {database}.events_existing WHERE kind != 'ignored' GROUP BY kind"
        )),
        "report"
    );
}

fn show_create(database: &str) -> String {
    execute(&format!("SHOW CREATE TABLE {database}.events_existing"))
}

fn table_uuid(database: &str, table: &str) -> String {
    execute(&format!(
        "SELECT uuid FROM system.tables WHERE database = '{database}' AND name = '{table}'"
    ))
}

#[test]
fn greenfield_build_replays_history_then_new_rows_flow_live() {
    let db = TestDatabase::create("build_offsets");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 40, "2026-11-01 00:00:00");
    let adopted = show_create(&db.name);
    let dir = offsets_project(&db.name, "amount", None);
    let result = build(dir.path(), &[]);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(result["replays"][0]["model"], "clean");
    assert_graph_matches(&db.name, "amount");
    // Live: rows inserted after the build reach every model through the new views.
    insert_events(&db.name, 40, 60, "2026-11-02 00:00:00");
    assert_graph_matches(&db.name, "amount");
    assert_eq!(
        show_create(&db.name),
        adopted,
        "the adopted table is never altered"
    );
    // The run left its records: fingerprints, an invocation, every statement.
    let plan = stb(dir.path(), &["plan", "--json"], "");
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    assert_eq!(
        plan["entries"][0]["sql_change"]["status"], "no_query_change",
        "{plan}"
    );
    assert_eq!(
        execute(&format!(
            "SELECT outcome, exit_code FROM {}._streambuild_invocations FORMAT TSV",
            db.name
        ))
        .trim(),
        "succeeded\t0"
    );
    assert_eq!(
        execute(&format!(
            "SELECT length(resources), pipelines FROM {}._streambuild_manifests FORMAT TSV",
            db.name
        ))
        .trim(),
        "7\t['pl__events']",
        "the manifest lists the tables, views and the report the project owns"
    );
    let statements = execute(&format!(
        "SELECT count() FROM {}._streambuild_run_statements FINAL WHERE sql LIKE 'INSERT INTO%' FORMAT TSV",
        db.name
    ));
    assert_eq!(statements.trim(), "1", "the rendered replay is recorded");
    let lock = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND name = '_streambuild_target_mutation_lock'",
        db.name
    ));
    assert_eq!(lock.trim(), "0", "the lock is released");
    let execution: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/build/execution.json"))
            .expect("artifact"),
    )
    .expect("JSON");
    assert_eq!(execution["status"], "succeeded");
    assert_eq!(
        execution["captured_roots"][0]["ranges"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

#[test]
fn a_sql_change_rebuilds_the_closure_and_selection_limits_it() {
    let db = TestDatabase::create("build_change");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 30, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    assert_graph_matches(&db.name, "amount");

    // Selecting a leaf rebuilds it alone, replayed from clean's lineage columns.
    let clean_uuid = table_uuid(&db.name, "tbl__clean");
    let totals_uuid = table_uuid(&db.name, "tbl__totals");
    let result = build(dir.path(), &["--select", "big"]);
    assert_eq!(
        result["created"],
        serde_json::json!(["tbl__big", "mv__big"]),
        "{result}"
    );
    assert_eq!(table_uuid(&db.name, "tbl__clean"), clean_uuid);
    assert_eq!(table_uuid(&db.name, "tbl__totals"), totals_uuid);
    assert_graph_matches(&db.name, "amount");

    // A changed query: the plan shows it, the build rebuilds clean and its closure.
    rewrite(dir.path(), &models("amount * 2")[..1]);
    let plan = stb(dir.path(), &["plan", "--select", "clean"], "");
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("clean  query_changed  (reason: selected)"),
        "{text}"
    );
    assert!(text.contains("+SELECT"), "{text}");
    let result = build(dir.path(), &["--select", "clean"]);
    let created = result["created"].as_array().map(Vec::len);
    assert_eq!(created, Some(7), "clean, big, totals and report: {result}");
    assert_graph_matches(&db.name, "amount * 2");
    insert_events(&db.name, 30, 35, "2026-11-02 00:00:00");
    assert_graph_matches(&db.name, "amount * 2");
}

#[test]
fn a_bounded_start_time_keeps_the_inclusive_frontier() {
    let db = TestDatabase::create("build_start");
    execute(&EVENTS.replace("{db}", &db.name));
    // Partition 0 only: offsets 1 and 2 before T, 3 and 4 after.
    execute(&format!(
        "INSERT INTO {}.events_existing VALUES (0, 1, '2026-11-01 00:00:00', 1, 'a', 1), (0, 2, '2026-11-01 06:00:00', 2, 'a', 2), (0, 3, '2026-11-02 00:00:00', 3, 'a', 3), (0, 4, '2026-11-03 00:00:00', 4, 'a', 4)",
        db.name
    ));
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    let result = build(
        dir.path(),
        &["--select", "clean", "--start-time", "2026-11-01T12:00:00Z"],
    );
    assert_eq!(result["start_time"], "2026-11-01 12:00:00.000");
    assert_eq!(
        rows(&format!(
            "SELECT _replay_offset FROM {}.tbl__clean",
            db.name
        )),
        ["2", "3", "4"],
        "the last offset landed at or before T is included"
    );
    assert_eq!(
        result["boundaries"][0]["ranges"],
        serde_json::json!([{"partition": 0, "lower": 2, "upper": 4}])
    );
    // A start time without a selection is refused before anything runs or is recorded.
    let manifests = || {
        execute(&format!(
            "SELECT count() FROM {}._streambuild_manifests FORMAT TSV",
            db.name
        ))
    };
    let before = manifests();
    let output = stb(
        dir.path(),
        &[
            "build",
            "--auto-approve",
            "--json",
            "--start-time",
            "2026-11-01",
        ],
        "",
    );
    assert!(!output.status.success());
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-PLAN-001", "{json}");
    assert_eq!(manifests(), before);
}

fn scalar_model(mode: &str, filter: &str) -> (String, String) {
    let position = match mode {
        "timestamp" => "_replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp",
        _ => "_replay_cursor::UInt64 AS _replay_cursor",
    };
    (
        "pipelines/pl__events/clean.sql".into(),
        format!(
            "MODEL (order_by [\"seq\"]);\nSELECT seq::UInt64 AS seq, {position}, kind::String AS kind\nFROM __source(\"events\"){filter}\n"
        ),
    )
}

fn scalar_project(database: &str, mode: &str) -> tempfile::TempDir {
    let mapping = match mode {
        "timestamp" => "_replay_timestamp: ts",
        _ => "_replay_cursor: seq\n        _replay_timestamp: ts",
    };
    let source = format!(
        "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: {mode}\n      columns:\n        {mapping}\n"
    );
    let mut files = project_files(database, &source, None);
    files.push(scalar_model(mode, ""));
    stb_test_support::project_dir(&files)
}

#[test]
fn timestamp_and_cursor_modes_replay_history_exactly_once() {
    for mode in ["timestamp", "cursor"] {
        let db = TestDatabase::create(&format!("build_{mode}"));
        execute(&EVENTS.replace("{db}", &db.name));
        insert_events(&db.name, 0, 20, "2026-11-01 00:00:00");
        let dir = scalar_project(&db.name, mode);
        let result = build(dir.path(), &[]);
        assert_eq!(result["boundaries"][0]["boundary_mode"], mode, "{result}");
        let expected = |db: &str| rows(&format!("SELECT seq FROM {db}.events_existing"));
        assert_eq!(
            rows(&format!("SELECT seq FROM {}.tbl__clean", db.name)),
            expected(&db.name),
            "{mode}"
        );
        // New rows (event time now, cursor above the cutoff) flow live; a rebuild replays
        // everything once more into fresh tables.
        execute(&format!(
            "INSERT INTO {0}.events_existing SELECT 0, 1000 + number, now64(3, 'UTC'), 1000 + number, 'a', 1 FROM numbers(10)",
            db.name
        ));
        assert_eq!(
            rows(&format!("SELECT seq FROM {}.tbl__clean", db.name)),
            expected(&db.name),
            "{mode} live"
        );
        build(dir.path(), &[]);
        assert_eq!(
            rows(&format!("SELECT seq FROM {}.tbl__clean", db.name)),
            expected(&db.name),
            "{mode} rebuilt"
        );
        // A SQL change: the rebuild replays the whole history through the new query.
        rewrite(dir.path(), &[scalar_model(mode, "\nWHERE seq % 2 = 0")]);
        let even = |db: &str, since: &str| {
            rows(&format!(
                "SELECT seq FROM {db}.events_existing WHERE seq % 2 = 0 AND ts >= '{since}'"
            ))
        };
        build(dir.path(), &[]);
        assert_eq!(
            rows(&format!("SELECT seq FROM {}.tbl__clean", db.name)),
            even(&db.name, "1970-01-01 00:00:00"),
            "{mode} after a SQL change"
        );
        // A bounded rebuild keeps only what happened from the start time on.
        let result = build(
            dir.path(),
            &["--select", "clean", "--start-time", "2026-11-01T12:00:00Z"],
        );
        assert!(result["boundaries"][0]["lower"].is_string(), "{result}");
        assert_eq!(
            rows(&format!("SELECT seq FROM {}.tbl__clean", db.name)),
            even(&db.name, "2026-11-01 12:00:00"),
            "{mode} from the start time"
        );
        // The replayed range is recorded for this mode too, in the output and the artifact.
        let covered = &result["boundaries"][0]["coverage"];
        assert_eq!(covered.as_array().map(Vec::len), Some(1), "{result}");
        assert_eq!(covered[0]["replay_boundary_mode"], mode);
        assert_eq!(covered[0]["boundary_key"], format!("_replay_{mode}"));
        assert_eq!(covered[0]["partition_value"], Value::Null);
        assert_eq!(covered[0]["cutoff_inclusive"], true);
        assert_eq!(
            covered[0]["source_timestamp_column_name"],
            "_replay_timestamp"
        );
        let (lower, upper) = match mode {
            // The cursor is seq: from the first at or after the start to the last.
            "cursor" => (
                execute(&format!("SELECT minIf(seq, ts >= '2026-11-01 12:00:00') FROM {}.events_existing FORMAT TSV", db.name)).trim().to_owned(),
                execute(&format!("SELECT max(seq) FROM {}.events_existing FORMAT TSV", db.name)).trim().to_owned(),
            ),
            _ => ("2026-11-01 12:00:00.000".to_owned(), execute(&format!("SELECT toString(max(ts)) FROM {}.events_existing FORMAT TSV", db.name)).trim().to_owned()),
        };
        assert_eq!(covered[0]["lower_value"], lower.as_str(), "{result}");
        assert_eq!(covered[0]["upper_value"], upper.as_str(), "{result}");
        let execution: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("target/run/build/execution.json"))
                .expect("artifact"),
        )
        .expect("JSON");
        assert_eq!(execution["captured_roots"][0]["coverage"], *covered);
        // One range, with no partition: the first and last values of the input replayed
        // (a timestamp as ClickHouse prints it, a cursor as its number).
        let replayed = |aggregate: &str| {
            execute(&format!(
                "SELECT {aggregate} FROM {}.events_existing WHERE ts >= '2026-11-01 12:00:00' FORMAT TSV",
                db.name
            ))
            .trim()
            .to_owned()
        };
        let expected = match mode {
            "cursor" => serde_json::json!([{
                "partition": null,
                "lower": replayed("min(seq)").parse::<u64>().expect("a number"),
                "upper": replayed("max(seq)").parse::<u64>().expect("a number"),
            }]),
            _ => serde_json::json!([{
                "partition": null,
                "lower": replayed("toString(min(ts))"),
                "upper": replayed("toString(max(ts))"),
            }]),
        };
        assert_eq!(
            execution["captured_roots"][0]["ranges"], expected,
            "{mode}: {execution}"
        );
        assert_eq!(result["boundaries"][0]["ranges"], expected, "{mode}");
    }
}

#[test]
fn protected_pipelines_need_their_token_and_a_decline_writes_nothing() {
    let db = TestDatabase::create("build_protect");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 10, "2026-11-01 00:00:00");
    let dir = offsets_project(
        &db.name,
        "amount",
        Some("[protection]\nwarning = \"Feeds billing.\"\nconfirmation = \"BILLING\"\n"),
    );
    let relations = || {
        execute(&format!(
            "SELECT name FROM system.tables WHERE database = '{}' AND name NOT LIKE '\\_streambuild\\_%' ORDER BY name",
            db.name
        ))
    };
    let before = relations();
    let output = stb(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-BUILD-002");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--confirm BILLING"))
    );
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("PROTECTED PIPELINE: pl__events\nFeeds billing.")
    );
    // Typed wrong: declined.
    let output = stb(dir.path(), &["build"], "billing\n");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Build cancelled."));
    assert_eq!(
        relations(),
        before,
        "a declined build creates and drops nothing"
    );
    let outcomes = execute(&format!(
        "SELECT outcome FROM {}._streambuild_invocations ORDER BY completed_at FORMAT TSV",
        db.name
    ));
    assert_eq!(
        outcomes.lines().collect::<Vec<_>>(),
        ["failed", "cancelled"]
    );
    // The token on the command line, or typed, lets it run.
    build(dir.path(), &["--confirm", "BILLING"]);
    assert_graph_matches(&db.name, "amount");
    let output = stb(dir.path(), &["build", "--select", "big"], "BILLING\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_unprotected_build_asks_and_a_no_changes_nothing() {
    let db = TestDatabase::create("build_decline");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 10, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    let uuid = table_uuid(&db.name, "tbl__clean");
    let output = stb(dir.path(), &["build"], "n\n");
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Direct plan"),
        "the plan is shown first: {text}"
    );
    assert!(text.contains("Build cancelled."), "{text}");
    assert_eq!(
        table_uuid(&db.name, "tbl__clean"),
        uuid,
        "nothing was rebuilt"
    );
    // --json without --auto-approve is refused outright.
    let output = stb(dir.path(), &["build", "--json"], "");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-BUILD-001");
    let output = stb(dir.path(), &["build"], "yes\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_ne!(table_uuid(&db.name, "tbl__clean"), uuid, "rebuilt");
    assert_graph_matches(&db.name, "amount");
}

/// Counts of (missing, duplicated) rows of `tbl__clean` against the model over the source.
fn missing_and_duplicates(database: &str) -> (u64, u64) {
    let diff = execute(&format!(
        "SELECT sumIf(e - a, e > a), sumIf(a - e, a > e) FROM (\
         SELECT p, o, sum(expected) AS e, sum(actual) AS a FROM (\
         SELECT p, o, 1 AS expected, 0 AS actual FROM {database}.events_existing WHERE kind != 'ignored' \
         UNION ALL SELECT _replay_partition, _replay_offset, 0, 1 FROM {database}.tbl__clean) GROUP BY p, o) FORMAT TSV"
    ));
    let mut numbers = diff.split_whitespace().map(|n| n.parse().expect("count"));
    (
        numbers.next().expect("missing"),
        numbers.next().expect("duplicated"),
    )
}

const RUN: u8 = 0;
const PAUSE: u8 = 1;
const PAUSED: u8 = 2;
const STOP: u8 = 3;

/// How the writer puts three rows (positions `next..next + 3`) into the adopted table.
type InsertSql = fn(database: &str, next: u64) -> String;

/// A plain synchronous `INSERT ... SELECT` into the adopted table.
fn insert_directly(database: &str, next: u64) -> String {
    format!(
        "INSERT INTO {database}.events_existing SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number, ['a', 'b', 'ignored'][number % 7 % 3 + 1], number % 25 FROM numbers({next}, 3)"
    )
}

/// The same rows as literal values.
fn values(next: u64) -> String {
    (next..next + 3)
        .map(|n| {
            format!(
                "({}, {}, now64(3, 'UTC'), {n}, '{}', {})",
                n % 3,
                n / 3,
                ["a", "b", "ignored"][usize::try_from(n % 7 % 3).expect("small")],
                n % 25
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rebuilds `selector` 20 times while one writer inserts rows (positions increasing per
/// partition) every few milliseconds; after each rebuild, with the writer resting, `check`
/// returns (missing, doubled) and may assert more.
fn rebuild_under_a_writer(
    db: &TestDatabase,
    dir: &Path,
    selector: &str,
    check: &dyn Fn() -> (u64, u64),
) {
    rebuild_under(db, dir, selector, 20, insert_directly, &|| {}, check);
}

/// `rebuild_under_a_writer` with the writer's statement, the number of rebuilds, and
/// `settle`, run once the writer rests and before `check` (a Buffer table is flushed there).
fn rebuild_under(
    db: &TestDatabase,
    dir: &Path,
    selector: &str,
    rebuilds: usize,
    insert: InsertSql,
    settle: &dyn Fn(),
    check: &dyn Fn() -> (u64, u64),
) {
    let paused = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(RUN));
    let writer = {
        let paused = std::sync::Arc::clone(&paused);
        let database = db.name.clone();
        std::thread::spawn(move || {
            let mut next = 100_u64 * 3;
            loop {
                match paused.load(std::sync::atomic::Ordering::SeqCst) {
                    STOP => break,
                    PAUSE | PAUSED => {
                        paused.store(PAUSED, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        continue;
                    }
                    _ => {}
                }
                execute(&insert(&database, next));
                next += 3;
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            next
        })
    };
    let set = |state| paused.store(state, std::sync::atomic::Ordering::SeqCst);
    let mut found = Vec::new();
    for _ in 0..rebuilds {
        build(dir, &["--select", selector]);
        // Compare while the writer rests, then let it go on.
        set(PAUSE);
        while paused.load(std::sync::atomic::Ordering::SeqCst) != PAUSED {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        settle();
        found.push(check());
        set(RUN);
    }
    set(STOP);
    let rows = writer.join().expect("writer");
    let missing: u64 = found.iter().map(|f| f.0).sum();
    let duplicated: u64 = found.iter().map(|f| f.1).sum();
    eprintln!(
        "{rebuilds} rebuilds under a writer ({}): {rows} source rows, {missing} rows missing, {duplicated} written twice, per rebuild {found:?}",
        db.name
    );
    assert_eq!(missing, 0, "no row may be lost");
    assert_eq!(duplicated, 0, "no row may be written twice");
}

#[test]
fn offsets_rebuilds_while_a_writer_inserts_lose_no_row_and_double_none() {
    let db = TestDatabase::create("build_writer");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 100, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    rebuild_under_a_writer(&db, dir.path(), "clean", &|| {
        // Every model of the closure, not only the root.
        assert_graph_matches(&db.name, "amount");
        missing_and_duplicates(&db.name)
    });
}

#[test]
fn cursor_rebuilds_while_a_writer_inserts_lose_no_row_and_double_none() {
    let db = TestDatabase::create("build_writer_cursor");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 100, "2026-11-01 00:00:00");
    let dir = scalar_project(&db.name, "cursor");
    build(dir.path(), &[]);
    rebuild_under_a_writer(&db, dir.path(), "clean", &|| {
        let diff = execute(&format!(
            "SELECT sumIf(e - a, e > a), sumIf(a - e, a > e) FROM (\
             SELECT seq, sum(expected) AS e, sum(actual) AS a FROM (\
             SELECT seq, 1 AS expected, 0 AS actual FROM {0}.events_existing \
             UNION ALL SELECT seq, 0, 1 FROM {0}.tbl__clean) GROUP BY seq) FORMAT TSV",
            db.name
        ));
        let mut numbers = diff.split_whitespace().map(|n| n.parse().expect("count"));
        (
            numbers.next().expect("missing"),
            numbers.next().expect("doubled"),
        )
    });
}

/// The steps the last build of the project in `dir` ran, from its `execution.json`.
fn executed_steps(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("target/run/build/execution.json"))
        .expect("execution.json");
    let execution: Value = serde_json::from_str(&text).expect("JSON");
    execution["statement_outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .filter_map(|o| o["step_id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn rebuilds_under_a_buffer_table_keep_the_timed_wait_and_lose_no_row_and_double_none() {
    // A Buffer table flushes into the adopted table from a background thread, which no
    // catalog lists as a query: the build must keep the timed wait.
    let db = TestDatabase::create("build_buffer");
    execute(&EVENTS.replace("{db}", &db.name));
    execute(&format!(
        "CREATE TABLE {0}.events_buffer AS {0}.events_existing ENGINE = Buffer({0}, events_existing, 1, 0, 1, 1, 1000000, 1, 100000000)",
        db.name
    ));
    insert_events(&db.name, 0, 100, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    let insert: InsertSql = |database, next| {
        format!(
            "INSERT INTO {database}.events_buffer VALUES {}",
            values(next)
        )
    };
    let flush = || {
        execute(&format!("OPTIMIZE TABLE {}.events_buffer", db.name));
    };
    rebuild_under(&db, dir.path(), "clean", 4, insert, &flush, &|| {
        assert_graph_matches(&db.name, "amount");
        missing_and_duplicates(&db.name)
    });
    let steps = executed_steps(dir.path());
    assert!(
        steps.iter().any(|s| s == "wait_for_live_stabilization"),
        "{steps:?}"
    );
    // Rows really went through the buffer and reached every model.
    let through_buffer = execute(&format!(
        "SELECT count() > 0 FROM {}.events_existing WHERE o >= 100 FORMAT TSV",
        db.name
    ));
    assert_eq!(through_buffer.trim(), "1");
}

fn spawn_build(dir: &Path, invocation: &str) -> std::process::Child {
    stb_test_support::spawn_on_project(dir, &["build", "--auto-approve", "--json"], invocation)
}

fn lock_owner(database: &str) -> String {
    execute(&format!(
        "SELECT comment FROM system.tables WHERE database = '{database}' AND name = '_streambuild_target_mutation_lock' FORMAT TSV"
    ))
    .trim()
    .to_owned()
}

#[test]
fn a_build_killed_after_any_statement_is_unlocked_and_rerun_to_the_right_rows() {
    // The rebuild after a SQL change runs 19 statements: prepare, 7 drops, 7 creates,
    // the stabilisation wait, the capture, the settle wait and the replay.
    let points = [1_u64, 5, 9, 13, 16, 18];
    let mut killed = Vec::new();
    let mut last_kill = std::time::Instant::now();
    for k in points {
        let db = TestDatabase::create(&format!("build_kill_{k}"));
        execute(&EVENTS.replace("{db}", &db.name));
        insert_events(&db.name, 0, 30, "2026-11-01 00:00:00");
        let dir = offsets_project(&db.name, "amount", None);
        build(dir.path(), &[]);
        rewrite(dir.path(), &models("amount * 2")[..1]);
        let invocation = format!("kill-{k}-{}", db.name);
        let mut child = spawn_build(dir.path(), &invocation);
        wait_for_statements(&db.name, &invocation, k);
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        assert!(
            lock_owner(&db.name).ends_with(invocation.as_str()),
            "the killed run holds the lock"
        );
        // Its heartbeat is recent: the documented recovery refuses for now.
        let output = stb(dir.path(), &["unlock", "--json"], "");
        let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(json["error"]["code"], "STB-LOCK-003", "{json}");
        // A new build of the same models is refused while the run may be alive.
        let output = stb(dir.path(), &["build", "--auto-approve", "--json"], "");
        let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(json["error"]["code"], "STB-RUNS-003", "{json}");
        killed.push((db, dir, invocation));
        last_kill = std::time::Instant::now();
    }
    // Silence marks a run as stopped: 45 s of it by default (the refusals above), two
    // seconds for the recovery here.
    std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE.saturating_sub(last_kill.elapsed()));
    let short = &stb_test_support::SHORT_SIGNAL_WINDOW;
    for (db, dir, invocation) in &killed {
        let output =
            stb_test_support::stb_on_project_with(dir.path(), &["unlock", "--json"], "", short);
        let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(json["broken_owner"], invocation.as_str(), "{json}");
        let output = stb_test_support::stb_on_project_with(
            dir.path(),
            &["build", "--auto-approve", "--json"],
            "",
            short,
        );
        assert!(
            output.status.success(),
            "the rerun failed\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_graph_matches(&db.name, "amount * 2");
        insert_events(&db.name, 30, 33, "2026-11-02 00:00:00");
        assert_graph_matches(&db.name, "amount * 2");
    }
}

#[test]
fn an_interrupted_build_stops_releases_the_lock_and_reruns_cleanly() {
    let db = TestDatabase::create("build_interrupt");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 30, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    let invocation = format!("interrupt-{}", db.name);
    let child = spawn_build(dir.path(), &invocation);
    // Statement 16 is the stabilisation wait: interrupt while it runs.
    wait_for_statements(&db.name, &invocation, 15);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let output = child.wait_with_output().expect("exits");
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["status"], "cancelled", "{json}");
    assert_eq!(lock_owner(&db.name), "", "the lock is released");
    assert_eq!(
        execute(&format!(
            "SELECT outcome, exit_code FROM {}._streambuild_invocations WHERE invocation_id = '{invocation}' FORMAT TSV",
            db.name
        ))
        .trim(),
        "cancelled\t130"
    );
    let execution: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/build/execution.json"))
            .expect("artifact"),
    )
    .expect("JSON");
    assert_eq!(execution["status"], "cancelled");
    assert_eq!(execution["failed_step"], "wait_for_live_stabilization");
    build(dir.path(), &[]);
    assert_graph_matches(&db.name, "amount");
}

#[test]
fn changed_rebuilds_what_differs_and_missing_upstream_fills_gaps() {
    let db = TestDatabase::create("build_changed");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 20, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    // Nothing built yet: selecting a leaf alone is refused, unless its missing upstream
    // comes with it.
    let output = stb(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "big"],
        "",
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-PLAN-003", "{json}");
    let plan = stb(
        dir.path(),
        &[
            "plan",
            "--json",
            "--select",
            "big",
            "--include-missing-upstream",
        ],
        "",
    );
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    let reasons: Vec<(String, String)> = plan["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| (e["model"].to_string(), e["reason"].to_string()))
        .collect();
    assert!(
        reasons.contains(&("\"clean\"".into(), "\"missing_upstream\"".into())),
        "{reasons:?}"
    );
    build(
        dir.path(),
        &["--select", "big", "--include-missing-upstream"],
    );
    // clean's closure (big, totals and the report) came with it.
    assert_graph_matches(&db.name, "amount");

    let output = stb(dir.path(), &["plan", "--changed"], "");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "No changed models to build."
    );
    let result = build(dir.path(), &["--changed"]);
    assert_eq!(result["status"], "nothing_changed", "{result}");

    // A changed leaf is all --changed rebuilds.
    let mut leaf = models("amount");
    leaf[1].1 = leaf[1].1.replace("amount > 10", "amount > 12");
    rewrite(dir.path(), &leaf[1..2]);
    let clean_uuid = table_uuid(&db.name, "tbl__clean");
    let result = build(dir.path(), &["--changed"]);
    assert_eq!(
        result["created"],
        serde_json::json!(["tbl__big", "mv__big"]),
        "{result}"
    );
    assert_eq!(table_uuid(&db.name, "tbl__clean"), clean_uuid);
    assert_eq!(
        rows(&format!(
            "SELECT _replay_offset, _replay_partition FROM {}.tbl__big",
            db.name
        )),
        rows(&format!(
            "SELECT o, p FROM {}.events_existing WHERE kind != 'ignored' AND amount > 12",
            db.name
        ))
    );
}

#[test]
fn events_stream_one_json_line_per_run_event() {
    let db = TestDatabase::create("build_events");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 5, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    let output = stb(dir.path(), &["build", "--events"], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("STB-BUILD-001"));
    let output = stb(dir.path(), &["build", "--events", "--auto-approve"], "");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is one JSON event"))
        .collect();
    assert_eq!(events[0]["event"], "run_started");
    assert_eq!(events[0]["totalStatements"], 19);
    assert_eq!(
        events.last().map(|e| e["event"].clone()),
        Some(Value::from("run_completed"))
    );
    let sequences: Vec<u64> = events
        .iter()
        .filter_map(|e| e["sequence"].as_u64())
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    let replay = events
        .iter()
        .find(|e| e["event"] == "statement_started" && e["stepId"] == "replay_clean")
        .expect("the replay starts");
    assert_eq!(replay["phase"], "replay");
    assert_eq!(
        replay["replayOffsetProgress"]["ranges"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    // The same events are in the warehouse, in the same order.
    let stored = execute(&format!(
        "SELECT count() FROM {}._streambuild_run_events FORMAT TSV",
        db.name
    ));
    assert!(stored.trim().parse::<usize>().expect("count") >= events.len());
}

/// A DBA can run a build by hand: the step files under target/run/build/, run in order on
/// a target whose model relations are gone, give the same tables; `stb plan` writes them
/// too (as templates: the replays' boundaries are known only when a build captures them).
#[test]
fn the_step_files_of_a_build_run_by_hand_reproduce_it() {
    let db = TestDatabase::create("build_steps");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 30, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    build(dir.path(), &[]);
    assert_graph_matches(&db.name, "amount");
    let steps_dir = dir.path().join("target/run/build/steps");
    let steps = stb_test_support::sorted_files(&steps_dir);
    let workflow = std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
        .expect("workflow.sql");
    assert_eq!(
        steps.len(),
        workflow.matches("-- step: ").count(),
        "one file a statement"
    );
    let first = steps[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert_eq!(first, "0001_prepare_target_database.sql");
    // workflow.sql is exactly the step files, in order, joined.
    let read_all = |files: &[std::path::PathBuf]| {
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("step"))
            .collect::<Vec<_>>()
    };
    assert_eq!(workflow, read_all(&steps).join("\n"));
    // The model relations disappear; the steps, in order, bring them back with their rows.
    for relation in [
        "view__report",
        "mv__big",
        "mv__totals",
        "mv__clean",
        "tbl__big",
        "tbl__totals",
        "tbl__clean",
    ] {
        execute(&format!("DROP TABLE IF EXISTS {}.{relation} SYNC", db.name));
    }
    for step in &steps {
        let sql = std::fs::read_to_string(step).expect("step");
        if sql
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
        {
            continue;
        }
        execute(sql.trim_end().trim_end_matches(';'));
    }
    assert_graph_matches(&db.name, "amount");

    let plan = stb(dir.path(), &["plan", "--json"], "");
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    let artifact: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("target/run/plan/plan.json")).expect("plan.json"),
    )
    .expect("JSON");
    assert_eq!(artifact["step_files"], true, "{plan}");
    let planned = stb_test_support::sorted_files(&dir.path().join("target/run/plan/steps"));
    assert_eq!(
        Some(planned.len()),
        artifact["steps"].as_array().map(Vec::len)
    );
    // A replay's boundary is captured at run time: its file is a template.
    let name = |path: &std::path::PathBuf| {
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned()
    };
    for (path, step) in planned
        .iter()
        .zip(artifact["steps"].as_array().expect("steps"))
    {
        let extension = if step["template"] == true {
            ".sql.template"
        } else {
            ".sql"
        };
        assert!(name(path).ends_with(extension), "{} for {step}", name(path));
    }
    assert!(planned.iter().any(|p| name(p).ends_with(".sql.template")));
    let template =
        std::fs::read_to_string(dir.path().join("target/run/plan/workflow.template.sql"))
            .expect("workflow.template.sql");
    assert_eq!(template, read_all(&planned).join("\n"));
}

/// An insert into the adopted table that begins before the build creates its views and
/// commits after: its rows do not reach the new views (the insert's pipeline was built
/// without them), so the build must wait for it before capturing the boundary. Waiting on
/// evidence (the insert, by query id) replays them once. (A rebuild is protected anyway:
/// dropping the old views waits for the inserts that use them; a first build is not.)
#[test]
fn an_insert_that_straddles_the_view_creation_is_neither_lost_nor_doubled() {
    let db = TestDatabase::create("build_straddle");
    execute(&EVENTS.replace("{db}", &db.name));
    insert_events(&db.name, 0, 30, "2026-11-01 00:00:00");
    let dir = offsets_project(&db.name, "amount", None);
    let database = db.name.clone();
    let slow = std::thread::spawn(move || {
        // About 8 s: its 160 rows commit together at the end.
        execute(&format!(
            "INSERT INTO {database}.events_existing SELECT number % 3, 1000 + intDiv(number, 3), toDateTime64('2026-11-02 00:00:00', 3, 'UTC'), 1000 + number, 'a', number % 25 FROM numbers(160) WHERE sleepEachRow(0.05) = 0 SETTINGS max_block_size = 10"
        ));
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let result = build(dir.path(), &[]);
    slow.join().expect("the slow insert");
    assert_eq!(result["status"], "succeeded", "{result}");
    let steps: Vec<String> =
        std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
            .expect("workflow")
            .lines()
            .filter_map(|l| l.strip_prefix("-- step: ").map(str::to_owned))
            .collect();
    assert!(
        steps
            .iter()
            .any(|s| s == "wait_for_inserts_begun_before_views"),
        "{steps:?}"
    );
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM {}.events_existing FORMAT TSV",
            db.name
        ))
        .trim(),
        "250"
    );
    assert_graph_matches(&db.name, "amount");
}

/// Sparse offsets (every offset its own run) stay cheap to record: the artifacts and
/// events list the first 1,000 runs and count them all; the coverage bounds each partition
/// and every row is still replayed once.
#[test]
fn sparse_offsets_are_counted_not_listed() {
    let db = TestDatabase::create("build_sparse");
    execute(&EVENTS.replace("{db}", &db.name));
    execute(&format!(
        "INSERT INTO {}.events_existing SELECT 0, number * 2, toDateTime64('2026-11-01 00:00:00', 3, 'UTC'), number, 'a', number % 25 FROM numbers(3000)",
        db.name
    ));
    let dir = offsets_project(&db.name, "amount", None);
    let result = build(dir.path(), &[]);
    let boundary = &result["boundaries"][0];
    assert_eq!(boundary["ranges_total"], 3000, "{boundary}");
    assert_eq!(boundary["ranges"].as_array().map(Vec::len), Some(1000));
    assert_eq!(boundary["coverage"][0]["lower_value"], "0");
    assert_eq!(boundary["coverage"][0]["upper_value"], "5998");
    assert_graph_matches(&db.name, "amount");
}
