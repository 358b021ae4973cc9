//! Joins on side tables the same build rebuilds (fan-ins), on the local stack. Each order
//! sends three events to a Kafka topic, `created`, `paid` and `shipped`, in that order and
//! in separate inserts. `alpha` parses the landing; `beta` reads alpha; `gamma` keeps the
//! created events of beta; `delta` joins alpha's paid events with gamma; `epsilon` reads
//! delta; `zeta` joins alpha's shipped events with delta (a join on a join). Every selection
//! must leave every table with each row exactly once, also while a producer keeps sending.
//! Rows are compared as sorted multisets of (order id, kind).
//!
//! The events of one order are landed in separate inserts on purpose: ClickHouse runs the
//! views of one insert without seeing each other's writes through a chain, so a live event
//! can only join side rows that earlier inserts wrote. That is the streaming semantics the
//! pipeline has outside any build; a rebuild must reproduce it, not the other way round.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{TestDatabase, execute, stack, stb_on_project, unique_name};

const TABLES: [&str; 6] = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
const KINDS: [&str; 3] = ["created", "paid", "shipped"];

fn project(database: &str, topic: &str) -> tempfile::TempDir {
    let keyed = "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\n";
    let lineage =
        "_replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset";
    let joined = "a._replay_partition::Int32 AS _replay_partition, a._replay_offset::Int64 AS _replay_offset, a.order_id::UInt64 AS order_id, a.kind::String AS kind";
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/orders.yml".to_owned(),
            // One message per insert, so an order's events land in separate inserts.
            format!(
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: {topic}\n    replay_boundary: {{mode: offsets}}\n    settings:\n      kafka_poll_timeout_ms: \"100\"\n      kafka_max_block_size: \"1\"\n      kafka_flush_interval_ms: \"100\"\n",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/alpha.sql".to_owned(),
            format!(
                "{keyed}SELECT {lineage}, JSONExtractUInt(kafka_value, 'id')::UInt64 AS order_id, JSONExtractString(kafka_value, 'kind')::String AS kind\nFROM __source(\"orders\")\n"
            ),
        ),
        (
            "pipelines/pl__shop/beta.sql".to_owned(),
            format!(
                "{keyed}SELECT {lineage}, order_id::UInt64 AS order_id, kind::String AS kind\nFROM __ref(\"alpha\")\n"
            ),
        ),
        (
            "pipelines/pl__shop/gamma.sql".to_owned(),
            format!(
                "{keyed}SELECT {lineage}, order_id::UInt64 AS order_id, kind::String AS kind, (order_id * 10)::UInt64 AS score\nFROM __ref(\"beta\")\nWHERE kind = 'created'\n"
            ),
        ),
        (
            "pipelines/pl__shop/delta.sql".to_owned(),
            format!(
                "{keyed}SELECT {joined}, g.score::UInt64 AS score\nFROM __ref(\"alpha\") AS a\nINNER JOIN __ref(\"gamma\", ref_type='reference') AS g ON a.order_id = g.order_id\nWHERE a.kind = 'paid'\n"
            ),
        ),
        (
            "pipelines/pl__shop/epsilon.sql".to_owned(),
            format!(
                "{keyed}SELECT {lineage}, order_id::UInt64 AS order_id, kind::String AS kind, (score + 1)::UInt64 AS score\nFROM __ref(\"delta\")\n"
            ),
        ),
        (
            "pipelines/pl__shop/zeta.sql".to_owned(),
            format!(
                "{keyed}SELECT {joined}, d.score::UInt64 AS score\nFROM __ref(\"alpha\") AS a\nINNER JOIN __ref(\"delta\", ref_type='reference') AS d ON a.order_id = d.order_id\nWHERE a.kind = 'shipped'\n"
            ),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn stb(dir: &Path, args: &[&str]) -> std::process::Output {
    stb_on_project(dir, args, "")
}

fn build(dir: &Path, select: &[&str]) -> Value {
    let mut args = vec!["build", "--auto-approve", "--json"];
    for model in select {
        args.extend(["--select", model]);
    }
    let output = stb(dir, &args);
    assert!(
        output.status.success(),
        "build {select:?} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// Sends event `kind` of each order in `orders`.
fn send(topic: &str, orders: std::ops::Range<u64>, kind: &str) {
    let records: Vec<Record> = orders
        .map(|id| Record {
            partition: i32::try_from(id % 3).expect("partition"),
            key: id.to_string(),
            value: format!("{{\"id\": {id}, \"kind\": \"{kind}\"}}"),
            headers: Vec::new(),
            timestamp_ms: run_base_ms() + i64::try_from(id).expect("id"),
        })
        .collect();
    produce(&stack().kafka_brokers, topic, &records);
}

/// Waits until every table holds at least its rows of orders `0..n`, for as long as rows
/// keep arriving (see [`wait_while_arriving`]).
fn wait_while_rows_arrive(database: &str, n: u64) -> bool {
    let wanted: Vec<usize> = TABLES.iter().map(|t| expected(t, n).len()).collect();
    wait_while_arriving(
        &|| TABLES.iter().map(|t| rows(database, t).len()).collect(),
        &wanted,
    )
}

/// Waits until each count `counts` reads reaches the one `wanted` at its place, for as
/// long as the counts keep growing: a loaded machine delivers rows late, not never. Gives
/// up (false) only when none grew for 90 s, so a stalled landing still fails the test.
fn wait_while_arriving(counts: &dyn Fn() -> Vec<usize>, wanted: &[usize]) -> bool {
    let stall = Duration::from_secs(90);
    let mut seen = 0;
    let mut progressed = std::time::Instant::now();
    loop {
        let now = counts();
        if now.iter().zip(wanted).all(|(count, want)| count >= want) {
            return true;
        }
        let total: usize = now.iter().sum();
        if total > seen {
            seen = total;
            progressed = std::time::Instant::now();
        } else if progressed.elapsed() > stall {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A table's rows as sorted `order_id kind` lines.
fn rows(database: &str, table: &str) -> Vec<String> {
    execute(&format!(
        "SELECT order_id, kind FROM {database}.tbl__{table} ORDER BY order_id, kind FORMAT TSV"
    ))
    .lines()
    .map(str::to_owned)
    .collect()
}

/// What each table holds when orders `0..n` have all three events.
fn expected(table: &str, n: u64) -> Vec<String> {
    let kinds: &[&str] = match table {
        "alpha" | "beta" => &KINDS,
        "gamma" => &["created"],
        "delta" | "epsilon" => &["paid"],
        _ => &["shipped"],
    };
    // By order id, then kind (the kinds are in alphabetical order), as the query sorts.
    (0..n)
        .flat_map(|id| kinds.iter().map(move |kind| format!("{id}\t{kind}")))
        .collect()
}

/// Every table holds exactly its rows of orders `0..n`, once each.
fn assert_every_table_exactly(database: &str, n: u64, context: &str) {
    let arrived = wait_while_rows_arrive(database, n);
    // Give any duplicate a moment to show up before comparing.
    std::thread::sleep(Duration::from_millis(500));
    for table in TABLES {
        assert_eq!(
            rows(database, table),
            expected(table, n),
            "{context}: tbl__{table} (all arrived: {arrived})"
        );
    }
}

/// Lands every event of orders `range` kind by kind, each kind once the previous landed.
fn land_orders(database: &str, topic: &str, range: std::ops::Range<u64>) {
    for (index, kind) in KINDS.iter().enumerate() {
        send(topic, range.clone(), kind);
        let want = usize::try_from(range.end * (index as u64 + 1)).expect("a count");
        assert!(
            wait_while_arriving(&|| vec![rows(database, "alpha").len()], &[want]),
            "{kind} events landed"
        );
    }
}

#[test]
fn every_selection_leaves_each_order_once_in_every_table_of_a_join_on_rebuilt_side_tables() {
    let db = TestDatabase::create("fan_in");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    let dir = project(&db.name, &topic);

    let plan = stb(dir.path(), &["plan", "--json"]);
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    let roots: Vec<(String, u64, String)> = plan["replay_roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| {
            (
                r["model"].as_str().unwrap_or("").to_owned(),
                r["stage"].as_u64().unwrap_or(99),
                r["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        roots,
        [
            ("alpha".into(), 0, "driving_input_not_rebuilt".into()),
            ("delta".into(), 1, "side_input_rebuilt".into()),
            ("zeta".into(), 2, "side_input_rebuilt".into()),
        ],
        "{plan}"
    );
    assert_eq!(
        plan["replay_roots"][1]["waits_for"],
        serde_json::json!(["gamma"])
    );
    assert_eq!(plan["replay_roots"][1]["model_key"]["name"], "delta");
    let delta_entry = plan["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["model"] == "delta"))
        .expect("delta");
    assert_eq!(delta_entry["is_replay_root"], true);
    let text = stb(dir.path(), &["plan"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("[replay root] delta  (stage 1: joins gamma, rebuilt in this build; its view is created and it replays once that is complete)"),
        "{text}"
    );

    // The first build creates the landing; orders then flow live.
    build(dir.path(), &[]);
    land_orders(&db.name, &topic, 0..6);
    assert_every_table_exactly(&db.name, 6, "live after the first build");

    for selection in [
        &[][..],
        &["alpha"],
        &["gamma"],
        &["delta"],
        &["gamma", "delta"],
    ] {
        build(dir.path(), selection);
        assert_every_table_exactly(&db.name, 6, &format!("after --select {selection:?}"));
    }
    let workflow = std::fs::read_to_string(dir.path().join("target/run/build/workflow.sql"))
        .expect("workflow");
    let at = |step: &str| {
        workflow
            .find(&format!("-- step: {step}\n"))
            .unwrap_or_else(|| panic!("{step} in\n{workflow}"))
    };
    // --select gamma delta: gamma replays from beta, then delta's view goes live and delta
    // replays from alpha (fed live: bounded on its lineage), then zeta joins delta.
    assert!(at("replay_gamma") < at("realize_mv__delta"));
    assert!(at("realize_mv__delta") < at("capture_replay_delta"));
    assert!(at("capture_replay_delta") < at("replay_delta"));
    assert!(at("replay_delta") < at("realize_mv__zeta"));
    assert!(at("realize_mv__zeta") < at("replay_zeta"));

    // Orders sent after the rebuilds still flow live through every view.
    land_orders(&db.name, &topic, 6..9);
    assert_every_table_exactly(&db.name, 9, "live after the rebuilds");
}

#[test]
fn rebuilds_under_a_live_producer_leave_each_order_once_in_every_table() {
    let db = TestDatabase::create("fan_in_live");
    let topic = unique_name("orders");
    create_topic(&stack().kafka_brokers, &topic, 3);
    let dir = project(&db.name, &topic);
    build(dir.path(), &[]);
    land_orders(&db.name, &topic, 0..20);
    assert_every_table_exactly(&db.name, 20, "before the producer");

    // An order's three events go to one partition, in order, while the builds run.
    let sent = Arc::new(AtomicU64::new(20));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (sent, stop, topic) = (Arc::clone(&sent), Arc::clone(&stop), topic.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let order = sent.load(Ordering::SeqCst);
                for kind in KINDS {
                    send(&topic, order..order + 1, kind);
                }
                sent.store(order + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    for selection in [&[][..], &["gamma"], &["alpha"], &["gamma", "delta"]] {
        build(dir.path(), selection);
    }
    stop.store(true, Ordering::SeqCst);
    producer.join().expect("producer");
    let total = sent.load(Ordering::SeqCst);
    assert!(
        total > 40,
        "the producer ran during the rebuilds ({total} orders)"
    );
    assert_every_table_exactly(&db.name, total, "after rebuilds under a producer");
}
