use super::*;
use crate::replay::{Anchor, OffsetRun, ReplayTemplate};

fn offsets(runs: &[(i128, i128, i128)]) -> Capture {
    Capture::Offsets {
        runs: runs
            .iter()
            .map(|&(partition, lower, upper)| OffsetRun {
                partition,
                lower,
                upper,
            })
            .collect(),
        captured_at: None,
    }
}

fn ranges(chunk: &Chunk) -> &[OffsetRange] {
    match &chunk.span {
        ChunkSpan::Offsets { ranges } => ranges,
        ChunkSpan::Scalar { .. } => panic!("an offsets chunk"),
    }
}

/// The chunks holding (partition, offset), by the ranges they record.
fn holders(chunks: &[Chunk], partition: i128, offset: i128) -> usize {
    chunks
        .iter()
        .filter(|chunk| {
            ranges(chunk).iter().any(|r| {
                r.partition == partition && offset <= r.upper && r.lower.is_none_or(|l| offset >= l)
            })
        })
        .count()
}

#[test]
fn every_offset_of_the_window_is_in_exactly_one_chunk_and_none_past_a_cutoff() {
    // Partition 0 has a gap (10..=19 missing), partition 3 one offset, partition 7 many.
    let capture = offsets(&[(0, 0, 9), (0, 20, 34), (3, 5, 5), (7, 100, 163)]);
    for chunk_rows in [1, 7, 16, 25, 1_000] {
        let chunks = offset_chunks(&capture, false, chunk_rows);
        for (partition, first, cutoff) in [(0, 0, 34), (3, 5, 5), (7, 100, 163)] {
            for offset in first..=cutoff {
                assert_eq!(
                    holders(&chunks, partition, offset),
                    1,
                    "{partition}/{offset} by {chunk_rows}"
                );
            }
            assert_eq!(
                holders(&chunks, partition, cutoff + 1),
                0,
                "rows after the capture are live"
            );
        }
        for chunk in &chunks {
            let size: i128 = ranges(chunk)
                .iter()
                .map(|r| r.upper - r.lower.unwrap_or(first_of(&capture, r.partition)) + 1)
                .sum();
            assert!(
                size <= i128::from(chunk_rows),
                "a chunk spans {size} offsets, more than {chunk_rows}"
            );
        }
    }
}

fn first_of(capture: &Capture, partition: i128) -> i128 {
    let Capture::Offsets { runs, .. } = capture else {
        unreachable!()
    };
    runs.iter()
        .filter(|r| r.partition == partition)
        .map(|r| r.lower)
        .min()
        .unwrap_or(0)
}

#[test]
fn small_partitions_share_a_chunk_and_a_partition_s_first_range_is_open_below() {
    let capture = offsets(&[(0, 0, 2), (1, 10, 12), (2, 50, 59)]);
    let chunks = offset_chunks(&capture, false, 8);
    assert_eq!(chunks.len(), 2);
    assert_eq!(
        chunks[0].predicate,
        "(_replay_partition = 0 AND _replay_offset <= 2) OR (_replay_partition = 1 AND _replay_offset <= 12) OR (_replay_partition = 2 AND _replay_offset <= 51)"
    );
    assert_eq!(
        chunks[1].predicate,
        "(_replay_partition = 2 AND _replay_offset <= 59 AND _replay_offset >= 52)"
    );
    // One chunk of everything is the single statement's predicate.
    let whole = offset_chunks(&capture, false, 1_000);
    assert_eq!(whole.len(), 1);
    assert_eq!(
        whole[0].predicate,
        predicate(BoundaryMode::Offsets, &capture, None)
    );
}

#[test]
fn with_a_start_time_every_range_is_bounded_below_as_the_single_statement_is() {
    let capture = offsets(&[(0, 40, 45)]);
    let chunks = offset_chunks(&capture, true, 4);
    assert_eq!(
        chunks
            .iter()
            .map(|c| c.predicate.as_str())
            .collect::<Vec<_>>(),
        [
            "(_replay_partition = 0 AND _replay_offset <= 43 AND _replay_offset >= 40)",
            "(_replay_partition = 0 AND _replay_offset <= 45 AND _replay_offset >= 44)",
        ]
    );
    assert!(
        offset_chunks(&offsets(&[]), false, 4).is_empty(),
        "nothing captured, nothing replayed"
    );
}

fn scalar(mode_cutoff: &str, rows: u128) -> Capture {
    Capture::Scalar {
        cutoff: Some(mode_cutoff.to_owned()),
        lower: None,
        first: None,
        last: None,
        rows,
        captured_at: None,
    }
}

#[test]
fn a_cursor_window_is_cut_into_half_open_ranges_closed_at_the_cutoff() {
    let capture = scalar("99", 100);
    let starts = ["25".to_owned(), "50".to_owned(), "75".to_owned()];
    let chunks = scalar_chunks(BoundaryMode::Cursor, &capture, None, &starts).expect("chunks");
    assert_eq!(
        chunks
            .iter()
            .map(|c| c.predicate.as_str())
            .collect::<Vec<_>>(),
        [
            "(_replay_cursor <= 99) AND _replay_cursor < 25",
            "(_replay_cursor <= 99) AND _replay_cursor >= 25 AND _replay_cursor < 50",
            "(_replay_cursor <= 99) AND _replay_cursor >= 50 AND _replay_cursor < 75",
            "(_replay_cursor <= 99) AND _replay_cursor >= 75",
        ]
    );
    // Every value in the window lands in exactly one chunk, by the spans recorded.
    for value in -5_i128..=99 {
        let holding = chunks
            .iter()
            .filter(|chunk| match &chunk.span {
                ChunkSpan::Scalar {
                    from,
                    to,
                    to_inclusive,
                } => {
                    let to: i128 = to.parse().expect("number");
                    from.as_ref()
                        .is_none_or(|f| value >= f.parse::<i128>().expect("number"))
                        && if *to_inclusive {
                            value <= to
                        } else {
                            value < to
                        }
                }
                ChunkSpan::Offsets { .. } => false,
            })
            .count();
        assert_eq!(holding, 1, "value {value}");
    }
}

#[test]
fn a_time_window_keeps_its_start_in_every_chunk_and_refuses_starts_it_cannot_splice() {
    let capture = Capture::Scalar {
        cutoff: Some("2026-01-02 00:00:00.000".into()),
        lower: Some("2026-01-01 00:00:00".into()),
        first: None,
        last: None,
        rows: 10,
        captured_at: None,
    };
    let start = StartTime::read("2026-01-01T00:00:00Z").expect("start");
    let chunks = scalar_chunks(
        BoundaryMode::Timestamp,
        &capture,
        Some(&start),
        &["2026-01-01 12:00:00.000".to_owned()],
    )
    .expect("chunks");
    let window = predicate(BoundaryMode::Timestamp, &capture, Some(&start));
    assert_eq!(chunks.len(), 2);
    assert_eq!(
        chunks[0].predicate,
        format!(
            "({window}) AND _replay_timestamp < toDateTime64('2026-01-01 12:00:00.000', 3, 'UTC')"
        )
    );
    assert_eq!(
        chunks[1].predicate,
        format!(
            "({window}) AND _replay_timestamp >= toDateTime64('2026-01-01 12:00:00.000', 3, 'UTC')"
        )
    );
    for bad in [
        ["1; DROP TABLE x".to_owned()],
        ["2026-01-01 00:00:00' OR 1".to_owned()],
    ] {
        assert!(scalar_chunks(BoundaryMode::Timestamp, &capture, None, &bad).is_err());
    }
    let disordered = [
        "2026-01-01 12:00:00".to_owned(),
        "2026-01-01 06:00:00".to_owned(),
    ];
    assert!(scalar_chunks(BoundaryMode::Timestamp, &capture, None, &disordered).is_err());
    assert!(
        scalar_chunks(
            BoundaryMode::Cursor,
            &scalar("9", 9),
            None,
            &["x".to_owned()]
        )
        .is_err()
    );
}

#[test]
fn the_cut_positions_are_read_from_the_window_as_quantiles() {
    let capture = scalar("99", 100);
    let sql = starts_sql("db.input", BoundaryMode::Cursor, &capture, None, 4);
    assert_eq!(
        sql,
        "SELECT arrayJoin(starts) AS start FROM (SELECT arrayMap(q -> toString(toInt128(floor(q))), arraySort(arrayDistinct(quantiles(0.25, 0.5, 0.75)(toFloat64(_replay_cursor))))) AS starts FROM db.input WHERE _replay_cursor <= 99)"
    );
    assert_eq!(
        starts_sql("db.input", BoundaryMode::Cursor, &capture, None, 1),
        "SELECT '' AS start WHERE 0"
    );
    assert_eq!(chunk_count(0, 10), 1);
    assert_eq!(chunk_count(10, 10), 1);
    assert_eq!(chunk_count(11, 10), 2);
}

#[test]
fn only_row_wise_roots_and_merging_aggregates_are_cut() {
    assert!(chunkable(false, "MergeTree"));
    assert!(chunkable(true, "AggregatingMergeTree"));
    assert!(chunkable(
        true,
        "ReplicatedSummingMergeTree('/p', '{replica}')"
    ));
    assert!(!chunkable(true, "MergeTree"));
    assert!(!chunkable(true, "ReplacingMergeTree(version)"));
}

#[test]
fn a_chunk_s_already_written_check_reads_only_its_own_keys() {
    let template = ReplayTemplate {
        target: "db.out".into(),
        query_parts: vec!["SELECT * FROM ".into(), String::new()],
        anchor: Anchor {
            relation: "db.raw".into(),
            mode: BoundaryMode::Offsets,
            time_column: None,
            local: None,
        },
        settings: vec![("max_threads".into(), "2".into())],
        skip_existing: Some(&["_replay_partition", "_replay_offset"]),
    };
    let chunk = &offset_chunks(&offsets(&[(0, 0, 9)]), false, 5)[1];
    assert_eq!(
        template.render_chunk(chunk),
        "INSERT INTO db.out SELECT * FROM (SELECT * FROM db.raw WHERE ((_replay_partition = 0 AND _replay_offset <= 9 AND _replay_offset >= 5)) AND (_replay_partition, _replay_offset) NOT IN (SELECT _replay_partition, _replay_offset FROM db.out WHERE (_replay_partition = 0 AND _replay_offset <= 9 AND _replay_offset >= 5))) AS raw SETTINGS max_threads = 2"
    );
}
