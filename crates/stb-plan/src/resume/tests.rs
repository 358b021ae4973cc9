use std::collections::BTreeMap;

use super::*;
use crate::replay::chunks::OffsetRange;
use crate::replay::{Anchor, OffsetRun, ReplayTemplate};

fn root(mode: BoundaryMode, keyed: bool, propagated: &[&str]) -> RootReplay {
    RootReplay {
        model: "clean".into(),
        driving_input: "events".into(),
        propagated: propagated.iter().map(|m| (*m).to_owned()).collect(),
        capture_sql: "SELECT 1".into(),
        template: ReplayTemplate {
            target: "db.tbl__clean".into(),
            query_parts: vec!["SELECT * FROM ".into(), String::new()],
            anchor: Anchor {
                relation: "db.events".into(),
                mode,
                time_column: None,
                local: None,
            },
            settings: Vec::new(),
            skip_existing: keyed.then_some(&["_replay_partition", "_replay_offset"][..]),
        },
        stage: 0,
        waits_for: Vec::new(),
        bounded: true,
        start_time: None,
        rebuilt_input: false,
        seed: None,
        chunk_rows: Some(100),
    }
}

#[test]
fn a_finished_chunk_is_not_run_again_and_one_that_wrote_nothing_is() {
    let keyless = root(BoundaryMode::Timestamp, false, &[]);
    assert_eq!(resume_at(&keyless, 3, ChunkState::Finished), Ok(4));
    assert_eq!(resume_at(&keyless, 3, ChunkState::NotWritten), Ok(3));
}

#[test]
fn a_chunk_that_wrote_some_rows_runs_again_only_where_its_keys_leave_them_out() {
    let keyed = root(BoundaryMode::Offsets, true, &[]);
    assert_eq!(resume_at(&keyed, 2, ChunkState::Written(Some(10))), Ok(2));
    assert_eq!(resume_at(&keyed, 2, ChunkState::Written(None)), Ok(2));
    let keyless = root(BoundaryMode::Timestamp, false, &[]);
    let refused = resume_at(&keyless, 2, ChunkState::Written(Some(10))).expect_err("refused");
    assert!(refused.contains("chunk 2 of the replay of 'clean' stopped after it wrote 10 rows"));
    assert!(
        refused.contains("no lineage key (timestamp boundary)"),
        "{refused}"
    );
    // The cascade fed the models below: their rows cannot be left out by the root's keys.
    let fed = root(BoundaryMode::Offsets, true, &["daily"]);
    let refused = resume_at(&fed, 2, ChunkState::Written(None)).expect_err("refused");
    assert!(refused.contains("an unknown number of rows"), "{refused}");
    assert!(refused.contains("models below it (daily)"), "{refused}");
}

#[test]
fn chunk_query_ids_are_known_before_the_chunks_run() {
    assert_eq!(chunk_query_id("q", 1), "q");
    assert_eq!(chunk_query_id("q", 7), "q-7");
}

fn offsets_chunks() -> (Capture, Vec<Chunk>) {
    let capture = Capture::Offsets {
        runs: vec![
            OffsetRun {
                partition: 0,
                lower: 10,
                upper: 99,
            },
            OffsetRun {
                partition: 1,
                lower: 5,
                upper: 50,
            },
        ],
        captured_at: None,
    };
    let chunk = |ranges: Vec<OffsetRange>| Chunk {
        predicate: "1".into(),
        span: ChunkSpan::Offsets { ranges },
    };
    let chunks = vec![
        chunk(vec![OffsetRange {
            partition: 0,
            lower: None,
            upper: 49,
        }]),
        chunk(vec![
            OffsetRange {
                partition: 0,
                lower: Some(50),
                upper: 99,
            },
            OffsetRange {
                partition: 1,
                lower: None,
                upper: 50,
            },
        ]),
    ];
    (capture, chunks)
}

#[test]
fn offsets_the_remaining_chunks_need_must_still_be_retained() {
    let (capture, chunks) = offsets_chunks();
    let earliest = |pairs: &[(i128, &str)]| -> BTreeMap<Option<i128>, String> {
        pairs
            .iter()
            .map(|(p, o)| (Some(*p), (*o).to_owned()))
            .collect()
    };
    let mode = BoundaryMode::Offsets;
    // From chunk 2: partition 0 from 50, partition 1 from its first offset at the capture.
    assert_eq!(
        check_retained(
            mode,
            &capture,
            &chunks,
            2,
            &earliest(&[(0, "40"), (1, "5")])
        ),
        Ok(())
    );
    let lost = check_retained(
        mode,
        &capture,
        &chunks,
        2,
        &earliest(&[(0, "40"), (1, "9")]),
    )
    .expect_err("refused");
    assert!(
        lost.contains("partition 1 now starts at offset 9, the replay needs 5"),
        "{lost}"
    );
    let lost =
        check_retained(mode, &capture, &chunks, 1, &earliest(&[(1, "5")])).expect_err("refused");
    assert!(
        lost.contains("partition 0 holds no rows any more"),
        "{lost}"
    );
    // Integers compare as numbers, not text.
    assert_eq!(
        check_retained(mode, &capture, &chunks, 2, &earliest(&[(0, "9"), (1, "5")])),
        Ok(())
    );
}

#[test]
fn a_time_window_needs_its_next_chunk_s_start_still_retained() {
    let capture = Capture::Scalar {
        cutoff: Some("2026-11-01 00:10:00.000".into()),
        lower: None,
        first: Some("2026-11-01 00:00:00.000".into()),
        last: Some("2026-11-01 00:10:00.000".into()),
        rows: 600,
        captured_at: None,
    };
    let chunk = |from: Option<&str>, to: &str| Chunk {
        predicate: "1".into(),
        span: ChunkSpan::Scalar {
            from: from.map(str::to_owned),
            to: to.into(),
            to_inclusive: false,
        },
    };
    let chunks = vec![
        chunk(None, "2026-11-01 00:05:00.000"),
        chunk(Some("2026-11-01 00:05:00.000"), "2026-11-01 00:10:00.000"),
    ];
    let earliest = |at: &str| BTreeMap::from([(None, at.to_owned())]);
    let mode = BoundaryMode::Timestamp;
    assert_eq!(
        check_retained(
            mode,
            &capture,
            &chunks,
            2,
            &earliest("2026-11-01 00:04:00.000")
        ),
        Ok(())
    );
    assert!(
        check_retained(mode, &capture, &chunks, 1, &earliest("2026-11-01 00:04:00.000"))
            .expect_err("refused")
            .contains("the input now starts at 2026-11-01 00:04:00.000, the replay needs 2026-11-01 00:00:00.000")
    );
}
