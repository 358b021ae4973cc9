//! The conformance lane (issue 24): every project the reference (Python StreamBuild
//! 0.41.10) ships in its source distribution runs here, in direct and in virtual mode on
//! the local stack: `stb discover`, `compile`, `plan`, `build` (then `deployment promote`
//! in virtual mode), and `stb test` / `stb audit` where the project has tests or audits.
//!
//! The distribution is fetched once into the user's cache (`stb_test_support::reference`)
//! and never changed: each test copies its project to a temporary directory and adapts
//! the infrastructure there, nothing else (no model, test or audit SQL is touched):
//! the target database becomes a fresh test database, Kafka brokers the test stack's
//! broker, each topic gets a suffix of its own (tests run in parallel), the pipeline mode
//! is the one under test. A `[connection]` table stays: the environment overrides it.
//!
//! Every source is fed before the first build and again after it (the live flow). The lane
//! then waits until each model holds exactly the multiset of keys derived from what was
//! fed: every message or row once, none lost, none twice.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{TestDatabase, execute, reference, stack, unique_name, wait_for};

/// Every project of the distribution, each run by the two tests named after it; [`spec_for`]
/// says how each is fed and checked.
const COVERED: [&str; 7] = [
    "basic_project",
    "e2e_kafka_landed_at_project",
    "e2e_kafka_offset_project",
    "e2e_kafka_timestamp_project",
    "lineage_browser_project",
    "orders_demo",
    "selector_project",
];

/// Units (orders, payments, rows) fed before the first build, and after it.
const BEFORE_BUILD: Range<u64> = 0..12;
const AFTER_BUILD: Range<u64> = 12..20;
/// How long fed rows may take to reach every model (a Kafka landing joins its consumer
/// group first, which takes seconds on a loaded machine).
const ARRIVAL_LIMIT: Duration = Duration::from_secs(120);
/// The pause before the final comparison, so a row written twice has time to show.
const SETTLE: Duration = Duration::from_secs(1);

#[test]
fn the_lane_covers_every_project_of_the_reference_distribution() {
    let shipped: BTreeSet<String> = reference::projects()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let covered: BTreeSet<String> = COVERED.iter().map(|name| (*name).to_owned()).collect();
    assert_eq!(
        shipped, covered,
        "the distribution's projects against the lane's: give a new one a spec_for() arm and a direct and a virtual test"
    );
}

#[test]
fn event_times_use_the_reference_producers_format() {
    assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso_utc(951_825_600_000), "2000-02-29T12:00:00.000Z");
    assert_eq!(iso_utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
}

#[test]
fn basic_project_direct() {
    lane("basic_project", Mode::Direct);
}

#[test]
fn basic_project_virtual() {
    lane("basic_project", Mode::Virtual);
}

#[test]
fn e2e_kafka_landed_at_project_direct() {
    lane("e2e_kafka_landed_at_project", Mode::Direct);
}

#[test]
fn e2e_kafka_landed_at_project_virtual() {
    lane("e2e_kafka_landed_at_project", Mode::Virtual);
}

#[test]
fn e2e_kafka_offset_project_direct() {
    lane("e2e_kafka_offset_project", Mode::Direct);
}

#[test]
fn e2e_kafka_offset_project_virtual() {
    lane("e2e_kafka_offset_project", Mode::Virtual);
}

#[test]
fn e2e_kafka_timestamp_project_direct() {
    lane("e2e_kafka_timestamp_project", Mode::Direct);
}

#[test]
fn e2e_kafka_timestamp_project_virtual() {
    lane("e2e_kafka_timestamp_project", Mode::Virtual);
}

#[test]
fn lineage_browser_project_direct() {
    lane("lineage_browser_project", Mode::Direct);
}

#[test]
fn lineage_browser_project_virtual() {
    lane("lineage_browser_project", Mode::Virtual);
}

#[test]
fn orders_demo_direct() {
    lane("orders_demo", Mode::Direct);
}

#[test]
fn orders_demo_virtual() {
    lane("orders_demo", Mode::Virtual);
}

#[test]
fn selector_project_direct() {
    lane("selector_project", Mode::Direct);
}

#[test]
fn selector_project_virtual() {
    lane("selector_project", Mode::Virtual);
}

// ---------------------------------------------------------------------------------------
// The run

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Direct,
    Virtual,
}

impl Mode {
    /// The value of `[defaults] pipeline_mode`.
    fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Virtual => "virtual",
        }
    }

    /// What `stb plan --json` and `stb build --json` call it.
    fn reported(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Virtual => "virtual environments",
        }
    }
}

/// One project in one mode, from discovery to its own tests and audits.
fn lane(project: &str, mode: Mode) {
    let spec = spec_for(project);
    let db = TestDatabase::create("conformance");
    let suffix = unique_name("lane");
    let copy = copy_project(&reference_project(project));
    let dir = copy.path();
    adapt(dir, &db.name, mode, &suffix);

    let discovered = stb_json(dir, &["discover", "--json"]);
    assert_adapted(&discovered, &db.name, mode);
    let feeders = feeders_for(&discovered, &spec.sources, &db.name, &suffix);
    let mut fed = Vec::new();
    for feeder in &feeders {
        feeder.prepare();
        fed.extend(feeder.feed(BEFORE_BUILD, run_base_ms()));
    }

    stb_json(dir, &["compile", "--json"]);
    let manifest = read_json(&dir.join("target/manifest.json"));
    assert_every_model_is_checked(&manifest, &spec);

    let plan = stb_json(dir, &["plan", "--json"]);
    assert_eq!(plan["mode"], mode.reported(), "{plan}");
    let built = stb_json(dir, &["build", "--auto-approve", "--json"]);
    assert_eq!(built["status"], "succeeded", "{built}");
    assert_eq!(built["mode"], mode.reported(), "{built}");
    if mode == Mode::Virtual {
        // The stable relations serve the deployment only once it is promoted.
        let id = built["deployment_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a virtual build names its deployment: {built}"));
        let promoted = stb_json(dir, &["deployment", "promote", id, "--json"]);
        assert_eq!(promoted["deployment_id"], id, "{promoted}");
    }

    // The live flow: what arrives after the build reaches the models through their views.
    // Its event times lie in the last minute, so none is in the future for an audit.
    let recent = now_ms() - 60_000;
    for feeder in &feeders {
        fed.extend(feeder.feed(AFTER_BUILD, recent));
    }
    assert_rows(&db.name, &manifest, &spec.checks, &fed);

    project_tests_pass(dir, &manifest);
    project_audits_pass(dir, &manifest);
}

/// Runs `stb` on the copy with `args` (each command given `--json`) and returns its JSON;
/// a failure shows both streams.
fn stb_json(dir: &Path, args: &[&str]) -> Value {
    // The environment beats a project's `[connection]` key by key, as the reference's
    // does: orders_demo's own (its Compose ClickHouse at localhost:18123, user
    // `clickhouse`) stays in the file and the test stack is reached all the same.
    let output = assert_cmd::Command::cargo_bin("stb")
        .expect("the stb binary")
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env("STREAMBUILD_CLICKHOUSE_USERNAME", "default")
        .env("STREAMBUILD_CLICKHOUSE_PASSWORD", "")
        .env_remove("STREAMBUILD_LIVE_STABILIZATION_SECONDS")
        .output()
        .expect("stb runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stb {} failed ({}) on {}\nstdout: {stdout}\nstderr: {}",
        args.join(" "),
        output.status,
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("stb {}: not JSON ({error}): {stdout}", args.join(" ")))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds since 1970 fit in i64")
}

// ---------------------------------------------------------------------------------------
// What each project is fed and what its models must hold

/// Builds the Kafka messages for units `units`, event times counted from `base_ms`.
type Messages = fn(Range<u64>, i64) -> Vec<Message>;

/// One Kafka message, and the id the models keep from it.
struct Message {
    id: String,
    partition: i32,
    key: String,
    value: Value,
    timestamp_ms: i64,
}

/// How the lane feeds a source.
#[derive(Clone, Copy)]
enum Feed {
    /// A Kafka source: messages produced to its topic.
    Kafka(Messages),
    /// An adopted table: the lane creates it with an `order_id` string column (numeric
    /// text, which a model casts to UInt64) and the source's `_replay_timestamp` column.
    OrderRows,
}

/// What a model must hold once both batches arrived, compared over `columns`.
enum Expect {
    /// One row per message or row fed to the source: its id.
    Ids(&'static str),
    /// One row per message fed to the source: its id, partition and offset.
    IdsAtPositions(&'static str),
    /// One row per message fed to the source: the fields named, as its JSON value holds
    /// them (strings and integers the model copies unchanged), in the check's column order.
    Fields(&'static str, &'static [&'static str]),
    /// No row: the model filters everything out.
    Nothing,
}

struct Check {
    model: &'static str,
    columns: &'static str,
    expect: Expect,
}

struct Spec {
    /// Every source of the project and how it is fed.
    sources: Vec<(&'static str, Feed)>,
    checks: Vec<Check>,
    /// Models whose rows only the project's own `stb test` checks: aggregates, whose
    /// values depend on more than which rows arrived.
    left_to_tests: Vec<&'static str>,
}

fn check(model: &'static str, columns: &'static str, expect: Expect) -> Check {
    Check {
        model,
        columns,
        expect,
    }
}

/// The fields of an orders_demo event its parsing models copy unchanged, and the same as
/// their columns.
const COMMERCE_FIELDS: [&str; 12] = [
    "event_id",
    "event_type",
    "schema_version",
    "order_id",
    "customer_id",
    "product",
    "category",
    "quantity",
    "unit_price_cents",
    "currency",
    "status",
    "region_code",
];
const COMMERCE_COLUMNS: &str = "event_id, event_type, schema_version, order_id, customer_id, product, category, quantity, unit_price_cents, currency, status, region_code";

/// How the lane feeds and checks each project (read from the reference's models).
fn spec_for(project: &str) -> Spec {
    let kafka_orders = |source: &'static str, checks: Vec<Check>| Spec {
        sources: vec![(source, Feed::Kafka(order_messages))],
        checks,
        left_to_tests: Vec::new(),
    };
    match project {
        "basic_project" => kafka_orders(
            "orders",
            vec![check(
                "orders_enriched",
                "order_id, customer_id",
                Expect::Fields("orders", &["order_id", "customer_id"]),
            )],
        ),
        "e2e_kafka_landed_at_project" | "e2e_kafka_timestamp_project" => kafka_orders(
            "order_events",
            vec![check("orders", "order_id", Expect::Ids("order_events"))],
        ),
        // The model keeps the message key and the message's partition and offset.
        "e2e_kafka_offset_project" => kafka_orders(
            "order_events",
            vec![check(
                "orders_enriched",
                "order_id, _replay_partition, _replay_offset",
                Expect::IdsAtPositions("order_events"),
            )],
        ),
        "lineage_browser_project" => Spec {
            sources: vec![
                ("idle_events", Feed::OrderRows),
                ("moving_events", Feed::OrderRows),
                ("stalled_events", Feed::OrderRows),
            ],
            checks: vec![
                check("moving_orders", "order_id", Expect::Ids("moving_events")),
                check("idle_orders", "order_id", Expect::Nothing),
                check(
                    "stalled_orders",
                    "order_number",
                    Expect::Ids("stalled_events"),
                ),
            ],
            left_to_tests: Vec::new(),
        },
        "orders_demo" => Spec {
            sources: vec![("commerce_event_stream", Feed::Kafka(commerce_events))],
            checks: vec![
                check(
                    "commerce_events",
                    COMMERCE_COLUMNS,
                    Expect::Fields("commerce_event_stream", &COMMERCE_FIELDS),
                ),
                check(
                    "order_events",
                    COMMERCE_COLUMNS,
                    Expect::Fields("commerce_event_stream", &COMMERCE_FIELDS),
                ),
                check(
                    "order_event_facts",
                    "event_id, order_id, category, currency, region_code",
                    Expect::Fields(
                        "commerce_event_stream",
                        &[
                            "event_id",
                            "order_id",
                            "category",
                            "currency",
                            "region_code",
                        ],
                    ),
                ),
            ],
            left_to_tests: vec!["commerce_kpis"],
        },
        "selector_project" => Spec {
            sources: vec![
                ("orders", Feed::Kafka(order_messages)),
                ("payments", Feed::Kafka(payment_messages)),
            ],
            checks: vec![
                check("orders_clean", "order_id", Expect::Ids("orders")),
                check("orders_enriched", "order_id", Expect::Ids("orders")),
                check("payments_enriched", "payment_id", Expect::Ids("payments")),
            ],
            left_to_tests: Vec::new(),
        },
        other => panic!("the lane has no spec for the reference's project {other}"),
    }
}

/// Every model of the compiled project is checked by the lane or, for an aggregate, by a
/// test of the project's own: a model a new release adds fails the lane until covered.
fn assert_every_model_is_checked(manifest: &Value, spec: &Spec) {
    let models: BTreeSet<&str> = manifest["models"]
        .as_object()
        .unwrap_or_else(|| panic!("manifest.json has no models: {manifest}"))
        .keys()
        .map(String::as_str)
        .collect();
    let covered: BTreeSet<&str> = spec
        .checks
        .iter()
        .map(|check| check.model)
        .chain(spec.left_to_tests.iter().copied())
        .collect();
    assert_eq!(models, covered, "the project's models against the lane's");
    for model in &spec.left_to_tests {
        let tested = manifest["tests"].as_object().is_some_and(|tests| {
            tests.values().any(|test| {
                test["targets"]
                    .as_array()
                    .is_some_and(|t| t.contains(&json!(model)))
            })
        });
        assert!(
            tested,
            "{model} is left to the project's tests, but none checks it"
        );
    }
}

fn at(base_ms: i64, unit: u64) -> i64 {
    base_ms + 1000 * i64::try_from(unit).expect("a small unit number")
}

fn partition(unit: u64) -> i32 {
    i32::try_from(unit % 3).expect("a partition")
}

/// Orders as the fixtures read them: `order_id` (also the message key), `customer_id`,
/// `order_total` (a string: the model parses it with toFloat64OrNull), `created_at` and
/// `updated_at` (relative to the run, so the 30-day TTL never expires them).
fn order_messages(units: Range<u64>, base_ms: i64) -> Vec<Message> {
    units
        .map(|unit| {
            let id = format!("ord_{unit:06}");
            let timestamp_ms = at(base_ms, unit);
            let time = iso_utc(timestamp_ms);
            Message {
                partition: partition(unit),
                key: id.clone(),
                value: json!({
                    "order_id": id,
                    "customer_id": format!("cust_{:04}", unit % 50 + 1),
                    "order_total": format!("{}.{:02}", 10 + unit, unit % 100),
                    "created_at": time,
                    "updated_at": time,
                }),
                id,
                timestamp_ms,
            }
        })
        .collect()
}

fn payment_messages(units: Range<u64>, base_ms: i64) -> Vec<Message> {
    units
        .map(|unit| {
            let id = format!("pay_{unit:06}");
            Message {
                partition: partition(unit),
                key: id.clone(),
                value: json!({ "payment_id": id }),
                id,
                timestamp_ms: at(base_ms, unit),
            }
        })
        .collect()
}

/// Order lifecycles the way orders_demo's producer (`build_order_event`) writes them, one
/// unit per order: every field of its contract, currency USD, statuses and event types
/// its audits accept, positive quantities and prices, every event of an order on one
/// partition (the producer keys by order id).
fn commerce_events(orders: Range<u64>, base_ms: i64) -> Vec<Message> {
    const LIFECYCLES: [&[&str]; 3] = [
        &["created", "cancelled"],
        &["created", "paid", "refunded"],
        &["created", "paid", "shipped", "delivered"],
    ];
    const PRODUCTS: [(&str, &str, u64); 3] = [
        ("Northstar USB-C Dock", "electronics", 12_900),
        ("Harbor Trail Jacket", "apparel", 14_900),
        ("Field Notes Hardcover", "office", 1_800),
    ];
    const REGIONS: [&str; 4] = ["us-east", "us-west", "eu-west", "ap-south"];
    let pick = |order: u64, len: usize| usize::try_from(order).expect("a small order number") % len;
    let mut events = Vec::new();
    for order in orders {
        let order_id = format!("ord_{order:08}");
        let (product, category, unit_price_cents) = PRODUCTS[pick(order, PRODUCTS.len())];
        let statuses = LIFECYCLES[pick(order, LIFECYCLES.len())];
        for (step, status) in (0_i64..).zip(statuses) {
            let id = format!("evt_{order:08}_{step}");
            let timestamp_ms = at(base_ms, order) + 100 * step;
            let event_type = if step == 0 {
                "order_created"
            } else {
                "order_status_changed"
            };
            events.push(Message {
                partition: partition(order),
                key: order_id.clone(),
                value: json!({
                    "event_id": id,
                    "event_type": event_type,
                    "schema_version": 1,
                    "order_id": order_id,
                    "customer_id": format!("cust_{:04}", order % 50 + 1),
                    "product": product,
                    "category": category,
                    "quantity": order % 5 + 1,
                    "unit_price_cents": unit_price_cents,
                    "currency": "USD",
                    "status": status,
                    "region_code": REGIONS[pick(order, REGIONS.len())],
                    "event_at": iso_utc(timestamp_ms),
                }),
                id,
                timestamp_ms,
            });
        }
    }
    events
}

/// `ms` since 1970 as the reference's producer writes times (`utc_text`):
/// `2026-08-23T10:00:00.000Z`.
fn iso_utc(ms: i64) -> String {
    let (year, month, day) = stb_plan::deployment::civil_from_days(ms.div_euclid(86_400_000));
    let in_day = ms.rem_euclid(86_400_000);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

// ---------------------------------------------------------------------------------------
// The copy and its infrastructure

pub(crate) fn reference_project(name: &str) -> PathBuf {
    reference::projects()
        .into_iter()
        .find(|(project, _)| project == name)
        .map(|(_, path)| path)
        .unwrap_or_else(|| panic!("the reference distribution ships no project {name}"))
}

/// The project in a temporary directory: the cached distribution is only read.
pub(crate) fn copy_project(from: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("a temporary directory");
    copy_tree(from, copy.path());
    copy
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.expect("a directory entry");
        let kind = entry.file_type().expect("a file type");
        let target = to.join(entry.file_name());
        // Build output and Python caches are not the project.
        if kind.is_dir() && entry.file_name() != "target" && entry.file_name() != "__pycache__" {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}

/// Points the copy at this test's infrastructure: the project file and every sources file.
fn adapt(dir: &Path, database: &str, mode: Mode, suffix: &str) {
    let brokers = &stack().kafka_brokers;
    let project_file = dir.join("streambuild_project.toml");
    let text = std::fs::read_to_string(&project_file).expect("streambuild_project.toml");
    std::fs::write(
        project_file,
        adapt_project_file(&text, database, mode, brokers),
    )
    .expect("write the project file");
    for file in yaml_files(&dir.join("sources")) {
        let text = std::fs::read_to_string(&file).expect("a sources file");
        std::fs::write(file, adapt_sources_file(&text, brokers, suffix))
            .expect("write a sources file");
    }
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(yaml_files(&path));
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yml" || ext == "yaml")
        {
            found.push(path);
        }
    }
    found
}

/// The project file with this test's database in every target, and the test stack's
/// broker and the mode under test in `[defaults]` (the table is added when missing).
fn adapt_project_file(text: &str, database: &str, mode: Mode, brokers: &str) -> String {
    let mode_line = format!("pipeline_mode = \"{}\"", mode.name());
    let mut out: Vec<String> = Vec::new();
    let mut table = String::new();
    let mut mode_written = false;
    let mut databases = 0;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            if table == "defaults" && !mode_written {
                out.push(mode_line.clone());
                mode_written = true;
            }
            table = trimmed.trim_matches(['[', ']']).trim().to_owned();
        }
        let key = trimmed.split_once('=').map(|(key, _)| key.trim());
        let replaced = match key {
            Some("pipeline_mode") if table == "defaults" => {
                mode_written = true;
                Some(mode_line.clone())
            }
            Some("kafka_broker_list") if table == "defaults" => {
                Some(format!("kafka_broker_list = \"{brokers}\""))
            }
            Some("database") if table.starts_with("targets.") => {
                databases += 1;
                Some(format!("database = \"{database}\""))
            }
            _ => None,
        };
        out.push(replaced.unwrap_or_else(|| line.to_owned()));
    }
    if !mode_written {
        if table != "defaults" {
            out.push(String::new());
            out.push("[defaults]".to_owned());
        }
        out.push(mode_line);
    }
    assert!(
        databases > 0,
        "the project names no target database:\n{text}"
    );
    out.join("\n") + "\n"
}

/// A sources file with the test stack's broker and topics of this test's own (the suffix),
/// so parallel tests never read each other's messages.
fn adapt_sources_file(text: &str, brokers: &str, suffix: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            // A list item's first key shares its line with the dash.
            let (dash, entry) = trimmed
                .strip_prefix("- ")
                .map_or(("", trimmed), |rest| ("- ", rest));
            if entry.starts_with("broker_list:") {
                format!("{indent}{dash}broker_list: \"{brokers}\"")
            } else if let Some(topic) = entry.strip_prefix("topic:") {
                let topic = topic.trim().trim_matches(['"', '\'']);
                format!("{indent}{dash}topic: \"{topic}.{suffix}\"")
            } else {
                line.to_owned()
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// Discovery sees the adaptation: this test's database and mode everywhere.
fn assert_adapted(discovered: &Value, database: &str, mode: Mode) {
    assert_eq!(discovered["database"], database, "{discovered}");
    assert_eq!(discovered["pipeline_mode"], mode.name(), "{discovered}");
    let pipelines = discovered["pipelines"].as_array().expect("pipelines");
    assert!(!pipelines.is_empty(), "{discovered}");
    for pipeline in pipelines {
        assert_eq!(pipeline["mode"], mode.name(), "{pipeline}");
    }
}

// ---------------------------------------------------------------------------------------
// Feeding the sources

/// A source of the copy as discovery resolved it, and how the lane feeds it.
enum Feeder {
    Kafka {
        source: String,
        topic: String,
        messages: Messages,
    },
    Table {
        source: String,
        /// Qualified: `db.table`.
        table: String,
        timestamp_column: String,
    },
}

/// One message or row fed: its source, the id the models keep, and for Kafka where the
/// broker put it.
struct Fed {
    source: String,
    id: String,
    position: Option<(i32, i64)>,
    /// A Kafka message's JSON value (the fields a model copies).
    value: Option<Value>,
}

/// The feeders of every discovered source; the lane must know how to feed each one.
fn feeders_for(
    discovered: &Value,
    feeds: &[(&'static str, Feed)],
    database: &str,
    suffix: &str,
) -> Vec<Feeder> {
    let sources = discovered["sources"].as_array().expect("sources");
    let names: BTreeSet<&str> = sources.iter().filter_map(|s| s["name"].as_str()).collect();
    let planned: BTreeSet<&str> = feeds.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names, planned,
        "the project's sources against those the lane feeds"
    );
    feeds
        .iter()
        .map(|(name, feed)| {
            let source = sources
                .iter()
                .find(|s| s["name"] == *name)
                .expect("a discovered source");
            match feed {
                Feed::Kafka(messages) => {
                    assert_eq!(source["kind"], "kafka", "{source}");
                    let topic = source["topic"].as_str().expect("a topic").to_owned();
                    assert!(
                        topic.ends_with(suffix),
                        "{name} reads {topic}, a topic other tests share"
                    );
                    Feeder::Kafka {
                        source: (*name).to_owned(),
                        topic,
                        messages: *messages,
                    }
                }
                Feed::OrderRows => {
                    assert_eq!(source["kind"], "stream_table", "{source}");
                    let table = source["table_name"].as_str().expect("a table name");
                    let timestamp_column = source["columns"]
                        .as_array()
                        .and_then(|pairs| pairs.iter().find(|p| p[0] == "_replay_timestamp"))
                        .and_then(|pair| pair[1].as_str())
                        .unwrap_or_else(|| panic!("no _replay_timestamp column: {source}"));
                    Feeder::Table {
                        source: (*name).to_owned(),
                        table: format!("{database}.{table}"),
                        timestamp_column: timestamp_column.to_owned(),
                    }
                }
            }
        })
        .collect()
}

impl Feeder {
    /// Creates the topic (three partitions, as orders_demo's Compose file does) or the
    /// adopted table.
    fn prepare(&self) {
        match self {
            Self::Kafka { topic, .. } => create_topic(&stack().kafka_brokers, topic, 3),
            Self::Table {
                table,
                timestamp_column,
                ..
            } => {
                execute(&format!(
                    "CREATE TABLE {table} (order_id String, {timestamp_column} DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY {timestamp_column}"
                ));
            }
        }
    }

    /// Feeds units `units`, event times counted from `base_ms`; what was fed.
    fn feed(&self, units: Range<u64>, base_ms: i64) -> Vec<Fed> {
        match self {
            Self::Kafka {
                source,
                topic,
                messages,
            } => {
                let messages = messages(units, base_ms);
                let records: Vec<Record> = messages
                    .iter()
                    .map(|message| Record {
                        partition: message.partition,
                        key: message.key.clone(),
                        value: message.value.to_string(),
                        headers: Vec::new(),
                        timestamp_ms: message.timestamp_ms,
                    })
                    .collect();
                let positions = produce(&stack().kafka_brokers, topic, &records);
                assert_eq!(positions.len(), messages.len(), "every message delivered");
                messages
                    .into_iter()
                    .zip(positions)
                    .map(|(message, position)| Fed {
                        source: source.clone(),
                        id: message.id,
                        position: Some(position),
                        value: Some(message.value),
                    })
                    .collect()
            }
            Self::Table {
                source,
                table,
                timestamp_column,
            } => {
                // Ids 1000, 1001, ...: numeric text, as the stalled model casts them; event
                // times as `at` gives them.
                execute(&format!(
                    "INSERT INTO {table} (order_id, {timestamp_column}) SELECT toString(1000 + number), fromUnixTimestamp64Milli(toInt64({base_ms} + number * 1000), 'UTC') FROM numbers({}, {})",
                    units.start,
                    units.end - units.start
                ));
                units
                    .map(|unit| Fed {
                        source: source.clone(),
                        id: (1000 + unit).to_string(),
                        position: None,
                        value: None,
                    })
                    .collect()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Checking rows, tests and audits

/// The rows each model must hold, as sorted TSV lines.
fn expected(expect: &Expect, fed: &[Fed]) -> Vec<String> {
    let mut lines: Vec<String> = match expect {
        Expect::Nothing => Vec::new(),
        Expect::Ids(source) => fed
            .iter()
            .filter(|f| f.source == *source)
            .map(|f| f.id.clone())
            .collect(),
        Expect::Fields(source, fields) => fed
            .iter()
            .filter(|f| f.source == *source)
            .map(|f| {
                let value = f.value.as_ref().expect("a Kafka message");
                fields
                    .iter()
                    .map(|field| match &value[*field] {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .collect(),
        Expect::IdsAtPositions(source) => fed
            .iter()
            .filter(|f| f.source == *source)
            .map(|f| {
                let (partition, offset) = f.position.expect("a Kafka position");
                format!("{}\t{partition}\t{offset}", f.id)
            })
            .collect(),
    };
    lines.sort();
    lines
}

/// `columns` of every row of `relation`, sorted as text (ORDER BY ALL keeps the output
/// readable; numbers sort differently as text, and the expectation is text).
fn rows(relation: &str, columns: &str) -> Vec<String> {
    let mut lines: Vec<String> = execute(&format!(
        "SELECT {columns} FROM {relation} ORDER BY ALL FORMAT TSV"
    ))
    .lines()
    .map(str::to_owned)
    .collect();
    lines.sort();
    lines
}

/// Waits until each model holds as many rows as were fed to it, then compares the rows as
/// multisets. Models that must stay empty are checked last, once everything else arrived.
fn assert_rows(database: &str, manifest: &Value, checks: &[Check], fed: &[Fed]) {
    let (empty, filled): (Vec<&Check>, Vec<&Check>) = checks
        .iter()
        .partition(|check| matches!(check.expect, Expect::Nothing));
    for check in filled.into_iter().chain(empty) {
        let relation = manifest["models"][check.model]["relation_name"]
            .as_str()
            .unwrap_or_else(|| panic!("manifest.json names no relation for {}", check.model));
        let relation = format!("{database}.{relation}");
        let want = expected(&check.expect, fed);
        assert!(
            !want.is_empty() || matches!(check.expect, Expect::Nothing),
            "nothing was fed to {}",
            check.model
        );
        let mut seen = Vec::new();
        let arrived = wait_for(ARRIVAL_LIMIT, || {
            seen = rows(&relation, check.columns);
            seen.len() >= want.len()
        });
        assert!(
            arrived,
            "{relation}: {} of {} rows arrived within {ARRIVAL_LIMIT:?}\nseen: {seen:?}\nwanted: {want:?}",
            seen.len(),
            want.len()
        );
        std::thread::sleep(SETTLE);
        assert_eq!(
            rows(&relation, check.columns),
            want,
            "{relation} ({}) against what was fed, as multisets",
            check.columns
        );
    }
}

fn entries(manifest: &Value, key: &str) -> usize {
    manifest[key].as_object().map_or(0, serde_json::Map::len)
}

fn sql_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                sql_files(&path)
            } else {
                usize::from(path.extension().is_some_and(|ext| ext == "sql"))
            }
        })
        .sum()
}

/// `stb test` where the project has SQL tests: one compiled test per file under tests/
/// (none dropped on the way), each run and passed.
fn project_tests_pass(dir: &Path, manifest: &Value) {
    let compiled = entries(manifest, "tests");
    let files = sql_files(&dir.join("tests"));
    if compiled == 0 && files == 0 {
        return;
    }
    assert_eq!(compiled, files, "compiled tests against files under tests/");
    every_one_passed(&stb_json(dir, &["test", "--json"]), compiled);
}

/// A `stb test` or `stb audit` report: `count` results, each `passed`.
fn every_one_passed(report: &Value, count: usize) {
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), count, "{report}");
    assert!(
        results.iter().all(|result| result["status"] == "passed"),
        "{report}"
    );
}

/// `stb audit` where the project has audits (files under audits/ or declared in MODEL
/// headers): every one passed over rows the lane fed (none deferred, none over an empty
/// relation).
fn project_audits_pass(dir: &Path, manifest: &Value) {
    let compiled = entries(manifest, "audits");
    if compiled == 0 && !dir.join("audits").is_dir() {
        return;
    }
    let report = stb_json(dir, &["audit", "--json"]);
    every_one_passed(&report, compiled);
    assert_eq!(report["over_empty_relations"], json!([]), "{report}");
}
