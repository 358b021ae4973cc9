//! `stb build` with a managed Kafka source: the build creates the landing, pauses it while
//! it rebuilds and replays the frozen landing table, and resumes it on success and on
//! failure. Rows are compared as multisets of (partition, offset).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{TestDatabase, execute, stack, unique_name, wait_for};

fn project(database: &str, topic: &str, extra_column: &str) -> tempfile::TempDir {
    project_with(
        database,
        topic,
        extra_column,
        "    settings:\n      kafka_poll_timeout_ms: \"200\"\n",
    )
}

/// `source_tail` ends the source's YAML entry (settings, consumer group).
fn project_with(
    database: &str,
    topic: &str,
    extra_column: &str,
    source_tail: &str,
) -> tempfile::TempDir {
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
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: {topic}\n    replay_boundary: {{mode: offsets}}\n{source_tail}",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/order_lines.sql".to_owned(),
            format!(
                "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'id')::UInt64 AS id{extra_column}\nFROM __source(\"orders\")\n"
            ),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn stb(dir: &Path, args: &[&str]) -> std::process::Output {
    stb_test_support::stb_on_project(dir, args, "")
}

/// Runs a build that must succeed; its JSON result.
fn build(dir: &Path) -> Value {
    let output = stb(dir, &["build", "--auto-approve", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

pub(crate) fn send(topic: &str, ids: std::ops::Range<u64>) {
    let records: Vec<Record> = ids
        .map(|id| Record {
            partition: i32::try_from(id % 3).expect("partition"),
            key: id.to_string(),
            value: format!("{{\"id\": {id}}}"),
            headers: Vec::new(),
            timestamp_ms: run_base_ms() + i64::try_from(id).expect("id"),
        })
        .collect();
    produce(&stack().kafka_brokers, topic, &records);
}

fn ids(relation: &str) -> Vec<u64> {
    execute(&format!("SELECT id FROM {relation} ORDER BY id FORMAT TSV"))
        .lines()
        .map(|l| l.parse().expect("id"))
        .collect()
}

/// Waits until the target holds exactly `0..n`, once each.
fn assert_exactly(database: &str, n: u64) {
    assert_exactly_in(&format!("{database}.tbl__order_lines"), n);
}

/// Waits until `relation` holds exactly the ids `0..n`, once each.
pub(crate) fn assert_exactly_in(relation: &str, n: u64) {
    let expected: Vec<u64> = (0..n).collect();
    let reached = wait_for(Duration::from_secs(90), || {
        ids(relation).len() >= expected.len()
    });
    assert!(
        reached,
        "{relation}: only {} of {n} rows arrived",
        ids(relation).len()
    );
    // Give any duplicate a moment to show up before comparing.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ids(relation), expected, "{relation}");
}

fn landing_view_exists(database: &str) -> bool {
    execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{database}' AND name = 'mv__orders' FORMAT TSV"
    ))
    .trim()
        == "1"
}

#[test]
fn a_managed_landing_is_created_paused_replayed_and_resumed() {
    let db = TestDatabase::create("build_kafka");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..30);
    let dir = project(&db.name, &topic, "");
    let result = build(dir.path());
    assert_eq!(result["status"], "succeeded");
    assert!(landing_view_exists(&db.name), "landing resumed");
    assert_exactly(&db.name, 30);
    // Messages produced after the build flow through the resumed landing.
    send(&topic, 30..45);
    assert_exactly(&db.name, 45);
    // A rebuild replays the frozen landing table and resumes it: still exactly once.
    build(dir.path());
    let steps = std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
        .expect("workflow");
    assert!(
        steps.contains("-- step: pause_source_mv__orders"),
        "{steps}"
    );
    assert!(
        steps.contains("-- step: activate_source_mv__orders"),
        "{steps}"
    );
    assert!(
        !steps.contains("prepare_source_kafka__orders"),
        "the landing exists already"
    );
    send(&topic, 45..60);
    assert_exactly(&db.name, 60);
}

#[test]
fn a_failed_build_resumes_the_landing_it_paused() {
    let (db, topic, dir) = built_landing("build_kafka_fail", 9);
    // A model whose replay fails on its rows, after the landing paused (a model the
    // warehouse refuses outright is stopped by the plan's checks, before any pause).
    let broken = project(
        &db.name,
        &topic,
        ", throwIf(_replay_offset >= 0, 'a failing row')::UInt8 AS broken",
    );
    let output = stb(broken.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let execution: Value = serde_json::from_str(
        &std::fs::read_to_string(broken.path().join("target/run/build/execution.json"))
            .expect("artifact"),
    )
    .expect("JSON");
    assert_eq!(execution["status"], "failed");
    assert_eq!(
        execution["failed_step"], "replay_order_lines",
        "{execution}"
    );
    let completed = execution["completed_steps"].to_string();
    assert!(completed.contains("recover_source_orders"), "{execution}");
    // The previous table and its view are back, with their rows.
    assert_exactly(&db.name, 9);
    assert!(
        landing_view_exists(&db.name),
        "ingestion is not left stopped"
    );
    // Landing goes on; the fixed project's rebuild replays it all once.
    send(&topic, 9..18);
    build(dir.path());
    assert_exactly(&db.name, 18);
}

#[test]
fn a_fresh_landing_starts_from_the_earliest_message_despite_committed_offsets() {
    let db = TestDatabase::create("build_kafka_fresh");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..12);
    let dir = project(&db.name, &topic, "");
    build(dir.path());
    // The landing consumed everything and its consumer group committed the offsets.
    assert_exactly(&db.name, 12);
    // The target loses its landing (the database is recreated); more messages arrive.
    execute(&format!("DROP DATABASE {} SYNC", db.name));
    execute(&format!("CREATE DATABASE {}", db.name));
    send(&topic, 12..18);
    let result = build(dir.path());
    assert_eq!(result["warnings"], serde_json::json!([]), "{result}");
    let steps = std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
        .expect("workflow");
    assert!(
        steps.contains("-- step: reset_consumer_group__orders"),
        "{steps}"
    );
    // The new landing read the topic from its first message, not from the old commits.
    assert_exactly(&db.name, 18);
}

/// A producer sending `{"id": n}` for n = first, first + 1, ... to partitions n % 3, in
/// batches of 50 (a few hundred messages per second), until stopped.
pub(crate) struct Producing {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, Duration)>,
}

impl Producing {
    pub(crate) fn start(topic: &str, first: u64) -> Self {
        use rdkafka::producer::{BaseRecord, Producer};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let running = std::sync::Arc::clone(&stop);
        let topic = topic.to_owned();
        let thread = std::thread::spawn(move || {
            let producer: rdkafka::producer::ThreadedProducer<_> = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &stack().kafka_brokers)
                .set("linger.ms", "5")
                .set("enable.idempotence", "false")
                .create_with_context(stb_test_support::kafka::DeliveryLog::default())
                .expect("a producer");
            let started = std::time::Instant::now();
            let mut next = first;
            while !running.load(std::sync::atomic::Ordering::SeqCst) {
                let key = next.to_string();
                let value = format!("{{\"id\": {next}}}");
                let partition = i32::try_from(next % 3).expect("partition");
                producer
                    .send(
                        BaseRecord::to(&topic)
                            .partition(partition)
                            .key(&key)
                            .payload(&value),
                    )
                    .unwrap_or_else(|(error, _)| panic!("queueing {next}: {error}"));
                next += 1;
                if next.is_multiple_of(50) {
                    producer.flush(Duration::from_secs(30)).expect("delivered");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            producer.flush(Duration::from_secs(30)).expect("delivered");
            let failures = producer
                .context()
                .failures
                .lock()
                .map(|f| f.len())
                .unwrap_or(1);
            assert_eq!(failures, 0, "every message is delivered");
            (next, started.elapsed())
        });
        Self { stop, thread }
    }

    /// Stops it: the id after the last one sent, and for how long it ran.
    pub(crate) fn stop(self) -> (u64, Duration) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().expect("producer")
    }
}

#[test]
fn rebuilds_while_a_producer_sends_deliver_every_message_exactly_once() {
    let db = TestDatabase::create("build_kafka_live");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..30);
    let dir = project(&db.name, &topic, "");
    build(dir.path());
    let producer = Producing::start(&topic, 30);
    for _ in 0..10 {
        build(dir.path());
    }
    let (sent, elapsed) = producer.stop();
    eprintln!(
        "10 rebuilds while producing: {sent} messages in {:.1} s ({:.0} per second)",
        elapsed.as_secs_f64(),
        (sent - 30) as f64 / elapsed.as_secs_f64()
    );
    // Every message reaches the model once: the ids are unique, so the multiset of ids
    // is the multiset of (partition, offset).
    assert_exactly(&db.name, sent);
}

/// A database, a 3-partition topic with `messages` messages, and the project built over
/// it: every message landed and reached the model.
fn built_landing(prefix: &str, messages: u64) -> (TestDatabase, String, tempfile::TempDir) {
    let db = TestDatabase::create(prefix);
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..messages);
    let dir = project(&db.name, &topic, "");
    build(dir.path());
    assert_exactly(&db.name, messages);
    (db, topic, dir)
}

fn table_uuid(database: &str, table: &str) -> String {
    execute(&format!(
        "SELECT uuid FROM system.tables WHERE database = '{database}' AND name = '{table}' FORMAT TSV"
    ))
}

#[test]
fn settings_drift_recreates_the_kafka_table_and_other_drift_stops_before_teardown() {
    let (db, topic, _dir) = built_landing("build_kafka_drift", 9);
    let landed = || {
        execute(&format!(
            "SELECT count() FROM {}.raw__orders FORMAT TSV",
            db.name
        ))
        .trim()
        .to_owned()
    };
    let before = landed();

    // Another poll timeout: only the Kafka table is recreated; the landing keeps its rows.
    let tuned = project_with(
        &db.name,
        &topic,
        "",
        "    settings:\n      kafka_poll_timeout_ms: \"300\"\n",
    );
    let plan = stb(tuned.path(), &["plan", "--json"]);
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    // What the replay reads, from the landing's offsets: the nine messages, by partition.
    let cost = &plan["replay_costs"][0];
    assert_eq!(cost["model"], "order_lines", "{plan}");
    assert_eq!(cost["rows"], 9, "{plan}");
    let partitions = cost["partitions"].as_array().expect("partitions");
    assert_eq!(
        partitions
            .iter()
            .map(|p| p["messages"].as_u64().expect("messages"))
            .sum::<u64>(),
        9,
        "{plan}"
    );
    for partition in partitions {
        let (first, last, messages) = (
            partition["first_offset"]
                .as_str()
                .expect("first")
                .parse::<u64>()
                .expect("offset"),
            partition["last_offset"]
                .as_str()
                .expect("last")
                .parse::<u64>()
                .expect("offset"),
            partition["messages"].as_u64().expect("messages"),
        );
        assert_eq!(
            last - first + 1,
            messages,
            "contiguous offsets: {partition}"
        );
    }
    assert_eq!(
        plan["source_recreations"],
        serde_json::json!([{"source": "orders", "changes": ["kafka_poll_timeout_ms differs"]}])
    );
    // --changed finds no changed model, but rebuilds the pipeline that repairs the source.
    let changed = stb(tuned.path(), &["plan", "--changed", "--json"]);
    let changed: Value = serde_json::from_slice(&changed.stdout).expect("JSON");
    assert_eq!(changed["entries"][0]["model"], "order_lines", "{changed}");
    assert_eq!(changed["entries"][0]["reason"], "source_drift", "{changed}");
    assert_eq!(changed["selection_mode"], "changed");
    let raw_uuid = table_uuid(&db.name, "raw__orders");
    build(tuned.path());
    let steps = std::fs::read_to_string(tuned.path().join("target/run/build/workflow.sql"))
        .expect("workflow");
    assert!(
        steps.contains("-- step: recreate_source_kafka__orders"),
        "{steps}"
    );
    let kafka = execute(&format!("SHOW CREATE TABLE {}.kafka__orders", db.name));
    assert!(kafka.contains("300"), "{kafka}");
    assert_eq!(
        table_uuid(&db.name, "raw__orders"),
        raw_uuid,
        "the landing table is kept"
    );
    assert!(landed().parse::<u64>().expect("n") >= before.parse::<u64>().expect("n"));
    send(&topic, 9..15);
    assert_exactly(&db.name, 15);

    // A new consumer group, or a landing table that changed, stop the build before it
    // drops anything.
    let model_uuid = table_uuid(&db.name, "tbl__order_lines");
    let regrouped = project_with(
        &db.name,
        &topic,
        "",
        "    consumer_group: another_group\n    settings:\n      kafka_poll_timeout_ms: \"300\"\n",
    );
    let output = stb(regrouped.path(), &["build", "--auto-approve", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SOURCE-002", "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("consumes as group")),
        "{json}"
    );
    // Drifted settings of a source the build reads only through a model it does not
    // rebuild: the error names the pipeline to add.
    let upstream_drift = project_with(
        &db.name,
        &topic,
        "",
        "    settings:\n      kafka_poll_timeout_ms: \"400\"\n",
    );
    std::fs::create_dir_all(upstream_drift.path().join("pipelines/pl__report")).expect("mkdir");
    std::fs::write(
        upstream_drift
            .path()
            .join("pipelines/pl__report/line_count.sql"),
        "MODEL (kind view);\nSELECT count()::UInt64 AS n FROM __ref(\"order_lines\")\n",
    )
    .expect("write");
    let output = stb(
        upstream_drift.path(),
        &[
            "build",
            "--auto-approve",
            "--json",
            "--select",
            "pipeline:pl__report",
        ],
    );
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SOURCE-002", "{json}");
    assert!(
        json["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--select pipeline:pl__shop")),
        "{json}"
    );
    // A landing view that writes elsewhere.
    let view_sql = execute(&format!(
        "SHOW CREATE TABLE {}.mv__orders FORMAT TSVRaw",
        db.name
    ));
    execute(&format!(
        "CREATE TABLE {}.elsewhere AS {}.raw__orders",
        db.name, db.name
    ));
    execute(&format!("DROP TABLE {}.mv__orders SYNC", db.name));
    execute(&view_sql.replace(".raw__orders", ".elsewhere"));
    let output = stb(tuned.path(), &["build", "--auto-approve", "--json"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SOURCE-002", "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not write to raw__orders")),
        "{json}"
    );
    execute(&format!("DROP TABLE {}.mv__orders SYNC", db.name));
    execute(&view_sql);
    // A landing table whose columns changed.
    execute(&format!(
        "ALTER TABLE {}.raw__orders ADD COLUMN extra UInt8",
        db.name
    ));
    let output = stb(tuned.path(), &["build", "--auto-approve", "--json"]);
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["error"]["code"], "STB-SOURCE-002", "{json}");
    assert_eq!(
        table_uuid(&db.name, "tbl__order_lines"),
        model_uuid,
        "nothing was rebuilt"
    );
    assert!(
        landing_view_exists(&db.name),
        "the landing was never paused"
    );
}

#[test]
fn a_landing_missing_its_kafka_table_or_view_is_completed_and_keeps_its_rows() {
    let (db, topic, dir) = built_landing("build_kafka_missing", 9);
    let raw_uuid = table_uuid(&db.name, "raw__orders");
    let landed = || {
        execute(&format!(
            "SELECT count() FROM {}.raw__orders FORMAT TSV",
            db.name
        ))
        .trim()
        .to_owned()
    };
    for (dropped, missing) in [
        ("kafka__orders", "kafka_table"),
        ("mv__orders", "landing_view"),
    ] {
        execute(&format!("DROP TABLE {}.{dropped} SYNC", db.name));
        let plan = stb(dir.path(), &["plan", "--json"]);
        let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
        assert_eq!(
            plan["landing_repairs"],
            serde_json::json!([{"source": "orders", "missing": [missing]}]),
            "{plan}"
        );
        let text = stb(dir.path(), &["plan"]);
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains(&format!("orders: {missing} missing, recreated from the declaration (landing table and its rows kept")),
            "{text}"
        );
        let result = build(dir.path());
        assert_eq!(result["status"], "succeeded", "{result}");
        assert_eq!(
            table_uuid(&db.name, "raw__orders"),
            raw_uuid,
            "landing table kept"
        );
        assert_eq!(landed(), "9", "landing rows kept, none landed twice");
        assert!(landing_view_exists(&db.name), "ingestion runs again");
        assert_exactly(&db.name, 9);
    }
    // Both at once, then new messages: they land once and reach the model.
    execute(&format!("DROP TABLE {}.mv__orders SYNC", db.name));
    execute(&format!("DROP TABLE {}.kafka__orders SYNC", db.name));
    let workflow = {
        build(dir.path());
        std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql")).expect("workflow")
    };
    assert!(
        workflow.contains("-- step: restore_source_kafka__orders"),
        "{workflow}"
    );
    send(&topic, 9..15);
    assert_exactly(&db.name, 15);
    assert_eq!(landed(), "15");
}

#[test]
fn database_flag_places_the_landing_and_models_in_that_database() {
    let db = TestDatabase::create("build_kafka_flag");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    send(&topic, 0..12);
    // The project names another database; `--database` wins for every relation.
    let dir = project("a_database_nobody_creates", &topic, "");
    let output = stb(
        dir.path(),
        &["build", "--auto-approve", "--json", "--database", &db.name],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_exactly(&db.name, 12);
    assert!(landing_view_exists(&db.name));
    let elsewhere = execute(
        "SELECT count() FROM system.databases WHERE name = 'a_database_nobody_creates' FORMAT TSV",
    );
    assert_eq!(elsewhere.trim(), "0");
}
