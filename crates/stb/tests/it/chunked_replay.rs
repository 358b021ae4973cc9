//! Chunked replays (`[build] replay_chunk_rows`): a root's window replayed by several
//! statements under a live writer holds every row of the source exactly once, in offsets,
//! cursor and timestamp modes; each chunk is reported by a `replay_chunk_completed`
//! event, and the replays' throttles reach every statement.
//!
//! The fixed instants cannot expire: the tables have no TTL and the only comparison with
//! the clock is the timestamp mode's `<= now()` cutoff, which a past instant always meets.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use stb_test_support::{TestDatabase, execute};

const EVENTS: &str = "CREATE TABLE {db}.events_existing (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), seq UInt64, kind String) ENGINE = MergeTree ORDER BY (p, o)";

/// Rows `first..first + count` (by `seq`): three partitions, offsets increasing in each,
/// one millisecond apart from a fixed past instant; a writer goes on from where they end.
fn insert(database: &str, first: u64, count: u64, live: bool) {
    let ts = if live {
        "now64(3, 'UTC')".to_owned()
    } else {
        "toDateTime64('2026-11-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(number)".to_owned()
    };
    execute(&format!(
        "INSERT INTO {database}.events_existing SELECT number % 3, intDiv(number, 3), {ts}, number, ['a', 'b', 'ignored'][number % 7 % 3 + 1] FROM numbers({first}, {count})"
    ));
}

fn project(database: &str, mode: &str, chunk_rows: u64) -> tempfile::TempDir {
    let (mapping, position) = match mode {
        "offsets" => (
            "_replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts",
            "_replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset",
        ),
        "cursor" => (
            "_replay_cursor: seq\n        _replay_timestamp: ts",
            "_replay_cursor::UInt64 AS _replay_cursor",
        ),
        _ => (
            "_replay_timestamp: ts",
            "_replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp",
        ),
    };
    stb_test_support::project_dir(&[
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"events\"\ndefault_target = \"dev\"\n[build]\nreplay_chunk_rows = {chunk_rows}\nreplay_max_threads = 2\nreplay_max_rows_per_second = 500000000\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/events.yml".to_owned(),
            format!(
                "sources:\n  - name: events\n    kind: stream_table\n    table_name: events_existing\n    replay_boundary:\n      mode: {mode}\n      columns:\n        {mapping}\n"
            ),
        ),
        (
            "pipelines/pl__events/clean.sql".to_owned(),
            format!(
                "MODEL (order_by [\"seq\"]);\nSELECT seq::UInt64 AS seq, {position}, kind::String AS kind\nFROM __source(\"events\")\nWHERE kind != 'ignored'\n"
            ),
        ),
    ])
}

/// `stb build --events --auto-approve` of the project: its events, one per line.
fn build_with_events(dir: &Path) -> Vec<Value> {
    let output =
        stb_test_support::stb_on_project(dir, &["build", "--events", "--auto-approve"], "");
    assert!(
        output.status.success(),
        "build failed\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect()
}

/// (missing, doubled) rows of the model's table against its query over the source.
fn missing_and_doubled(database: &str) -> (u64, u64) {
    let diff = execute(&format!(
        "SELECT sumIf(e - a, e > a), sumIf(a - e, a > e) FROM (\
         SELECT seq, sum(expected) AS e, sum(actual) AS a FROM (\
         SELECT seq, 1 AS expected, 0 AS actual FROM {database}.events_existing WHERE kind != 'ignored' \
         UNION ALL SELECT seq, 0, 1 FROM {database}.tbl__clean) GROUP BY seq) FORMAT TSV"
    ));
    let mut numbers = diff.split_whitespace().map(|n| n.parse().expect("count"));
    (
        numbers.next().expect("missing"),
        numbers.next().expect("doubled"),
    )
}

/// Builds the project of `mode` over `rows` rows with chunks of `chunk_rows`, while a
/// writer inserts rows when `writer`; returns the chunk events once the writer stopped and
/// the table was compared with the source.
fn chunked_build(mode: &str, rows: u64, chunk_rows: u64, writer: bool) -> Vec<Value> {
    let db = TestDatabase::create(&format!("chunked_{mode}"));
    execute(&EVENTS.replace("{db}", &db.name));
    insert(&db.name, 0, rows, false);
    let dir = project(&db.name, mode, chunk_rows);
    let stop = Arc::new(AtomicBool::new(!writer));
    let writing = {
        let stop = Arc::clone(&stop);
        let database = db.name.clone();
        std::thread::spawn(move || {
            let mut next = rows;
            while !stop.load(Ordering::SeqCst) {
                insert(&database, next, 30, true);
                next += 30;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            next - rows
        })
    };
    let events = build_with_events(dir.path());
    stop.store(true, Ordering::SeqCst);
    let written_live = writing.join().expect("writer");
    let (missing, doubled) = missing_and_doubled(&db.name);
    eprintln!(
        "{mode}: {rows} rows, {written_live} written meanwhile, {missing} missing, {doubled} doubled"
    );
    assert!(
        !writer || written_live > 0,
        "{mode}: the writer wrote during the build"
    );
    assert_eq!((missing, doubled), (0, 0), "{mode}: every row once");
    let announced: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "statement_started" && e["stepId"] == "replay_clean")
        .collect();
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| e["event"] == "replay_chunk_completed")
        .cloned()
        .collect();
    // Each chunk is announced under the query id it completes with.
    assert_eq!(
        announced
            .iter()
            .map(|e| e["queryId"].clone())
            .collect::<Vec<_>>(),
        chunks
            .iter()
            .map(|e| e["queryId"].clone())
            .collect::<Vec<_>>(),
        "{mode}"
    );
    let numbers: Vec<u64> = chunks.iter().filter_map(|e| e["chunk"].as_u64()).collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "{mode}: every chunk once, in order");
    assert!(
        chunks
            .iter()
            .all(|e| e["chunks"].as_u64() == Some(numbers.len() as u64)
                && e["model"] == "clean"
                && e["writtenRows"].is_u64()),
        "{mode}: {chunks:?}"
    );
    // The statements recorded for the replay are the chunks' own, throttled.
    let recorded = execute(&format!(
        "SELECT sql FROM {}._streambuild_run_statements FINAL WHERE step_id = 'replay_clean' FORMAT TSVRaw",
        db.name
    ));
    assert_eq!(
        recorded.matches("INSERT INTO").count(),
        numbers.len(),
        "{mode}: {recorded}"
    );
    assert!(
        recorded.contains("SETTINGS max_threads = 2, max_execution_speed = 500000000"),
        "{mode}: {recorded}"
    );
    chunks
}

#[test]
fn an_offsets_replay_of_five_million_rows_in_chunks_under_a_writer_holds_each_row_once() {
    let chunks = chunked_build("offsets", 5_000_000, 1_000_000, true);
    // About 1,666,667 offsets in each of three partitions (and what the writer added
    // before the capture), a million to a chunk: partitions are cut, and chunks shared.
    assert!((5..=6).contains(&chunks.len()), "{chunks:?}");
    let ranges: Vec<usize> = chunks
        .iter()
        .filter_map(|e| e["span"]["ranges"].as_array().map(Vec::len))
        .collect();
    assert_eq!(ranges.len(), chunks.len(), "{chunks:?}");
    assert!(ranges.iter().any(|n| *n > 1), "{chunks:?}");
}

/// A timestamp replay is built without a writer: rows that land between the new view's
/// creation and the capture carry times inside the window, so the view and the replay
/// both write them, chunked or not (timestamps are not unique: there is no written-key
/// check to leave them out).
#[test]
fn cursor_and_timestamp_replays_in_chunks_hold_each_row_once() {
    for (mode, writer) in [("cursor", true), ("timestamp", false)] {
        let chunks = chunked_build(mode, 600_000, 100_000, writer);
        // Cut at sampled quantiles: about six chunks (seven with what the writer added
        // before the capture), never one.
        assert!((3..=7).contains(&chunks.len()), "{mode}: {chunks:?}");
        let last = chunks.last().expect("a last chunk");
        assert_eq!(
            last["span"]["toInclusive"], true,
            "{mode}: closed at the cutoff"
        );
        assert!(
            chunks[..chunks.len() - 1]
                .iter()
                .all(|e| e["span"]["toInclusive"] == false),
            "{mode}: {chunks:?}"
        );
    }
}
