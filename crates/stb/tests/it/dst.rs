//! `--start-time` is a UTC instant whatever the warehouse's time zone: a warehouse in
//! America/New_York (every statement of the build runs with `session_timezone`, and the
//! adopted table's event time has no zone of its own and was created in New York time, so
//! it reads in New York time; a model checks that it does) keeps
//! the instant across the spring gap and the repeated fall hour. The reference mis-selected
//! the repeated November hour.
//!
//! The instants are fixed past dates: the table has no TTL, the timestamp mode's only
//! clock comparison (`<= now()`) is always met by a past instant, and each start time lies
//! between the instants themselves, so no date can expire them.

use serde_json::Value;
use stb_test_support::{TestDatabase, execute, execute_at, stack};

/// Partition 0, offsets 1..6: 01:30 EST and 03:30 EDT around the spring gap, then
/// 01:30 EDT, 01:00 EST, 01:30 EST and 02:00 EST around the repeated fall hour.
const INSTANTS: [&str; 6] = [
    "2026-03-08 06:30:00",
    "2026-03-08 07:30:00",
    "2026-11-01 05:30:00",
    "2026-11-01 06:00:00",
    "2026-11-01 06:30:00",
    "2026-11-01 07:00:00",
];

fn project(database: &str, mode: &str, pipeline_mode: &str) -> tempfile::TempDir {
    let (columns, lineage) = match mode {
        "offsets" => (
            "_replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts",
            "_replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, ",
        ),
        _ => ("_replay_timestamp: ts", ""),
    };
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!(
                "name = \"ny\"\ndefault_target = \"dev\"\n[defaults]\npipeline_mode = \"{pipeline_mode}\"\n[connection]\nsettings = {{ session_timezone = \"America/New_York\" }}\n[targets.dev]\ndatabase = \"{database}\"\n"
            ),
        ),
        (
            "sources/events.yml".to_owned(),
            format!(
                "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: {mode}\n      columns:\n        {columns}\n"
            ),
        ),
        (
            "pipelines/pl__ny/clean.sql".to_owned(),
            format!(
                "MODEL (order_by [\"o\"]);\nSELECT p::UInt32 AS p, o::UInt64 AS o, toHour(ts)::UInt8 AS local_hour, {lineage}_replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp\nFROM __source(\"events\")\n"
            ),
        ),
    ];
    stb_test_support::project_dir(&files)
}

fn offsets(sql: &str) -> Vec<u64> {
    execute(&format!("{sql} ORDER BY o FORMAT TSV"))
        .lines()
        .map(|l| l.parse().expect("offset"))
        .collect()
}

fn build(dir: &std::path::Path, start: Option<&str>) -> Value {
    let mut args = vec!["build", "--auto-approve", "--json"];
    if let Some(start) = start {
        args.extend(["--select", "clean", "--start-time", start]);
    }
    let output = stb_test_support::stb_on_project(dir, &args, "");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// (mode, start time, offsets replayed from the start on)
const CASES: [(&str, &str, &[u64]); 4] = [
    // 07:00Z is 03:00 EDT; read as New York time it would be 11:00Z.
    ("timestamp", "2026-03-08T07:00:00Z", &[2, 3, 4, 5, 6]),
    // 06:15Z is the second 01:15 (EST); the first (EDT) would keep offset 4 too.
    ("timestamp", "2026-11-01T06:15:00Z", &[5, 6]),
    // The last offset at or before T opens the window: offset 1 (06:30Z).
    ("offsets", "2026-03-08T07:00:00Z", &[1, 2, 3, 4, 5, 6]),
    // 06:00Z (offset 4) is the last at or before 06:15Z; 01:15 EDT would open at 2.
    ("offsets", "2026-11-01T06:15:00Z", &[4, 5, 6]),
];

/// A database whose adopted `events` table holds [`INSTANTS`] in New York time, and a
/// project over it that has been built once.
fn built(mode: &str, pipeline_mode: &str) -> (TestDatabase, tempfile::TempDir, Value) {
    let db = TestDatabase::create(&format!("dst_{mode}"));
    // Created in New York time, as on a server whose zone it is: the zone a column
    // without one reads in is fixed when its table is created.
    execute_at(
        &format!(
            "{}?session_timezone=America/New_York",
            stack().clickhouse_url
        ),
        &format!(
            "CREATE TABLE {}.events (p UInt32, o UInt64, ts DateTime64(3)) ENGINE = MergeTree ORDER BY (p, o)",
            db.name
        ),
    );
    let values: Vec<String> = INSTANTS
        .iter()
        .zip(1..)
        .map(|(instant, offset)| format!("(0, {offset}, toDateTime64('{instant}', 3, 'UTC'))"))
        .collect();
    execute(&format!(
        "INSERT INTO {}.events VALUES {}",
        db.name,
        values.join(", ")
    ));
    let dir = project(&db.name, mode, pipeline_mode);
    let result = build(dir.path(), None);
    (db, dir, result)
}

#[test]
fn start_times_keep_their_utc_instant_on_a_new_york_warehouse() {
    for (mode, start, expected) in CASES {
        let (db, dir, _) = built(mode, "direct");
        let table = format!("SELECT o FROM {}.tbl__clean", db.name);
        assert_eq!(offsets(&table), [1, 2, 3, 4, 5, 6], "{mode}");
        // The build ran in New York time: 06:00Z is hour 1 there.
        let hour = execute(&format!(
            "SELECT local_hour FROM {}.tbl__clean WHERE o = 4 FORMAT TSV",
            db.name
        ));
        assert_eq!(hour.trim(), "1", "{mode}");
        let result = build(dir.path(), Some(start));
        let utc = start.replace('T', " ").replace('Z', ".000");
        assert_eq!(result["start_time"], utc.as_str(), "{mode} {start}");
        assert_eq!(offsets(&table), expected, "{mode} {start}: {result}");
    }
}

/// A virtual deployment bounded by a start time replays from the same position and takes
/// every row before it from the active copy: the new copy holds all six rows, and a column
/// only the replay writes (the seed leaves its default) shows where the split fell.
#[test]
fn seeded_deployments_split_at_the_same_utc_instant_on_a_new_york_warehouse() {
    for (mode, start, expected) in CASES {
        let (db, dir, first) = built(mode, "virtual");
        let first = first["deployment_id"].as_str().expect("id").to_owned();
        let promoted = stb_test_support::stb_on_project(
            dir.path(),
            &["deployment", "promote", &first, "--json"],
            "",
        );
        assert!(promoted.status.success(), "{mode}");
        let model = dir.path().join("pipelines/pl__ny/clean.sql");
        let text = std::fs::read_to_string(&model).expect("model");
        std::fs::write(
            &model,
            text.replace(" AS local_hour, ", " AS local_hour, 1::UInt8 AS replayed, "),
        )
        .expect("write");
        let result = build(dir.path(), Some(start));
        let second = result["deployment_id"].as_str().expect("id");
        assert_eq!(result["seeds"][0]["model"], "clean", "{result}");
        let copy = format!("SELECT o FROM {}.tbl__clean__{second}", db.name);
        assert_eq!(
            offsets(&copy),
            [1, 2, 3, 4, 5, 6],
            "{mode} {start}: {result}"
        );
        assert_eq!(
            offsets(&format!("{copy} WHERE replayed = 1")),
            expected,
            "{mode} {start}: {result}"
        );
    }
}
