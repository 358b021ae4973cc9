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
    paced_project(database, mode, chunk_rows, 500_000_000, "kind != 'ignored'")
}

/// [`project`] with the replays read at most `rows_per_second`, and the model's filter.
fn paced_project(
    database: &str,
    mode: &str,
    chunk_rows: u64,
    rows_per_second: u64,
    filter: &str,
) -> tempfile::TempDir {
    blocked_project(database, mode, (chunk_rows, rows_per_second), filter, "")
}

/// [`paced_project`] with `header` added to the model's header (its replay settings).
fn blocked_project(
    database: &str,
    mode: &str,
    (chunk_rows, rows_per_second): (u64, u64),
    filter: &str,
    header: &str,
) -> tempfile::TempDir {
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
                "name = \"events\"\ndefault_target = \"dev\"\n[build]\nreplay_chunk_rows = {chunk_rows}\nreplay_max_threads = 2\nreplay_max_rows_per_second = {rows_per_second}\n[targets.dev]\ndatabase = \"{database}\"\n"
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
                "MODEL (order_by [\"seq\"]{header});\nSELECT seq::UInt64 AS seq, {position}, kind::String AS kind\nFROM __source(\"events\")\nWHERE {filter}\n"
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
        recorded.contains(
            "SETTINGS max_threads = 2, max_execution_speed = 500000000, timeout_before_checking_execution_speed = 0"
        ),
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

/// Starts `stb build --events --auto-approve` on `dir` as run `invocation`, waiting on
/// evidence for running inserts as builds do by default.
fn spawn_build(dir: &Path, invocation: &str) -> std::process::Child {
    spawn_stb(dir, &["build", "--events", "--auto-approve"], invocation)
}

/// Starts `stb` with `args` on `dir` as run `invocation`, its output piped.
fn spawn_stb(dir: &Path, args: &[&str], invocation: &str) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env_remove("STREAMBUILD_LIVE_STABILIZATION_SECONDS")
        .env("STREAMBUILD_RUN_INVOCATION_ID", invocation)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns")
}

/// Reads a build's `--events` lines until `stop` holds for one (or the output ends).
fn events_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let Ok(event) = serde_json::from_str::<Value>(&line.expect("a line")) else {
            continue;
        };
        let done = stop(&event);
        seen.push(event);
        if done {
            break;
        }
    }
    seen
}

fn completed_chunk(event: &Value, chunk: u64) -> bool {
    event["event"] == "replay_chunk_completed" && event["chunk"] == chunk
}

/// `stb build --resume RUN --auto-approve --json` (with a two-second signal window: the
/// killed run counts as stopped once silent that long) and its JSON.
fn resume(dir: &Path, run: &str) -> (bool, Value) {
    let output = stb_test_support::stb_on_project_with(
        dir,
        &["build", "--resume", run, "--auto-approve", "--json"],
        "",
        &stb_test_support::SHORT_SIGNAL_WINDOW,
    );
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "JSON\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

fn lock_holder(database: &str) -> String {
    execute(&format!(
        "SELECT comment FROM system.tables WHERE database = '{database}' AND name = '_streambuild_target_mutation_lock' FORMAT TSVRaw"
    ))
    .trim()
    .to_owned()
}

/// A build killed (`SIGKILL`) while the third of six chunks runs (or a later one, on a slow
/// machine) leaves that chunk to the
/// warehouse: in offsets and cursor modes the test also kills the chunk's statement there,
/// so it stops having written part of its rows, and the resume runs it again (its
/// already-written-key check leaves those rows out); in timestamp mode (no key) the
/// statement is left to finish, and the resume waits for it and goes on after it. Either
/// way each row of the source is in the table once, under a live writer in the modes with
/// a key; the lock is given back and the models' definitions recorded (`--changed` has
/// nothing to build after it).
#[test]
fn a_build_killed_in_a_chunk_is_resumed_with_each_row_once() {
    for (mode, writer) in [("offsets", true), ("cursor", true), ("timestamp", false)] {
        let db = TestDatabase::create(&format!("resume_{mode}"));
        execute(&EVENTS.replace("{db}", &db.name));
        insert(&db.name, 0, 600_000, false);
        // About 0.7 s a chunk: the kill lands inside the third. Written in blocks of a few
        // thousand rows (not squashed into one at the end), so a chunk stopped in the
        // warehouse has written part of its rows.
        let blocks = if writer {
            ", execution_settings (replay (min_insert_block_size_rows 5000, max_block_size 5000))"
        } else {
            ""
        };
        let dir = blocked_project(
            &db.name,
            mode,
            (100_000, 150_000),
            "kind != 'ignored'",
            blocks,
        );
        let stop = Arc::new(AtomicBool::new(!writer));
        let writing = {
            let stop = Arc::clone(&stop);
            let database = db.name.clone();
            std::thread::spawn(move || {
                let mut next = 600_000;
                while !stop.load(Ordering::SeqCst) {
                    insert(&database, next, 30, true);
                    next += 30;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        };
        let invocation = format!("resume-{mode}-{}", db.name);
        let mut child = spawn_build(dir.path(), &invocation);
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        let seen = events_until(&mut lines, |e| completed_chunk(e, 2));
        assert!(
            seen.iter().any(|e| completed_chunk(e, 2)),
            "{mode}: the build reached its second chunk: {seen:?}"
        );
        let base = seen
            .iter()
            .find(|e| e["event"] == "resume_point")
            .and_then(|e| e["queryBase"].as_str())
            .expect("a resume point before the first chunk")
            .to_owned();
        // The kill lands once a later chunk runs in the warehouse (and, written in small
        // blocks, has written some of its rows): the third, unless this machine is slow to
        // look.
        let mut stopped_in = 0_u64;
        let running = stb_test_support::wait_for(std::time::Duration::from_secs(60), || {
            let running = execute(&format!(
                "SELECT query_id FROM system.processes WHERE startsWith(query_id, '{base}-') \
                 AND (written_rows > 0 OR {}) FORMAT TSV",
                u8::from(!writer)
            ));
            stopped_in = running
                .lines()
                .filter_map(|id| id.rsplit('-').next()?.parse().ok())
                .max()
                .unwrap_or(0);
            stopped_in >= 3
        });
        assert!(running, "{mode}: a chunk after the second ran");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        if writer {
            execute(&format!(
                "KILL QUERY WHERE startsWith(query_id, '{base}') SYNC FORMAT Null"
            ));
        }
        assert!(
            lock_holder(&db.name).ends_with(&invocation),
            "{mode}: the killed run holds the lock"
        );
        std::thread::sleep(stb_test_support::SHORT_SIGNAL_SILENCE);
        let (succeeded, json) = resume(dir.path(), &invocation);
        stop.store(true, Ordering::SeqCst);
        writing.join().expect("writer");
        assert!(succeeded, "{mode}: {json}");
        assert_eq!(json["status"], "succeeded", "{mode}: {json}");
        assert_eq!(json["resumedFrom"], invocation.as_str(), "{mode}");
        let checked = &json["resume"];
        eprintln!("{mode}: {checked}");
        assert_eq!(checked["stoppedInChunk"], stopped_in, "{mode}: {json}");
        let state = checked["stoppedChunkState"].as_str().unwrap_or_default();
        let expected_first = if state == "finished" {
            stopped_in + 1
        } else {
            stopped_in
        };
        assert_eq!(checked["firstChunk"], expected_first, "{mode}: {json}");
        if writer {
            // Killed in the warehouse after it wrote some rows: run again, those rows left
            // out by the key check.
            assert_eq!(state, "partly_written", "{mode}: {json}");
        } else {
            // Left to finish in the warehouse: the resume waited for it and went on after.
            assert_eq!(state, "finished", "{mode}: {json}");
        }
        assert_eq!(
            missing_and_doubled(&db.name),
            (0, 0),
            "{mode}: every row once"
        );
        assert_eq!(lock_holder(&db.name), "", "{mode}: the lock is given back");
        // Resumed once, never twice.
        let (again, refused) = resume(dir.path(), &invocation);
        assert!(!again, "{mode}");
        assert_eq!(
            refused["error"]["code"], "STB-RESUME-001",
            "{mode}: {refused}"
        );
        let output = stb_test_support::stb_on_project(
            dir.path(),
            &["build", "--changed", "--auto-approve", "--json"],
            "",
        );
        let after: Value = serde_json::from_slice(&output.stdout).expect("JSON");
        assert_eq!(after["status"], "nothing_changed", "{mode}: {after}");
    }
}

/// Ctrl-C during a chunked rebuild suspends it (the chunk in flight is killed; its rows
/// are left out by the key check when it runs again): the run ends cancelled, says how to
/// resume, and keeps the lock. A resume after the model changed is refused with what
/// changed, and nothing is touched; `stb unlock` gives the target back as the rebuild
/// found it (the first build's table and rows), after which the run cannot be resumed.
#[test]
fn a_suspended_rebuild_refuses_a_changed_model_and_unlock_gives_the_target_back() {
    let db = TestDatabase::create("resume_refused");
    execute(&EVENTS.replace("{db}", &db.name));
    insert(&db.name, 0, 600_000, false);
    let first = paced_project(
        &db.name,
        "offsets",
        100_000,
        500_000_000,
        "kind != 'ignored'",
    );
    build_with_events(first.path());
    assert_eq!(missing_and_doubled(&db.name), (0, 0));
    let rebuilt_filter = "kind != 'ignored' AND seq >= 0";
    let dir = paced_project(&db.name, "offsets", 100_000, 150_000, rebuilt_filter);
    let invocation = format!("suspend-{}", db.name);
    let rest = interrupt_after_chunk(spawn_build(dir.path(), &invocation), 2);
    let suspended = rest
        .iter()
        .find(|e| e["event"] == "replay_suspended")
        .unwrap_or_else(|| panic!("suspended: {rest:?}"));
    assert_eq!(suspended["model"], "clean");
    assert!(suspended["nextChunk"].as_u64() >= Some(3), "{suspended}");
    let ended = rest
        .iter()
        .find(|e| e["event"] == "run_completed")
        .expect("ended on record");
    assert_eq!(ended["outcome"], "cancelled");
    let message = ended["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("`stb build --resume {invocation}` finishes it")),
        "{message}"
    );
    assert!(
        lock_holder(&db.name).ends_with(&invocation),
        "the lock is kept"
    );
    // `stb status` says so, and what mends it.
    let output = stb_test_support::stb_on_project(dir.path(), &["status", "--json"], "");
    let status: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(status["target"]["state"], "suspended", "{status}");
    assert!(
        status["target"]["mend"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("stb build --resume {invocation}")),
        "{status}"
    );
    // Another build is refused at once, told how to go on.
    let output =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    let blocked: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(blocked["error"]["code"], "STB-LOCK-005", "{blocked}");
    assert!(
        blocked["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("stb build --resume {invocation}")),
        "{blocked}"
    );

    // The model changes again: the resume refuses, naming it, and changes nothing.
    let changed = paced_project(
        &db.name,
        "offsets",
        100_000,
        150_000,
        "kind != 'ignored' AND seq >= 1",
    );
    let (resumed, refused) = resume(changed.path(), &invocation);
    assert!(!resumed);
    assert_eq!(refused["error"]["code"], "STB-RESUME-002", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("'clean' changed"), "{message}");
    assert!(lock_holder(&db.name).ends_with(&invocation), "still kept");

    // Abandoned: given back at once (the run ended on record), the first build's rows.
    let output = stb_test_support::stb_on_project(dir.path(), &["unlock", "--json"], "");
    let unlocked: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(unlocked["broken_owner"], invocation.as_str(), "{unlocked}");
    assert_eq!(lock_holder(&db.name), "");
    assert_eq!(
        missing_and_doubled(&db.name),
        (0, 0),
        "the first build's table is back"
    );
    let asides = execute(&format!(
        "SELECT count() FROM system.tables WHERE database = '{}' AND endsWith(name, '__stb_prev') FORMAT TSV",
        db.name
    ));
    assert_eq!(asides.trim(), "0", "no aside left");
    let (resumed, refused) = resume(dir.path(), &invocation);
    assert!(!resumed);
    assert_eq!(refused["error"]["code"], "STB-RESUME-001", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("given back already"),
        "{refused}"
    );
}

/// Sends SIGINT to `child` once its events show chunk `after` completed, and returns the
/// rest of its events once it exited (with 130: cancelled).
fn interrupt_after_chunk(mut child: std::process::Child, after: u64) -> Vec<Value> {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let seen = events_until(&mut lines, |e| completed_chunk(e, after));
    assert!(
        seen.iter().any(|e| completed_chunk(e, after)),
        "chunk {after} completed: {seen:?}"
    );
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let rest = events_until(&mut lines, |_| false);
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(130), "recorded as cancelled: {rest:?}");
    rest
}

/// A resumed build that is interrupted in its turn is suspended again, and resumed again:
/// each run goes on from where the one before it stopped, and each row is written once.
#[test]
fn a_resumed_build_suspended_again_is_resumed_again() {
    let db = TestDatabase::create("resume_twice");
    execute(&EVENTS.replace("{db}", &db.name));
    insert(&db.name, 0, 900_000, false);
    let dir = paced_project(&db.name, "offsets", 100_000, 150_000, "kind != 'ignored'");
    let first = format!("twice-1-{}", db.name);
    let rest = interrupt_after_chunk(spawn_build(dir.path(), &first), 2);
    let suspended = rest
        .iter()
        .find(|e| e["event"] == "replay_suspended")
        .unwrap_or_else(|| panic!("suspended: {rest:?}"));
    let next = suspended["nextChunk"].as_u64().expect("next chunk");
    let second = format!("twice-2-{}", db.name);
    let resuming = spawn_stb(
        dir.path(),
        &["build", "--resume", &first, "--auto-approve", "--events"],
        &second,
    );
    let rest = interrupt_after_chunk(resuming, next + 1);
    let again = rest
        .iter()
        .find(|e| e["event"] == "replay_suspended")
        .unwrap_or_else(|| panic!("suspended again: {rest:?}"));
    assert!(again["nextChunk"].as_u64() > Some(next), "{again}");
    assert!(
        lock_holder(&db.name).ends_with(&second),
        "the second run keeps the lock"
    );
    let (succeeded, json) = resume(dir.path(), &second);
    assert!(succeeded, "{json}");
    assert_eq!(json["resumedFrom"], second.as_str());
    assert_eq!(json["resume"]["stoppedChunkState"], "recorded", "{json}");
    assert_eq!(missing_and_doubled(&db.name), (0, 0), "every row once");
    assert_eq!(lock_holder(&db.name), "");
}
