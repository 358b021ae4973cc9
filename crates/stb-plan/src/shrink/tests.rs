use super::*;
use crate::direct::RelationKind;
use crate::options::parse_start_time;
use crate::replay::{Anchor, BoundaryMode, ReplayTemplate};

fn model(name: &str, aggregate: bool) -> PlanModel {
    PlanModel {
        name: name.into(),
        is_table: true,
        relations: vec![
            (RelationKind::Table, format!("tbl__{name}")),
            (RelationKind::MaterializedView, format!("mv__{name}")),
        ],
        aggregate,
        ..PlanModel::default()
    }
}

fn source() -> PlanSource {
    PlanSource {
        name: "orders".into(),
        framework_managed: true,
        relation: Some("raw__orders".into()),
        reference: Some("db.raw__orders".into()),
        ..PlanSource::default()
    }
}

fn root(name: &str, mode: BoundaryMode) -> RootReplay {
    RootReplay {
        model: name.into(),
        driving_input: "orders".into(),
        propagated: Vec::new(),
        capture_sql: String::new(),
        template: ReplayTemplate {
            target: format!("db.tbl__{name}"),
            query_parts: vec!["SELECT a FROM ".into(), " WHERE a > 0".into()],
            anchor: Anchor {
                relation: "db.raw__orders".into(),
                mode,
                time_column: Some(crate::replay::LANDED_AT),
                local: None,
            },
            settings: vec![("max_threads".into(), "2".into())],
            skip_existing: Some(&["_replay_partition", "_replay_offset"]),
        },
        stage: 0,
        waits_for: Vec::new(),
        bounded: true,
        chunk_rows: None,
        start_time: None,
        rebuilt_input: false,
        seed: None,
    }
}

const RAW_DDL: &str = "CREATE TABLE db.raw__orders (`kafka_value` String) ENGINE = MergeTree ORDER BY (_replay_partition, _replay_offset) TTL ifNull(_replay_timestamp, _replay_landed_at) + toIntervalDay(30) SETTINGS index_granularity = 8192";

fn facts(name: &str) -> Option<RelationFacts> {
    match name {
        "tbl__events" => Some(RelationFacts {
            engine: "MergeTree".into(),
            sorting_key: "a".into(),
        }),
        "tbl__totals" => Some(RelationFacts {
            engine: "SummingMergeTree".into(),
            sorting_key: "customer_id".into(),
        }),
        "raw__orders" => Some(RelationFacts {
            engine: "MergeTree".into(),
            sorting_key: String::new(),
        }),
        _ => None,
    }
}

fn context<'a>(
    models: &'a [PlanModel],
    sources: &'a [PlanSource],
    baseline: &'a dyn Fn(&str) -> Option<String>,
) -> Context<'a> {
    Context {
        models,
        sources,
        facts: &facts,
        baseline,
        live_table: &|_| None,
    }
}

#[test]
fn a_changed_query_measures_history_through_the_query_that_filled_the_table() {
    let mut events = model("events", false);
    events.query = "SELECT a FROM db.raw__orders WHERE a > 5".into();
    events.replay_query = vec!["SELECT a FROM ".into(), " WHERE a > 5".into()];
    let mut changed = root("events", BoundaryMode::Offsets);
    changed.template.query_parts = events.replay_query.clone();
    let (models, sources) = ([events], [source()]);
    let previous = |_: &str| Some("SELECT a FROM db.raw__orders WHERE a > 0".to_owned());
    let measured = probes(&[changed.clone()], &context(&models, &sources, &previous));
    let window = measured[0].window.as_ref().expect("window");
    assert!(measured[0].query_changed);
    assert!(
        window.history.contains("AS raw__orders WHERE a > 0)"),
        "{}",
        window.history
    );
    assert!(
        window.retained.contains("AS raw__orders WHERE a > 5)"),
        "{}",
        window.retained
    );
    // The same query recorded, none recorded, or one that never reads the input: the
    // current query is the measure.
    for recorded in [
        Some("SELECT a FROM db.raw__orders WHERE a > 5".to_owned()),
        None,
        Some("SELECT 1".to_owned()),
    ] {
        let baseline = move |_: &str| recorded.clone();
        let probes = probes(&[changed.clone()], &context(&models, &sources, &baseline));
        assert!(!probes[0].query_changed);
        let window = probes[0].window.as_ref().expect("window");
        assert_eq!(window.history, window.retained);
    }
    // A filter the new query adds is not lost history.
    let mut tightened = probe(None, true);
    tightened.query_changed = true;
    let assessed = read_back(
        &[tightened],
        &|_| Some(20),
        &|_| Some(counts(30, 20, 18, 18)),
        &|_| None,
    );
    assert_eq!(assessed[0].lost_rows, 0);
    assert!(!assessed[0].needs_consent());
    assert_eq!(
        assessed[0].describe(),
        "order_events: 20 rows now, 18 replayable (the changed query gives 18 where the current one gives 20)"
    );
}

#[test]
fn row_wise_roots_count_rows_of_the_query_over_the_window_and_merging_tables_count_groups() {
    let models = [
        model("events", false),
        model("totals", true),
        model("fresh", false),
    ];
    let roots = [
        root("events", BoundaryMode::Offsets),
        root("totals", BoundaryMode::Offsets),
        root("fresh", BoundaryMode::Offsets),
    ];
    let sources = [source()];
    let probes = probes(&roots, &context(&models, &sources, &|_| None));
    assert_eq!(probes[0].basis, Basis::Rows);
    assert_eq!(
        probes[0].live_sql.as_deref(),
        Some("SELECT count() FROM db.tbl__events")
    );
    let window = probes[0].window.as_ref().expect("input exists");
    // The window query is the model's own query with its input narrowed, without the
    // build's already-written-key check or replay settings.
    assert_eq!(
        window.retained,
        "SELECT count() FROM (SELECT a FROM (SELECT * FROM db.raw__orders WHERE 1) AS raw__orders WHERE a > 0) AS __stb_window"
    );
    assert_eq!(window.input_rows, "SELECT count() FROM db.raw__orders");
    assert_eq!(window.bounded, None);
    // The retention is the measuring's to read: the plan names where.
    assert_eq!(probes[0].retention, None);
    assert_eq!(probes[0].retention_source.as_deref(), Some("raw__orders"));
    assert_eq!(
        probes[1].basis,
        Basis::Groups {
            key: "customer_id".into()
        }
    );
    assert_eq!(
        probes[1].live_sql.as_deref(),
        Some("SELECT count() FROM (SELECT 1 FROM db.tbl__totals GROUP BY customer_id)")
    );
    // A root whose table does not exist has nothing to lose and is not measured.
    assert_eq!(probes[2].live_sql, None);
    assert!(!probes[2].needs_window());
    let measured = batches(&probes);
    assert_eq!(
        measured,
        vec![vec![0, 1]],
        "one batch; the new table is not measured"
    );
    let live = live_query(&probes, &measured[0]).expect("two tables");
    assert_eq!(live.matches("UNION ALL").count(), 1, "{live}");
    let windows = window_query(&probes, &measured[0], WindowColumns::All).expect("two windows");
    // An unchanged query without a start time counts its window once.
    assert_eq!(windows.matches("AS __stb_window").count(), 2, "{windows}");
    assert!(windows.contains("retained_rows AS history_rows, retained_rows AS replayable_rows"));
    assert_eq!(windows.matches(" AS root,").count(), 2, "{windows}");
    assert_eq!(
        window_query(&probes, &[1], WindowColumns::All)
            .expect("one")
            .matches(" AS root,")
            .count(),
        1
    );
}

#[test]
fn a_start_time_adds_a_bounded_window_per_mode() {
    let start = parse_start_time("2026-11-29").expect("time");
    let (models, sources) = ([model("events", false)], [source()]);
    let mut bounded_root = root("events", BoundaryMode::Offsets);
    bounded_root.start_time = Some(start.clone());
    let probes = probes(&[bounded_root], &context(&models, &sources, &|_| None));
    let bounded = probes[0].window.as_ref().and_then(|w| w.bounded.clone());
    let bounded = bounded.expect("bounded");
    assert!(
        bounded.contains("(_replay_partition, _replay_offset) IN (SELECT p, o FROM (SELECT DISTINCT r._replay_partition"),
        "{bounded}"
    );
    let anchor = |mode, time| Anchor {
        relation: "db.t".into(),
        mode,
        time_column: time,
        local: None,
    };
    assert_eq!(
        crate::replay::window_now(&anchor(BoundaryMode::Timestamp, None), Some(&start)),
        "_replay_timestamp <= now64(3, 'UTC') AND _replay_timestamp >= toDateTime64('2026-11-29 00:00:00.000', 3, 'UTC')"
    );
    assert_eq!(
        crate::replay::window_now(&anchor(BoundaryMode::LandedAt, None), None),
        "_replay_landed_at <= now64(3, 'UTC')"
    );
    assert_eq!(
        crate::replay::window_now(
            &anchor(BoundaryMode::Cursor, Some(crate::replay::TIMESTAMP)),
            Some(&start)
        ),
        "_replay_cursor >= (SELECT minIf(_replay_cursor, _replay_timestamp >= toDateTime64('2026-11-29 00:00:00.000', 3, 'UTC')) FROM db.t) AND (SELECT countIf(_replay_timestamp >= toDateTime64('2026-11-29 00:00:00.000', 3, 'UTC')) FROM db.t) > 0"
    );
    assert_eq!(
        crate::replay::window_now(&anchor(BoundaryMode::Cursor, None), None),
        "1"
    );
}

#[test]
fn retention_reads_the_live_ttl() {
    assert_eq!(super::retention(RAW_DDL), Some("30d".into()));
    assert_eq!(retention_label("ts + toIntervalHour(36)"), "36h");
    assert_eq!(retention_label("ts + toIntervalSecond(45)"), "45s");
    assert_eq!(
        retention_label("ts + toIntervalDay(x)"),
        "ts + toIntervalDay(x)"
    );
    assert_eq!(
        ttl_clause("CREATE TABLE t (a Int8) ENGINE = MergeTree ORDER BY a TTL toDate(a) + 1"),
        Some("toDate(a) + 1".into())
    );
    assert_eq!(
        ttl_clause("CREATE TABLE t (a Int8) ENGINE = MergeTree ORDER BY a"),
        None
    );
    assert_eq!(unwrap_parentheses("(bucket)"), "bucket");
    assert_eq!(unwrap_parentheses("(a, toDate(b))"), "a, toDate(b)");
    assert_eq!(unwrap_parentheses("(a) + (b)"), "(a) + (b)");
    assert_eq!(unwrap_parentheses("a"), "a");
    assert!(merges_rows("ReplicatedSummingMergeTree"));
    assert!(merges_rows("ReplacingMergeTree"));
    assert!(!merges_rows("MergeTree"));
    assert!(!merges_rows("ReplicatedMergeTree"));
    assert!(!merges_rows("Memory"));
}

fn probe(retention: Option<&str>, input: bool) -> Probe {
    Probe {
        model: "order_events".into(),
        driving_input: "orders".into(),
        basis: Basis::Rows,
        live_sql: Some("SELECT count() FROM db.tbl__order_events".into()),
        window: input.then(|| WindowSql {
            input_rows: String::new(),
            history: String::new(),
            retained: String::new(),
            bounded: None,
            replay_input: String::new(),
            partitions: None,
        }),
        retention: retention.map(str::to_owned),
        retention_source: None,
        query_changed: false,
        replays_rebuilt_input: false,
    }
}

/// `assess` over one reading per probe.
fn read_back(
    probes: &[Probe],
    live: &dyn Fn(usize) -> Option<u64>,
    windows: &dyn Fn(usize) -> Option<WindowCounts>,
    errors: &dyn Fn(usize) -> Option<String>,
) -> Vec<ReplayWindow> {
    assess(
        probes,
        &Readings {
            live,
            windows,
            errors,
            new_query_errors: &|_| None,
        },
    )
}

fn counts(
    input_rows: u64,
    history_rows: u64,
    retained_rows: u64,
    replayable_rows: u64,
) -> WindowCounts {
    WindowCounts {
        input_rows,
        history_rows,
        retained_rows,
        replayable_rows,
    }
}

#[test]
fn a_root_whose_history_holds_less_than_its_table_needs_consent_with_the_reason() {
    let expired = read_back(
        &[probe(Some("30d"), true)],
        &|_| Some(450),
        &|_| Some(counts(0, 0, 0, 0)),
        &|_| None,
    );
    assert_eq!(expired[0].lost_rows, 450);
    assert_eq!(expired[0].reason, Some("retention"));
    assert!(expired[0].needs_consent());
    assert_eq!(
        expired[0].describe(),
        "order_events: 450 rows now, 0 replayable (450 lost: history expired by retention 30d)"
    );
    let emptied = read_back(
        &[probe(None, true)],
        &|_| Some(3),
        &|_| Some(counts(0, 0, 0, 0)),
        &|_| None,
    );
    assert_eq!(emptied[0].reason, Some("empty_source"));
    assert!(emptied[0].describe().ends_with("(3 lost: orders is empty)"));
    let trimmed = read_back(
        &[probe(None, true)],
        &|_| Some(10),
        &|_| Some(counts(6, 6, 6, 6)),
        &|_| None,
    );
    assert_eq!(trimmed[0].reason, Some("history_removed"));
    assert_eq!(trimmed[0].lost_rows, 4);
    let missing = read_back(&[probe(None, false)], &|_| Some(10), &|_| None, &|_| None);
    assert_eq!(missing[0].reason, Some("missing_source"));
    assert!(missing[0].needs_consent());
}

#[test]
fn a_start_time_discards_on_purpose_and_only_lost_history_needs_consent() {
    let bounded = read_back(
        &[probe(Some("30d"), true)],
        &|_| Some(450),
        &|_| Some(counts(450, 450, 450, 300)),
        &|_| None,
    );
    assert_eq!(bounded[0].lost_rows, 0);
    assert_eq!(bounded[0].discarded_by_start_time, 150);
    assert!(!bounded[0].needs_consent());
    assert_eq!(
        bounded[0].describe(),
        "order_events: 450 rows now, 300 replayable (150 before --start-time discarded)"
    );
    // More arrived in the input than the table has seen yet: nothing is lost.
    let growing = read_back(
        &[probe(None, true)],
        &|_| Some(440),
        &|_| Some(counts(450, 450, 450, 450)),
        &|_| None,
    );
    assert!(!growing[0].needs_consent());
    // An empty table has nothing to lose, and an unmeasured one with rows needs consent.
    let empty = read_back(&[probe(None, true)], &|_| Some(0), &|_| None, &|_| None);
    assert!(!empty[0].needs_consent());
    let unmeasured = read_back(&[probe(None, true)], &|_| Some(5), &|_| None, &|_| {
        Some("Unknown table".into())
    });
    assert!(unmeasured[0].needs_consent());
    assert!(
        unmeasured[0]
            .describe()
            .contains("could not be measured: Unknown table")
    );
}

#[test]
fn a_new_query_that_cannot_run_fails_the_build_and_is_no_loss() {
    let probes = [probe(None, true)];
    let history_only = window_query(&probes, &[0], WindowColumns::History).expect("query");
    assert!(history_only.contains("AS history_rows"));
    assert!(!history_only.contains("retained_rows"));
    let windows = assess(
        &probes,
        &Readings {
            live: &|_| Some(9),
            windows: &|_| Some(counts(9, 9, 0, 0)),
            errors: &|_| None,
            new_query_errors: &|_| Some("Unknown function".into()),
        },
    );
    assert!(!windows[0].needs_consent());
    assert_eq!(
        windows[0].describe(),
        "order_events: 9 rows now, history keeps 9 (the new query could not be counted: Unknown function)"
    );
}

#[test]
fn many_roots_are_measured_in_batches_that_fit_the_server_limits() {
    let many: Vec<Probe> = (0..250).map(|_| probe(None, true)).collect();
    let cut = batches(&many);
    assert_eq!(cut.iter().map(Vec::len).collect::<Vec<_>>(), [100, 100, 50]);
    let mut large = probe(None, true);
    if let Some(window) = large.window.as_mut() {
        window.history = "x".repeat(100 * 1024);
    }
    let cut = batches(&[large.clone(), large.clone(), large]);
    assert_eq!(
        cut,
        vec![vec![0], vec![1], vec![2]],
        "each over half the byte budget"
    );
}

#[test]
fn groups_are_named_as_groups_and_say_why() {
    let mut totals = probe(None, true);
    totals.model = "totals".into();
    totals.basis = Basis::Groups {
        key: "customer_id".into(),
    };
    let windows = read_back(
        &[totals],
        &|_| Some(25),
        &|_| Some(counts(300, 20, 20, 20)),
        &|_| None,
    );
    assert_eq!(windows[0].basis, "groups");
    assert_eq!(windows[0].lost_rows, 5);
    assert_eq!(
        windows[0].describe(),
        "totals: 25 groups now, 20 replayable (5 lost: history no longer in orders; counted as groups of (customer_id): an aggregate's or a merging table's row count moves with merges)"
    );
}

#[test]
fn a_fan_in_replaying_a_rebuilt_input_is_left_to_that_input_s_root() {
    let mut fan_in = root("delta", BoundaryMode::Offsets);
    fan_in.driving_input = "alpha".into();
    fan_in.rebuilt_input = true;
    let (models, sources) = ([model("delta", false)], [source()]);
    let measured = probes(&[fan_in], &context(&models, &sources, &|_| None));
    assert!(measured[0].replays_rebuilt_input);
    assert_eq!(
        batches(&measured),
        Vec::<Vec<usize>>::new(),
        "no query for it"
    );
    let windows = read_back(&measured, &|_| None, &|_| None, &|_| None);
    assert!(!windows[0].needs_consent());
    assert_eq!(
        windows[0].describe(),
        "delta: replays from alpha, rebuilt first by this build (measured at its root)"
    );
}

#[test]
fn a_deployment_copy_is_measured_against_its_active_copy() {
    // The new copy does not exist yet; the active one is what readers see now.
    let (models, sources) = ([model("events", false)], [source()]);
    let mut copy = root("events", BoundaryMode::Offsets);
    copy.template.target = "db.tbl__events__20261202T000000Z_bbbbbb".into();
    let active = |model: &str| (model == "events").then(|| "tbl__events".to_owned());
    let measured = probes(
        &[copy],
        &Context {
            live_table: &active,
            ..context(&models, &sources, &|_| None)
        },
    );
    let live = measured[0].live_sql.as_deref().expect("counted");
    assert!(live.contains("db.tbl__events"), "{live}");
    assert!(!live.contains("20261202T000000Z_bbbbbb"), "{live}");
    // Without an active copy nothing is live: nothing to lose.
    let mut fresh = root("events", BoundaryMode::Offsets);
    fresh.template.target = "db.tbl__events__20261202T000000Z_bbbbbb".into();
    let unmeasured = probes(
        &[fresh],
        &Context {
            live_table: &|_| Some("tbl__missing".to_owned()),
            ..context(&models, &sources, &|_| None)
        },
    );
    assert!(unmeasured[0].live_sql.is_none());
}
