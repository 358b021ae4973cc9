//! `stb init`: the files of a new project that builds on the local stack as it is written
//! (`stb local up`'s default ports), with a test and an audit that pass once it has data.
//!
//! [`files`] is pure (the project's files as text); [`write`] puts them in a directory,
//! refusing to overwrite anything a user wrote.

use std::path::{Path, PathBuf};

/// Which kind of source the new project reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A managed Kafka landing: events from a topic land in a retained table.
    Kafka,
    /// An adopted stream table: a ClickHouse table something else fills.
    Adopted,
}

/// One file of a new project: its path relative to the project directory and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaffoldFile {
    pub path: PathBuf,
    pub text: String,
}

/// The table an adopted project reads; `stb init --adopted` prints its DDL.
pub const ADOPTED_TABLE: &str = "events_in";

/// The project name `dir` suggests: its last component, lowercased, with every character
/// that is not a letter, digit or underscore replaced by `_` (a leading digit gets a `p_`).
#[must_use]
pub fn name_for(dir: &Path) -> String {
    let stem = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    sanitize(&stem)
}

fn sanitize(raw: &str) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    name = name.trim_matches('_').to_owned();
    if name.is_empty() {
        return "my_project".to_owned();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "p_");
    }
    name
}

/// The database a new project's `dev` target builds into.
#[must_use]
pub fn database_for(name: &str) -> String {
    format!("{name}_dev")
}

/// The topic a new Kafka project reads.
#[must_use]
pub fn topic_for(name: &str) -> String {
    format!("{name}.events")
}

/// The DDL of the table an adopted project reads, in `database`.
#[must_use]
pub fn adopted_table_ddl(database: &str) -> String {
    format!(
        "CREATE TABLE `{database}`.{ADOPTED_TABLE} (event_id String, kind LowCardinality(String), \
         amount UInt64, event_time DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY (event_time, event_id)"
    )
}

/// Every file of a new project named `name` (already a valid identifier, see [`name_for`])
/// whose pipeline builds in `mode` (`direct` or `virtual`).
#[must_use]
pub fn files(name: &str, kind: SourceKind, mode: crate::project_config::Mode) -> Vec<ScaffoldFile> {
    let database = database_for(name);
    let file = |path: &str, text: String| ScaffoldFile {
        path: PathBuf::from(path),
        text,
    };
    vec![
        file(
            "streambuild_project.toml",
            project_toml(name, &database, mode),
        ),
        file("streambuild_local.toml", LOCAL_TOML.to_owned()),
        file(".gitignore", GITIGNORE.to_owned()),
        file("sources/events.yml", sources_yml(name, kind)),
        file("pipelines/pl__events/events_parsed.sql", parsed_sql(kind)),
        file(
            "pipelines/pl__events/amount_per_kind.sql",
            AMOUNT_PER_KIND_SQL.to_owned(),
        ),
        file("tests/amount_per_kind.sql", TEST_SQL.to_owned()),
        file(
            "audits/amount_per_kind_matches_events.sql",
            AUDIT_SQL.to_owned(),
        ),
    ]
}

/// Why a project could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{} already exists; stb init never overwrites a file", .0.display())]
    Exists(PathBuf),
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `files` under `dir` (created when missing). Refuses, before writing anything,
/// when a project already lives there or any file but `.gitignore` exists; an existing
/// `.gitignore` gets the lines it lacks appended. Returns the paths written.
///
/// # Errors
/// [`ScaffoldError::Exists`] when something would be overwritten; [`ScaffoldError::Io`].
pub fn write(dir: &Path, files: &[ScaffoldFile]) -> Result<Vec<PathBuf>, ScaffoldError> {
    let existing_project = dir.join(crate::project_config::FILE_NAME);
    if existing_project.exists() {
        return Err(ScaffoldError::Exists(existing_project));
    }
    if let Some(taken) = files
        .iter()
        .map(|f| dir.join(&f.path))
        .find(|p| p.exists() && !is_gitignore(p))
    {
        return Err(ScaffoldError::Exists(taken));
    }
    let mut written: Vec<PathBuf> = Vec::with_capacity(files.len());
    for file in files {
        if let Err(error) = write_one(dir, file) {
            // Nothing half-made stays behind: the files this call created go again (an
            // existing .gitignore keeps the lines it was given).
            for made in written.iter().filter(|m| !is_gitignore(m)) {
                let _ = std::fs::remove_file(dir.join(made));
            }
            return Err(error);
        }
        written.push(file.path.clone());
    }
    Ok(written)
}

/// Writes one file: a new file only (`create_new`, so a file that appeared since the
/// checks is never overwritten), except `.gitignore`, which gets the lines it lacks.
fn write_one(dir: &Path, file: &ScaffoldFile) -> Result<(), ScaffoldError> {
    use std::io::Write as _;
    let path = dir.join(&file.path);
    let io = |source| ScaffoldError::Io {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    if is_gitignore(&path) && path.exists() {
        let current = std::fs::read_to_string(&path).map_err(io)?;
        return std::fs::write(&path, merged_gitignore(&current, &file.text)).map_err(io);
    }
    let mut created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                ScaffoldError::Exists(path.clone())
            } else {
                io(source)
            }
        })?;
    created.write_all(file.text.as_bytes()).map_err(io)
}

fn is_gitignore(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == ".gitignore")
}

/// `current` with the lines of `wanted` it lacks appended (comments only when new).
fn merged_gitignore(current: &str, wanted: &str) -> String {
    let have: Vec<&str> = current.lines().map(str::trim).collect();
    let missing: Vec<&str> = wanted
        .lines()
        .filter(|line| !line.starts_with('#') && !have.contains(&line.trim()))
        .collect();
    if missing.is_empty() {
        return current.to_owned();
    }
    let mut text = current.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for line in missing {
        text.push_str(line);
        text.push('\n');
    }
    text
}

fn project_toml(name: &str, database: &str, mode: crate::project_config::Mode) -> String {
    let mode = mode.as_str();
    format!(
        r#"# Written by `stb init`; docs/project.md describes every key.
name = "{name}"
default_target = "dev"

[defaults]
# direct: a build rebuilds relations in place; virtual: it stages a deployment beside
# production that `stb deployment promote` switches readers to (docs/concepts.md).
pipeline_mode = "{mode}"
kafka_broker_list = "${{kafka_brokers}}"

[vars]
# The broker `stb local up` starts; streambuild_local.toml (yours alone) may point elsewhere.
kafka_brokers = "127.0.0.1:9092"

[targets.dev]
database = "{database}"
"#
    )
}

const LOCAL_TOML: &str = r#"# Your own settings for this checkout, never committed (see .gitignore).
# The connection `stb local up` serves; STREAMBUILD_CLICKHOUSE_HOST / _PORT override it.
[connection]
host = "127.0.0.1"
port = 8123
"#;

// Compile output, each developer's own settings, and the dev server's control store
// (accounts, password hashes, sessions: `.streambuild/control.db`).
const GITIGNORE: &str = "# Compile output, your own settings, the dev server's accounts.\ntarget/\nstreambuild_local.toml\n.streambuild/\n";

fn sources_yml(name: &str, kind: SourceKind) -> String {
    match kind {
        SourceKind::Kafka => format!(
            r#"sources:
  # Events from a Kafka topic land in a retained table; models read it with
  # __source("events"), and a rebuild replays that history exactly once.
  - name: events
    kind: kafka
    topic: {topic}
    replay_boundary:
      mode: offsets
    # A landed row expires 30 days after its message timestamp.
    retention:
      duration: 30d
      fallback: landed
"#,
            topic = topic_for(name)
        ),
        SourceKind::Adopted => format!(
            r#"sources:
  # A table something else fills (`stb init --adopted` printed its DDL). StreamBuild
  # reads it and never changes it; a rebuild replays it by event time.
  - name: events
    kind: stream_table
    table_name: {ADOPTED_TABLE}
    replay_boundary:
      mode: timestamp
      columns:
        _replay_timestamp: event_time
"#
        ),
    }
}

fn parsed_sql(kind: SourceKind) -> String {
    match kind {
        SourceKind::Kafka => r#"MODEL (
  description "Every event, parsed once from the landing table",
  order_by ["event_id", "_replay_partition", "_replay_offset"],
  columns (
    event_id (description "Unique per event", audits [not_null]),
  ),
);

SELECT
  JSONExtractString(kafka_value, 'event_id')::String AS event_id,
  JSONExtractString(kafka_value, 'kind')::LowCardinality(String) AS kind,
  JSONExtractUInt(kafka_value, 'amount')::UInt64 AS amount,
  _replay_partition::Int32 AS _replay_partition,
  _replay_offset::Int64 AS _replay_offset
FROM __source("events")
"#
        .to_owned(),
        SourceKind::Adopted => r#"MODEL (
  description "Every event of the adopted table, with its kind normalised",
  order_by ["event_id", "_replay_timestamp"],
  columns (
    event_id (description "Unique per event", audits [not_null]),
  ),
);

SELECT
  event_id::String AS event_id,
  lower(kind)::LowCardinality(String) AS kind,
  amount::UInt64 AS amount,
  _replay_timestamp::DateTime64(3) AS _replay_timestamp
FROM __source("events")
"#
        .to_owned(),
    }
}

const AMOUNT_PER_KIND_SQL: &str = r#"MODEL (
  description "Events and their total amount per kind, added up as events arrive",
  engine "SummingMergeTree",
  order_by ["kind"],
);

SELECT
  kind::String AS kind,
  count()::UInt64 AS events,
  sum(amount)::UInt64 AS total_amount
FROM __ref("events_parsed")
GROUP BY kind
"#;

const TEST_SQL: &str = r#"TEST (name amount_per_kind_adds_up_each_kind);
-- `stb test` rebuilds amount_per_kind from these mock rows and compares the result with
-- the expected rows as a multiset (nothing is created in the warehouse).
WITH
  __ref__events_parsed AS (
    SELECT 'e1' AS event_id, 'click' AS kind, toUInt64(2) AS amount
    UNION ALL SELECT 'e2', 'click', 3
    UNION ALL SELECT 'e3', 'view', 1
  ),
  __expected__amount_per_kind AS (
    SELECT 'click' AS kind, toUInt64(2) AS events, toUInt64(5) AS total_amount
    UNION ALL SELECT 'view', 1, 1
  )
SELECT 1
"#;

const AUDIT_SQL: &str = r#"AUDIT (name amount_per_kind_matches_events, severity error);
-- Kinds whose total differs from the sum of their events' amounts: none expected.
SELECT s.kind, s.total, e.total AS events_total
FROM (SELECT kind, sum(total_amount) AS total FROM __ref("amount_per_kind") GROUP BY kind) AS s
FULL OUTER JOIN (SELECT kind, sum(amount) AS total FROM __ref("events_parsed") GROUP BY kind) AS e
  ON s.kind = e.kind
WHERE s.total != e.total
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project_config::Mode;

    #[test]
    fn a_directory_name_becomes_an_identifier() {
        assert_eq!(sanitize("My-Events Project"), "my_events_project");
        assert_eq!(sanitize("2024-data"), "p_2024_data");
        assert_eq!(sanitize("---"), "my_project");
        assert_eq!(sanitize("shop"), "shop");
    }

    #[test]
    fn an_existing_gitignore_gets_only_the_lines_it_lacks() {
        assert_eq!(
            merged_gitignore("node_modules\ntarget/", GITIGNORE),
            "node_modules\ntarget/\nstreambuild_local.toml\n.streambuild/\n"
        );
        let complete = "target/\nstreambuild_local.toml\n.streambuild/\n";
        assert_eq!(merged_gitignore(complete, GITIGNORE), complete);
    }

    #[test]
    fn nothing_is_written_over_a_file_a_user_wrote() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("sources")).expect("mkdir");
        std::fs::write(dir.path().join("sources/events.yml"), "mine").expect("write");
        let error =
            write(dir.path(), &files("p", SourceKind::Kafka, Mode::Direct)).expect_err("refused");
        assert!(matches!(error, ScaffoldError::Exists(ref p) if p.ends_with("sources/events.yml")));
        assert!(!dir.path().join("streambuild_project.toml").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sources/events.yml")).expect("read"),
            "mine"
        );
    }
}
