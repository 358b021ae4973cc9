use super::{
    PartitionMessages, Reading, ReplayBudget, Throughput, assemble, byte_size, duration, estimate,
    partitions_sql, summarise, thousands,
};
use crate::shrink::{Basis, Probe, WindowSql};

fn probe(model: &str, input: Option<&str>) -> Probe {
    Probe {
        model: model.into(),
        driving_input: input.unwrap_or("gone").into(),
        basis: Basis::Rows,
        live_sql: None,
        window: input.map(|input| WindowSql {
            input_rows: format!("SELECT count() FROM db.{input}"),
            history: String::new(),
            retained: String::new(),
            bounded: None,
            replay_input: format!("SELECT count() FROM db.{input} WHERE 1"),
            partitions: None,
        }),
        retention: None,
        retention_source: input.map(str::to_owned),
        query_changed: false,
        replays_rebuilt_input: false,
    }
}

#[test]
fn each_root_with_an_input_is_costed_and_bytes_follow_the_rows_its_window_takes() {
    let mut fan_in = probe("fan_in", Some("a"));
    fan_in.replays_rebuilt_input = true;
    let probes = [
        probe("orders", Some("raw__orders")),
        probe("nothing_landed", None),
        fan_in,
        probe("clicks", Some("v_clicks")),
    ];
    let readings = |index: usize| match index {
        0 => Reading {
            rows: Some(250),
            input_rows: Some(1000),
            input_bytes: Some(4096),
            partitions: vec![PartitionMessages {
                partition: "0".into(),
                messages: 250,
                first_offset: "750".into(),
                last_offset: "999".into(),
            }],
            error: None,
        },
        3 => Reading {
            rows: Some(10),
            input_rows: Some(10),
            ..Reading::default()
        },
        _ => panic!("root {index} is not measured"),
    };
    let throughput = Throughput::of(1000, 500, 2);
    let costs = assemble(&probes, &readings, throughput);
    assert_eq!(
        costs.iter().map(|c| c.model.as_str()).collect::<Vec<_>>(),
        ["orders", "clicks"]
    );
    assert_eq!(costs[0].bytes, Some(1024), "a quarter of the input's bytes");
    assert_eq!(costs[1].bytes, None, "a view's size is unknown");
    assert_eq!(costs[0].estimated_seconds, Some(0.125), "2,000 rows/s");
    assert_eq!(
        costs[0].describe(),
        "orders  250 rows · 1.0 KiB · ~0.1 s  (from raw__orders; messages p0 250)"
    );
}

#[test]
fn a_window_that_could_not_be_counted_says_why() {
    let probes = [probe("orders", Some("raw__orders"))];
    let costs = assemble(
        &probes,
        &|_| Reading {
            error: Some("Code: 60 Unknown table".into()),
            ..Reading::default()
        },
        None,
    );
    assert_eq!(costs[0].error.as_deref(), Some("Code: 60 Unknown table"));
    let silent = assemble(&probes, &|_| Reading::default(), None);
    assert_eq!(silent[0].error.as_deref(), Some("not counted"));
    assert!(silent[0].describe().contains("not counted"));
}

#[test]
fn the_budget_names_each_limit_the_replays_pass() {
    let probes = [probe("a", Some("x")), probe("b", Some("y"))];
    let readings = |index: usize| Reading {
        rows: Some(if index == 0 { 600_000 } else { 500_000 }),
        input_rows: Some(2_000_000),
        input_bytes: Some(2 * 1024 * 1024 * 1024),
        ..Reading::default()
    };
    let costs = assemble(&probes, &readings, None);
    let within = summarise(&costs, None, ReplayBudget::default());
    assert_eq!(within.rows, 1_100_000);
    assert!(within.over_budget.is_empty(), "no budget, nothing over it");
    let over = summarise(
        &costs,
        None,
        ReplayBudget {
            max_rows: Some(1_000_000),
            max_bytes: Some(1024 * 1024 * 1024),
        },
    );
    assert_eq!(
        over.over_budget,
        [
            "the replays read 1,100,000 rows, over max_replay_rows = 1,000,000",
            "the replays read 1.1 GiB, over max_replay_bytes = 1.0 GiB",
        ]
    );
    let enough = summarise(
        &costs,
        None,
        ReplayBudget {
            max_rows: Some(1_100_000),
            max_bytes: None,
        },
    );
    assert!(enough.over_budget.is_empty(), "the limit itself is allowed");
}

#[test]
fn a_budget_cannot_clear_a_window_it_could_not_count() {
    let probes = [probe("a", Some("x"))];
    let costs = assemble(&probes, &|_| Reading::default(), None);
    let budget = ReplayBudget {
        max_rows: Some(10),
        max_bytes: None,
    };
    assert_eq!(
        summarise(&costs, None, budget).over_budget,
        ["the replay windows of a could not be counted, so the budget cannot be checked"]
    );
    assert!(
        summarise(&costs, None, ReplayBudget::default())
            .over_budget
            .is_empty()
    );
}

#[test]
fn the_summary_says_how_long_and_from_what() {
    let probes = [probe("a", Some("x"))];
    let readings = |_| Reading {
        rows: Some(120_000),
        input_rows: Some(120_000),
        input_bytes: Some(3 * 1024 * 1024),
        ..Reading::default()
    };
    let throughput = Throughput::of(50_000, 1_000, 5);
    let costs = assemble(&probes, &readings, throughput);
    assert_eq!(
        summarise(&costs, throughput, ReplayBudget::default()).describe(),
        "120,000 rows · 3.0 MiB · ~2.4 s at 50,000 rows/s (the last 5 replay(s) here)"
    );
    assert_eq!(
        summarise(&costs, None, ReplayBudget::default()).describe(),
        "120,000 rows · 3.0 MiB · no time estimate (no earlier replay measured here)"
    );
    assert_eq!(Throughput::of(0, 10, 1), None);
    assert_eq!(Throughput::of(10, 0, 1), None);
}

#[test]
fn numbers_read_as_people_write_them() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
    assert_eq!(byte_size(512), "512 B");
    assert_eq!(byte_size(1536), "1.5 KiB");
    assert_eq!(byte_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
    assert_eq!(duration(0.44), "0.4 s");
    assert_eq!(duration(42.0), "42 s");
    assert_eq!(duration(185.0), "3 min 5 s");
    assert_eq!(duration(7800.0), "2 h 10 min");
    assert_eq!(estimate(0.02), "under 0.1 s");
    assert_eq!(estimate(185.0), "~3 min 5 s");
}

#[test]
fn partitions_are_counted_from_the_landing_s_offsets_within_the_window() {
    assert_eq!(
        partitions_sql("db.raw__orders", "1"),
        "SELECT toString(_replay_partition) AS partition, count() AS messages, toString(min(_replay_offset)) AS first_offset, toString(max(_replay_offset)) AS last_offset \
         FROM db.raw__orders WHERE 1 GROUP BY _replay_partition ORDER BY _replay_partition"
    );
}

#[test]
fn a_bytes_budget_cannot_clear_an_input_of_unknown_size() {
    let probes = [probe("a", Some("view_input"))];
    let costs = assemble(
        &probes,
        &|_| Reading {
            rows: Some(10),
            input_rows: Some(10),
            ..Reading::default()
        },
        None,
    );
    assert_eq!(costs[0].bytes, None);
    let by_bytes = ReplayBudget {
        max_rows: None,
        max_bytes: Some(1 << 30),
    };
    assert_eq!(
        summarise(&costs, None, by_bytes).over_budget,
        [
            "the size of what a reads is unknown (an input that is not a table), so max_replay_bytes cannot be checked"
        ]
    );
    let by_rows = ReplayBudget {
        max_rows: Some(100),
        max_bytes: None,
    };
    assert!(summarise(&costs, None, by_rows).over_budget.is_empty());
}
