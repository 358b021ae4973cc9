//! The shrink guard on the local stack: a rebuild whose retained history holds less than a
//! model does now is shown by `stb plan` with its numbers, refused by `stb build` before
//! anything is dropped (and recorded as refused), and goes through only with
//! `--allow-shrink`, which records the accepted loss. A `--start-time` rebuild shows what it
//! discards and needs no extra flag.
//!
//! Event times are relative to the run: "old" rows are two days before now, so they are
//! always beyond a one-day retention, and "fresh" rows are always within it.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{TestDatabase, execute, stack, stb_on_project, unique_name, wait_for};

const DAY_MS: i64 = 24 * 3_600 * 1_000;

fn stb(dir: &Path, args: &[&str]) -> Output {
    stb_on_project(dir, args, "")
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn succeeded(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    json_of(output)
}

fn count(sql: &str) -> u64 {
    execute(sql).trim().parse().expect("count")
}

/// Every relation of `database` with its uuid: what "nothing dropped or created" compares.
fn relations(database: &str) -> String {
    execute(&format!(
        "SELECT name, uuid FROM system.tables WHERE database = '{database}' AND name NOT LIKE '\\_streambuild\\_%' ORDER BY name FORMAT TSV"
    ))
}

/// The last build invocation's outcome and summary.
fn last_invocation(database: &str) -> (String, Value) {
    let row = execute(&format!(
        "SELECT outcome, summary_json FROM {database}._streambuild_invocations WHERE command = 'build' ORDER BY completed_at DESC LIMIT 1 FORMAT JSONEachRow"
    ));
    let row: Value = serde_json::from_str(row.trim()).expect("invocation row");
    let summary =
        serde_json::from_str(row["summary_json"].as_str().unwrap_or("{}")).expect("summary JSON");
    (row["outcome"].as_str().unwrap_or("").to_owned(), summary)
}

/// The refusal every shrinking build meets without --allow-shrink: exit 1 with the code,
/// the model and its numbers; nothing dropped or created; recorded as refused.
fn assert_refused(dir: &Path, database: &str, model: &str, numbers: &str) {
    let before = relations(database);
    let output = stb(dir, &["build", "--auto-approve", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let error = json_of(&output);
    assert_eq!(error["error"]["code"], "STB-BUILD-005", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("{model}: {numbers}")),
        "{message}"
    );
    assert!(
        error["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("--allow-shrink"),
        "{error}"
    );
    assert_eq!(relations(database), before, "nothing dropped or created");
    let (outcome, summary) = last_invocation(database);
    assert_eq!(outcome, "refused");
    assert_eq!(summary["code"], "STB-BUILD-005");
    assert!(
        summary["shrink"]["lost_rows"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    // The text form says the same and names the flag.
    let text = stb(dir, &["build", "--auto-approve"]);
    assert_eq!(text.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(stderr.contains("error[STB-BUILD-005]"), "{stderr}");
    assert!(stderr.contains(&format!("{model}: {numbers}")), "{stderr}");
    assert_eq!(relations(database), before, "nothing dropped or created");
}

fn kafka_project(database: &str, topic: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/orders.yml".to_owned(),
            format!(
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: {topic}\n    replay_boundary: {{mode: offsets}}\n    retention: {{duration: 1d}}\n    settings:\n      kafka_poll_timeout_ms: \"200\"\n",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/order_lines.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'id')::UInt64 AS id\nFROM __source(\"orders\")\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn send(topic: &str, ids: std::ops::Range<u64>, timestamp_ms: i64) {
    let records: Vec<Record> = ids
        .map(|id| Record {
            partition: i32::try_from(id % 3).expect("partition"),
            key: id.to_string(),
            value: format!("{{\"id\": {id}}}"),
            headers: Vec::new(),
            timestamp_ms,
        })
        .collect();
    produce(&stack().kafka_brokers, topic, &records);
}

#[test]
fn a_kafka_landing_whose_history_expired_is_shown_refused_and_rebuilt_only_when_allowed() {
    let db = TestDatabase::create("shrink_kafka");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    let dir = kafka_project(&db.name, &topic);
    succeeded(&stb(dir.path(), &["build", "--auto-approve", "--json"]));
    // Six orders stamped two days ago reach the model through the live views; the
    // landing's one-day retention expires them (the merge makes it happen now).
    send(&topic, 0..6, run_base_ms() - 2 * DAY_MS);
    let table = format!("{}.tbl__order_lines", db.name);
    assert!(
        wait_for(Duration::from_secs(60), || count(&format!(
            "SELECT count() FROM {table}"
        )) == 6),
        "the live views deliver the orders"
    );
    execute(&format!("OPTIMIZE TABLE {}.raw__orders FINAL", db.name));
    assert_eq!(
        count(&format!("SELECT count() FROM {}.raw__orders", db.name)),
        0
    );

    let plan = succeeded(&stb(dir.path(), &["plan", "--json"]));
    let window = &plan["replay_roots"][0]["replay_window"];
    assert_eq!(window["model"], "order_lines", "{plan}");
    assert_eq!(window["basis"], "rows");
    assert_eq!(window["live_rows"], 6);
    assert_eq!(window["replayable_rows"], 0);
    assert_eq!(window["lost_rows"], 6);
    assert_eq!(window["reason"], "retention");
    assert_eq!(window["retention"], "1d");
    assert_eq!(plan["shrink"]["needs_allow_shrink"], true);
    assert_eq!(plan["shrink"]["lost_rows"], 6);
    let text = stb(dir.path(), &["plan"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains(
            "order_lines: 6 rows now, 0 replayable (6 lost: history expired by retention 1d)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("SHRINK: this rebuild would lose 6 rows"),
        "{stdout}"
    );

    assert_refused(
        dir.path(),
        &db.name,
        "order_lines",
        "6 rows now, 0 replayable",
    );
    assert_eq!(
        count(&format!("SELECT count() FROM {table}")),
        6,
        "rows kept"
    );

    let accepted = succeeded(&stb(
        dir.path(),
        &["build", "--auto-approve", "--json", "--allow-shrink"],
    ));
    assert_eq!(accepted["status"], "succeeded");
    assert_eq!(accepted["shrink"]["accepted"], true);
    assert_eq!(accepted["shrink"]["lost_rows"], 6);
    assert_eq!(accepted["replay_windows"][0]["lost_rows"], 6);
    assert_eq!(
        count(&format!("SELECT count() FROM {table}")),
        0,
        "the accepted loss"
    );
    let (outcome, summary) = last_invocation(&db.name);
    assert_eq!(outcome, "succeeded");
    assert_eq!(summary["shrink"]["accepted"], true);
    assert_eq!(summary["shrink"]["lost_rows"], 6);
    let events = execute(&format!(
        "SELECT event_kind FROM {}._streambuild_run_events WHERE event_kind LIKE 'shrink%' ORDER BY emitted_at FORMAT TSV",
        db.name
    ));
    assert_eq!(
        events.lines().collect::<Vec<_>>(),
        ["shrink_refused", "shrink_refused", "shrink_accepted"]
    );

    // Fresh orders are retained: the next rebuild loses nothing and needs no flag.
    send(&topic, 6..9, run_base_ms());
    assert!(
        wait_for(Duration::from_secs(60), || count(&format!(
            "SELECT count() FROM {table}"
        )) == 3),
        "fresh orders arrive"
    );
    let rebuilt = succeeded(&stb(dir.path(), &["build", "--auto-approve", "--json"]));
    assert_eq!(rebuilt["shrink"]["needs_allow_shrink"], false);
    assert_eq!(rebuilt["replay_windows"][0]["replayable_rows"], 3);
    assert_eq!(
        execute(&format!("SELECT id FROM {table} ORDER BY id FORMAT TSV")),
        "6\n7\n8\n"
    );
}

const ADOPTED: &str = "CREATE TABLE {db}.events_existing (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), amount UInt64) ENGINE = MergeTree ORDER BY (p, o)";

fn adopted_project(database: &str, mode: &str, model_tail: &str) -> tempfile::TempDir {
    let columns = match mode {
        "timestamp" => "        _replay_timestamp: ts\n",
        _ => {
            "        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n"
        }
    };
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"events\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/events.yml".to_owned(),
            format!(
                "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: {mode}\n      columns:\n{columns}"
            ),
        ),
        (
            "pipelines/pl__events/clean.sql".to_owned(),
            format!(
                "MODEL (order_by [\"_replay_timestamp\"]);\nSELECT _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp, amount::UInt64 AS amount\nFROM __source(\"events\"){model_tail}\n"
            ),
        ),
        (
            "pipelines/pl__events/totals.sql".to_owned(),
            "MODEL (order_by [\"bucket\"], engine \"SummingMergeTree\");\nSELECT (amount % 2)::UInt8 AS bucket, count()::UInt64 AS n\nFROM __source(\"events\")\nGROUP BY bucket\n".to_owned(),
        ),
    ];
    stb_test_support::project_dir(&files)
}

/// `n` rows at offsets `from..from + n` in partition 0, `age` before now.
fn insert_adopted(database: &str, from: u64, n: u64, age: &str) {
    execute(&format!(
        "INSERT INTO {database}.events_existing SELECT 0, {from} + number, now64(3, 'UTC') - INTERVAL {age}, {from} + number FROM numbers({n})"
    ));
}

#[test]
fn an_adopted_table_whose_rows_expired_before_the_boundary_is_refused_and_groups_are_compared() {
    let db = TestDatabase::create("shrink_adopted");
    execute(&format!(
        "{} TTL toDateTime(ts) + INTERVAL 1 DAY",
        ADOPTED.replace("{db}", &db.name)
    ));
    let dir = adopted_project(&db.name, "timestamp", "");
    succeeded(&stb(dir.path(), &["build", "--auto-approve", "--json"]));
    // Four rows two days old (both parities), six fresh (amounts 10..16: both parities).
    insert_adopted(&db.name, 0, 4, "2 DAY");
    insert_adopted(&db.name, 10, 6, "1 MINUTE");
    let clean = format!("{}.tbl__clean", db.name);
    assert_eq!(count(&format!("SELECT count() FROM {clean}")), 10);
    execute(&format!("OPTIMIZE TABLE {}.events_existing FINAL", db.name));
    assert_eq!(
        count(&format!("SELECT count() FROM {}.events_existing", db.name)),
        6
    );

    let plan = succeeded(&stb(dir.path(), &["plan", "--json"]));
    let windows: Vec<&Value> = plan["replay_roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| &r["replay_window"])
        .collect();
    let clean_window = windows
        .iter()
        .find(|w| w["model"] == "clean")
        .expect("clean");
    assert_eq!(clean_window["live_rows"], 10, "{plan}");
    assert_eq!(clean_window["replayable_rows"], 6);
    assert_eq!(clean_window["input_rows"], 6);
    assert_eq!(clean_window["lost_rows"], 4);
    assert_eq!(clean_window["reason"], "retention");
    assert_eq!(clean_window["retention"], "1d");
    // The aggregate keeps both groups: its row count is not comparable, its groups are.
    let totals = windows
        .iter()
        .find(|w| w["model"] == "totals")
        .expect("totals");
    assert_eq!(totals["basis"], "groups");
    assert_eq!(totals["group_key"], "bucket");
    assert_eq!(totals["live_rows"], 2);
    assert_eq!(totals["replayable_rows"], 2);
    assert_eq!(totals["lost_rows"], 0);
    assert_eq!(plan["shrink"]["models"], serde_json::json!(["clean"]));

    assert_refused(dir.path(), &db.name, "clean", "10 rows now, 6 replayable");
    assert_eq!(
        count(&format!("SELECT count() FROM {clean}")),
        10,
        "rows kept"
    );
    // At a terminal the build asks, with the numbers on screen; no keeps everything.
    let before = relations(&db.name);
    let declined = stb_on_project(dir.path(), &["build"], "n\n");
    assert_eq!(declined.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&declined.stderr);
    assert!(
        stderr.contains("This rebuild loses rows that retained history cannot restore:\n  clean: 10 rows now, 6 replayable (4 lost: history expired by retention 1d)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Rebuild anyway and lose these rows? [y/N]"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&declined.stdout).contains("Build cancelled."));
    assert_eq!(relations(&db.name), before, "nothing dropped or created");
    assert_eq!(last_invocation(&db.name).0, "cancelled");
    let accepted = succeeded(&stb(
        dir.path(),
        &["build", "--auto-approve", "--json", "--allow-shrink"],
    ));
    assert_eq!(accepted["shrink"]["lost_rows"], 4);
    assert_eq!(count(&format!("SELECT count() FROM {clean}")), 6);

    // A new filter gives fewer rows on purpose: measured through the query that filled the
    // table, history lost nothing, so no flag is needed.
    let model = dir.path().join("pipelines/pl__events/clean.sql");
    let text = std::fs::read_to_string(&model).expect("model");
    std::fs::write(&model, format!("{}WHERE amount > 12\n", text)).expect("write");
    let plan = succeeded(&stb(dir.path(), &["plan", "--json", "--select", "clean"]));
    let window = &plan["replay_roots"][0]["replay_window"];
    assert_eq!(window["query_changed"], true, "{plan}");
    assert_eq!(window["history_rows"], 6);
    assert_eq!(window["retained_rows"], 3);
    assert_eq!(window["lost_rows"], 0);
    let rebuilt = succeeded(&stb(
        dir.path(),
        &["build", "--auto-approve", "--json", "--select", "clean"],
    ));
    assert_eq!(rebuilt["shrink"]["needs_allow_shrink"], false, "{rebuilt}");
    assert_eq!(count(&format!("SELECT count() FROM {clean}")), 3);
}

/// `YYYY-MM-DDTHH:MM:SSZ`, `ago` before the warehouse's now.
fn instant_ago(ago: &str) -> String {
    execute(&format!(
        "SELECT formatDateTime(now() - INTERVAL {ago}, '%Y-%m-%dT%H:%i:%SZ', 'UTC') FORMAT TSV"
    ))
    .trim()
    .to_owned()
}

#[test]
fn a_start_time_rebuild_shows_what_it_discards_and_needs_no_extra_flag() {
    let db = TestDatabase::create("shrink_start");
    execute(&ADOPTED.replace("{db}", &db.name));
    let dir = adopted_project(&db.name, "offsets", " WHERE amount != 3");
    insert_adopted(&db.name, 0, 5, "3 DAY");
    insert_adopted(&db.name, 5, 4, "1 HOUR");
    succeeded(&stb(dir.path(), &["build", "--auto-approve", "--json"]));
    let clean = format!("{}.tbl__clean", db.name);
    assert_eq!(
        count(&format!("SELECT count() FROM {clean}")),
        8,
        "amount 3 filtered"
    );

    let start = instant_ago("1 DAY");
    let args = ["--select", "clean", "--start-time", start.as_str()];
    let mut plan_args = vec!["plan", "--json"];
    plan_args.extend(args);
    let plan = succeeded(&stb(dir.path(), &plan_args));
    let window = &plan["replay_roots"][0]["replay_window"];
    assert_eq!(window["live_rows"], 8, "{plan}");
    assert_eq!(window["retained_rows"], 8, "the model's filter is counted");
    // The inclusive frontier keeps the last offset at or before the start time (4).
    assert_eq!(window["replayable_rows"], 5);
    assert_eq!(window["discarded_by_start_time"], 3);
    assert_eq!(window["lost_rows"], 0);
    assert_eq!(plan["shrink"]["needs_allow_shrink"], false);
    assert_eq!(plan["shrink"]["discarded_by_start_time"], 3);
    let mut text_args = vec!["plan"];
    text_args.extend(args);
    let text = stb(dir.path(), &text_args);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("clean: 8 rows now, 5 replayable (3 before --start-time discarded)"),
        "{stdout}"
    );

    let mut build_args = vec!["build", "--auto-approve", "--json"];
    build_args.extend(args);
    let built = succeeded(&stb(dir.path(), &build_args));
    assert_eq!(built["replay_windows"][0]["discarded_by_start_time"], 3);
    assert_eq!(built["shrink"]["accepted"], false);
    assert_eq!(count(&format!("SELECT count() FROM {clean}")), 5);
}
