use super::*;
use crate::options::parse_start_time;

fn anchor(mode: BoundaryMode, time: Option<&'static str>) -> Anchor {
    Anchor {
        relation: "db.raw__orders".into(),
        mode,
        time_column: time,
        local: None,
    }
}

fn columns(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn each_mode_needs_its_columns_and_a_time_column_for_a_start_time() {
    let kafka = columns(&[PARTITION, OFFSET, TIMESTAMP, LANDED_AT]);
    assert_eq!(
        required_columns(BoundaryMode::Offsets, &kafka, true),
        Ok(Some(LANDED_AT))
    );
    let adopted = columns(&[PARTITION, OFFSET, TIMESTAMP]);
    assert_eq!(
        required_columns(BoundaryMode::Offsets, &adopted, true),
        Ok(Some(TIMESTAMP))
    );
    assert_eq!(
        required_columns(BoundaryMode::Offsets, &columns(&[PARTITION, OFFSET]), true),
        Err(TIMESTAMP.to_owned())
    );
    assert_eq!(
        required_columns(BoundaryMode::Cursor, &columns(&[CURSOR]), false),
        Ok(None)
    );
    assert_eq!(
        required_columns(BoundaryMode::Timestamp, &columns(&[CURSOR]), false),
        Err(TIMESTAMP.to_owned())
    );
}

fn offsets_capture(rows: &[(&str, &str, &str)]) -> Capture {
    let cell = |row: usize, column: &str| {
        let (p, l, u) = rows[row];
        Some(
            match column {
                "partition" => p,
                "run_lower" => l,
                "run_upper" => u,
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    parse_capture(
        &anchor(BoundaryMode::Offsets, None),
        None,
        rows.len(),
        &cell,
    )
    .expect("capture")
}

#[test]
fn offset_runs_give_one_inclusive_cutoff_per_partition() {
    // Offsets 1 and 3 in partition 0 are two runs; the cutoff is the last present offset.
    let capture = offsets_capture(&[("0", "1", "1"), ("0", "3", "3"), ("2", "0", "9")]);
    assert_eq!(
        predicate(BoundaryMode::Offsets, &capture, None),
        "(_replay_partition = 0 AND _replay_offset <= 3) OR (_replay_partition = 2 AND _replay_offset <= 9)"
    );
    assert_eq!(capture.captured_at(), Some("2026-11-30 10:00:00.123"));
    let start = parse_start_time("2026-01-01").expect("time");
    assert_eq!(
        predicate(BoundaryMode::Offsets, &capture, Some(&start)),
        "(_replay_partition = 0 AND _replay_offset <= 3 AND _replay_offset >= 1) OR (_replay_partition = 2 AND _replay_offset <= 9 AND _replay_offset >= 0)"
    );
}

#[test]
fn an_empty_capture_replays_nothing() {
    assert_eq!(
        predicate(BoundaryMode::Offsets, &offsets_capture(&[]), None),
        "0"
    );
    let cell = |_: usize, column: &str| match column {
        "rows" => Some("0".to_owned()),
        "captured_at" => Some("2026-11-30 10:00:00.000".to_owned()),
        _ => None,
    };
    let capture =
        parse_capture(&anchor(BoundaryMode::Timestamp, None), None, 1, &cell).expect("capture");
    assert_eq!(predicate(BoundaryMode::Timestamp, &capture, None), "0");
}

#[test]
fn scalar_modes_bound_by_the_capture_and_the_start_time() {
    let cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "5",
                "cutoff" => "2026-11-30 10:00:00.123",
                "lower" => "2026-11-29 00:00:00.000",
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    let start = parse_start_time("2026-11-29T12:00:00Z").expect("time");
    let timestamp = anchor(BoundaryMode::Timestamp, Some(TIMESTAMP));
    let capture = parse_capture(&timestamp, Some(&start), 1, &cell).expect("capture");
    assert_eq!(
        predicate(BoundaryMode::Timestamp, &capture, Some(&start)),
        "_replay_timestamp <= toDateTime64('2026-11-30 10:00:00.123', 3, 'UTC') AND _replay_timestamp >= toDateTime64('2026-11-29 12:00:00.000', 3, 'UTC')"
    );
    let cursor_cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "5",
                "cutoff" => "41",
                "lower" => "17",
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    let cursor = anchor(BoundaryMode::Cursor, Some(TIMESTAMP));
    let capture = parse_capture(&cursor, Some(&start), 1, &cursor_cell).expect("capture");
    assert_eq!(
        predicate(BoundaryMode::Cursor, &capture, Some(&start)),
        "_replay_cursor <= 41 AND _replay_cursor >= 17"
    );
}

#[test]
fn captured_values_that_could_inject_sql_are_refused() {
    let cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "1",
                "cutoff" => "1 OR 1",
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    assert!(parse_capture(&anchor(BoundaryMode::Cursor, None), None, 1, &cell).is_err());
    let time_cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "1",
                "cutoff" => "2026-11-30') OR (1",
                _ => return None,
            }
            .to_owned(),
        )
    };
    assert!(parse_capture(&anchor(BoundaryMode::Timestamp, None), None, 1, &time_cell).is_err());
    let partition = |_: usize, column: &str| {
        Some(if column == "partition" { "0 OR 1" } else { "1" }.to_owned())
    };
    assert!(parse_capture(&anchor(BoundaryMode::Offsets, None), None, 1, &partition).is_err());
}

#[test]
fn the_replay_filters_the_driving_input_where_the_author_wrote_it() {
    let template = ReplayTemplate {
        target: "db.tbl__clean".into(),
        query_parts: vec![
            "SELECT o.id, c.name FROM ".into(),
            " AS o LEFT JOIN db.tbl__customers AS c ON c.id = o.customer WHERE o.ok;\n".into(),
        ],
        anchor: anchor(BoundaryMode::Offsets, None),
        settings: vec![
            ("max_threads".into(), "2".into()),
            ("insert_deduplication_token".into(), "x".into()),
        ],
        skip_existing: None,
    };
    assert_eq!(
        template.render("_replay_offset <= 3"),
        "INSERT INTO db.tbl__clean SELECT o.id, c.name FROM (SELECT * FROM db.raw__orders WHERE _replay_offset <= 3) AS o LEFT JOIN db.tbl__customers AS c ON c.id = o.customer WHERE o.ok SETTINGS max_threads = 2, insert_deduplication_token = 'x'"
    );
    // Without an alias the subquery keeps the table's name for qualified columns.
    let bare = ReplayTemplate {
        query_parts: vec!["SELECT raw__orders.id FROM ".into(), "\nWHERE 1".into()],
        settings: Vec::new(),
        ..template
    };
    assert_eq!(
        bare.render("0"),
        "INSERT INTO db.tbl__clean SELECT raw__orders.id FROM (SELECT * FROM db.raw__orders WHERE 0) AS raw__orders\nWHERE 1"
    );
}

#[test]
fn capture_queries_read_the_anchor_with_the_warehouse_clock() {
    let start = parse_start_time("2026-11-29").expect("time");
    let offsets = capture_sql(
        &anchor(BoundaryMode::Offsets, Some(LANDED_AT)),
        Some(&start),
    );
    assert!(offsets.contains("row_number() OVER (PARTITION BY p ORDER BY o)"));
    // Runs are numbered only in partitions whose distinct offsets leave gaps.
    assert!(offsets.contains(
        "GROUP BY p HAVING toInt128(groupBitmap(toUInt64(o))) != toInt128(max(o)) - toInt128(min(o)) + 1"
    ));
    assert!(
        offsets.contains(
            "WHERE _replay_landed_at <= toDateTime64('2026-11-29 00:00:00.000', 3, 'UTC')"
        )
    );
    let scalar = capture_sql(&anchor(BoundaryMode::LandedAt, Some(LANDED_AT)), None);
    assert!(scalar.starts_with("SELECT toString(now64(3, 'UTC')) AS cutoff"));
    assert!(!scalar.contains("WHERE"));
}

#[test]
fn lineage_preserving_roots_skip_rows_the_new_view_already_wrote() {
    let lineage = columns(&["id", PARTITION, OFFSET]);
    assert_eq!(
        existing_keys(BoundaryMode::Offsets, false, &lineage),
        Some(&[PARTITION, OFFSET][..])
    );
    assert_eq!(existing_keys(BoundaryMode::Offsets, true, &lineage), None);
    assert_eq!(
        existing_keys(BoundaryMode::Offsets, false, &columns(&["id"])),
        None
    );
    assert_eq!(
        existing_keys(BoundaryMode::Timestamp, false, &columns(&[TIMESTAMP])),
        None
    );
    let template = ReplayTemplate {
        target: "db.t".into(),
        query_parts: vec!["SELECT * FROM ".into(), String::new()],
        anchor: anchor(BoundaryMode::Offsets, None),
        settings: Vec::new(),
        skip_existing: existing_keys(BoundaryMode::Offsets, false, &lineage),
    };
    assert_eq!(
        template.render("_replay_offset <= 3"),
        "INSERT INTO db.t SELECT * FROM (SELECT * FROM db.raw__orders WHERE (_replay_offset <= 3) AND (_replay_partition, _replay_offset) NOT IN (SELECT _replay_partition, _replay_offset FROM db.t)) AS raw__orders"
    );
}

#[test]
fn every_mode_records_what_its_replay_covers() {
    let start = parse_start_time("2026-11-29T12:00:00Z").expect("time");
    let timestamp = anchor(BoundaryMode::Timestamp, Some(TIMESTAMP));
    let cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "5",
                "cutoff" => "2026-11-30 10:00:00.123",
                "lower" => "2026-11-29 13:00:00.000",
                "upper" => "2026-11-30 09:59:59.000",
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    let capture = parse_capture(&timestamp, Some(&start), 1, &cell).expect("capture");
    let covered = coverage(&timestamp, &capture, Some(&start));
    assert_eq!(covered.len(), 1);
    let row = &covered[0];
    assert_eq!(row.boundary_key, "_replay_timestamp");
    assert_eq!(row.partition_value, None);
    assert_eq!(row.source_timestamp_column_name, Some(TIMESTAMP));
    assert_eq!(
        row.lower_value.as_deref(),
        Some("2026-11-29 12:00:00.000"),
        "the start bounds it"
    );
    assert_eq!(row.upper_value.as_deref(), Some("2026-11-30 09:59:59.000"));
    assert_eq!(
        row.replay_cutoff_value.as_deref(),
        Some("2026-11-30 10:00:00.123")
    );
    assert!(row.cutoff_inclusive);
    // Without a start time the window starts at the first position present.
    let capture = parse_capture(&timestamp, None, 1, &cell).expect("capture");
    let row = &coverage(&timestamp, &capture, None)[0];
    assert_eq!(row.lower_value.as_deref(), Some("2026-11-29 13:00:00.000"));
    assert_eq!(row.source_timestamp_column_name, None);

    let cursor = anchor(BoundaryMode::Cursor, Some(TIMESTAMP));
    let cursor_cell = |_: usize, column: &str| {
        Some(
            match column {
                "rows" => "5",
                "cutoff" => "41",
                "lower" => "17",
                "captured_at" => "2026-11-30 10:00:00.123",
                _ => return None,
            }
            .to_owned(),
        )
    };
    let capture = parse_capture(&cursor, Some(&start), 1, &cursor_cell).expect("capture");
    let row = &coverage(&cursor, &capture, Some(&start))[0];
    assert_eq!(
        (
            row.lower_value.as_deref(),
            row.upper_value.as_deref(),
            row.replay_cutoff_value.as_deref()
        ),
        (Some("17"), Some("41"), Some("41"))
    );
    assert_eq!(row.boundary_key, "_replay_cursor");

    let offsets = anchor(BoundaryMode::Offsets, Some(LANDED_AT));
    let capture = Capture::Offsets {
        runs: vec![
            OffsetRun {
                partition: 0,
                lower: 3,
                upper: 5,
            },
            OffsetRun {
                partition: 0,
                lower: 8,
                upper: 9,
            },
            OffsetRun {
                partition: 2,
                lower: 0,
                upper: 1,
            },
        ],
        captured_at: None,
    };
    let rows: Vec<String> = coverage(&offsets, &capture, None)
        .into_iter()
        .map(|r| {
            format!(
                "{} {:?} {:?}..{:?}",
                r.boundary_key, r.partition_value, r.lower_value, r.upper_value
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            "_replay_partition=0 Some(\"0\") Some(\"3\")..Some(\"9\")",
            "_replay_partition=2 Some(\"2\") Some(\"0\")..Some(\"1\")",
        ]
    );
    // An empty scalar window is recorded as covering nothing.
    let empty = |_: usize, column: &str| (column == "rows").then(|| "0".to_owned());
    let capture = parse_capture(&timestamp, None, 1, &empty).expect("capture");
    let row = &coverage(&timestamp, &capture, None)[0];
    assert_eq!(
        (row.lower_value.clone(), row.replay_cutoff_value.clone()),
        (None, None)
    );
}
