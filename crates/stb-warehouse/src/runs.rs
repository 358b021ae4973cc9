//! Runs as the lifecycle tables hold them: each invocation's event stream (summarised on
//! the warehouse's clock, so the reader's clock never matters) and its terminal row.

use std::collections::BTreeMap;

use crate::events::FOREIGN_EVENTS;
use crate::{Client, Rows, WarehouseError};

const EVENTS: &str = "_streambuild_run_events";
const INVOCATIONS: &str = "_streambuild_invocations";

/// One run, as its events and its invocation row tell it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRow {
    pub invocation_id: String,
    /// When its first event was written (UTC, `YYYY-MM-DD HH:MM:SS.fff`).
    pub started_at: Option<String>,
    pub last_event_at: Option<String>,
    /// Milliseconds since its last event, by the warehouse's clock.
    pub silent_ms: Option<i64>,
    /// The `run_started` and `run_completed` payloads, as written.
    pub run_started: Option<String>,
    pub run_completed: Option<String>,
    pub completed_statements: u64,
    pub written_rows: u64,
    /// The last `cancellation_*` event's kind, if any.
    pub cancellation: Option<String>,
    /// An operator broke its lock (`stb unlock`) after its last own event: declared gone.
    pub lock_broken: bool,
    /// The invocation row, once written.
    pub command: Option<String>,
    pub mode: Option<String>,
    pub outcome: Option<String>,
    pub duration_ms: Option<u64>,
    pub error_message: Option<String>,
    pub deployment_id: Option<String>,
    pub completed_at: Option<String>,
}

fn text(rows: &Rows, row: usize, column: &str) -> Option<String> {
    rows.text(row, column).filter(|t| !t.is_empty())
}

/// The `limit` most recent runs of `database` (by their first event, or their invocation
/// row for runs that wrote no events), newest first. Two queries.
///
/// # Errors
/// A read failed.
pub fn recent(
    client: &Client,
    database: &str,
    limit: usize,
) -> Result<Vec<RunRow>, WarehouseError> {
    read(client, database, &Which::Recent, limit)
}

/// The runs of `database` that may still be running: a `run_started`, no `run_completed`,
/// no invocation row, and an event within the last `within_ms` (older ones are presumed
/// failed whatever the windows). Newest first. Two queries.
///
/// # Errors
/// A read failed.
pub fn active(
    client: &Client,
    database: &str,
    within_ms: i64,
) -> Result<Vec<RunRow>, WarehouseError> {
    let runs = read(client, database, &Which::Active { within_ms }, 1000)?;
    Ok(runs
        .into_iter()
        .filter(|run| run.outcome.is_none())
        .collect())
}

/// Run `invocation` of `database`, if it left any record. Two queries.
///
/// # Errors
/// A read failed.
pub fn one(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<Option<RunRow>, WarehouseError> {
    Ok(read(client, database, &Which::Only(invocation), 1)?.pop())
}

/// Up to `limit` invocation ids of `database` that begin with `prefix` (a short id as
/// `stb runs list` prints it), from the event streams and the invocation rows: one query
/// over both, after a check of which of the two tables exist.
///
/// # Errors
/// A read failed.
pub fn ids_starting_with(
    client: &Client,
    database: &str,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>, WarehouseError> {
    let literal = stb_ddl::string_literal(prefix);
    let mut parts = Vec::new();
    for table in [EVENTS, INVOCATIONS] {
        if client.table_exists(database, table)? {
            parts.push(format!(
                "SELECT invocation_id FROM {} WHERE startsWith(invocation_id, {literal})",
                stb_ddl::QualifiedName::new(database, table)
            ));
        }
    }
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!(
        "SELECT DISTINCT invocation_id AS id FROM ({}) ORDER BY id LIMIT {limit}",
        parts.join(" UNION ALL ")
    ))?;
    Ok((0..rows.data.len())
        .filter_map(|r| text(&rows, r, "id"))
        .collect())
}

/// Which runs a read returns.
enum Which<'a> {
    Recent,
    Only(&'a str),
    /// Started, not completed, heard from within the last `within_ms`.
    Active {
        within_ms: i64,
    },
}

/// The runs `which` names, newest first, at most `limit`.
fn read(
    client: &Client,
    database: &str,
    which: &Which<'_>,
    limit: usize,
) -> Result<Vec<RunRow>, WarehouseError> {
    let table = stb_ddl::QualifiedName::new(database, EVENTS);
    let (filter, having) = match which {
        Which::Recent => (String::new(), String::new()),
        Which::Only(id) => (
            format!(" WHERE invocation_id = {}", stb_ddl::string_literal(id)),
            String::new(),
        ),
        // Only runs with an event inside the window can be active: the others are left
        // out before the grouping reads their events' payloads (every run the target
        // ever had).
        Which::Active { within_ms } => (
            format!(
                " WHERE invocation_id IN (SELECT invocation_id FROM {table} \
                 WHERE emitted_at >= now64(3, 'UTC') - toIntervalMillisecond({within_ms}))"
            ),
            format!(
                " HAVING countIf(event_kind = 'run_started') > 0 \
                 AND countIf(event_kind = 'run_completed') = 0 \
                 AND maxIf(emitted_at, event_kind NOT IN {FOREIGN_EVENTS}) >= now64(3, 'UTC') - toIntervalMillisecond({within_ms})"
            ),
        ),
    };
    // Read at once: a missing table (no run yet) answers as such.
    let Some(events) = client.query_if_exists(&format!(
        "SELECT invocation_id AS id, toString(min(emitted_at)) AS started_at, \
         toString(maxIf(emitted_at, event_kind NOT IN {FOREIGN_EVENTS})) AS last_at, \
         dateDiff('millisecond', maxIf(emitted_at, event_kind NOT IN {FOREIGN_EVENTS}), now64(3, 'UTC')) AS silent_ms, \
         anyIf(payload_json, event_kind = 'run_started') AS started, \
         anyIf(payload_json, event_kind = 'run_completed') AS completed, \
         countIf(event_kind = 'statement_completed') AS statements, \
         sumIf(JSONExtractUInt(payload_json, 'writtenRows'), event_kind = 'statement_completed') AS written, \
         argMaxIf(event_kind, sequence, startsWith(event_kind, 'cancellation_')) AS cancellation, \
         countIf(event_kind = 'lock_broken') > 0 AND maxIf(emitted_at, event_kind = 'lock_broken') >= maxIf(emitted_at, event_kind NOT IN {FOREIGN_EVENTS}) AS lock_broken \
         FROM {table}{filter} GROUP BY invocation_id{having} ORDER BY min(emitted_at) DESC LIMIT {limit}"
    ))?
    else {
        return Ok(Vec::new());
    };
    let mut runs: Vec<RunRow> = (0..events.data.len())
        .map(|r| RunRow {
            invocation_id: text(&events, r, "id").unwrap_or_default(),
            started_at: text(&events, r, "started_at"),
            last_event_at: text(&events, r, "last_at"),
            silent_ms: text(&events, r, "silent_ms").and_then(|v| v.parse().ok()),
            run_started: text(&events, r, "started"),
            run_completed: text(&events, r, "completed"),
            completed_statements: text(&events, r, "statements")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            written_rows: text(&events, r, "written")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            cancellation: text(&events, r, "cancellation"),
            lock_broken: text(&events, r, "lock_broken").as_deref() == Some("1"),
            ..RunRow::default()
        })
        .collect();
    let invocation_filter = match which {
        // Only the rows of the runs found: the others are not active.
        Which::Active { .. } if runs.is_empty() => return Ok(runs),
        Which::Active { .. } => format!(
            " WHERE invocation_id IN ({})",
            runs.iter()
                .map(|run| stb_ddl::string_literal(&run.invocation_id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => filter,
    };
    let invocations = client.query(&format!(
        "SELECT invocation_id AS id, command, ifNull(mode, '') AS mode, outcome, toString(duration_ms) AS duration_ms, \
         ifNull(error_message, '') AS error, ifNull(deployment_id, '') AS deployment, \
         toString(completed_at) AS completed_at, toString(started_at) AS started_at \
         FROM {}{invocation_filter} ORDER BY completed_at DESC LIMIT {limit}",
        stb_ddl::QualifiedName::new(database, INVOCATIONS)
    ));
    // A run whose invocation row was never written is still a run; an unreadable table
    // (an old target) leaves the event streams to speak alone.
    let Ok(invocations) = invocations else {
        return Ok(runs);
    };
    let mut by_id: BTreeMap<String, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, run)| (run.invocation_id.clone(), i))
        .collect();
    for r in 0..invocations.data.len() {
        let id = text(&invocations, r, "id").unwrap_or_default();
        let index = *by_id.entry(id.clone()).or_insert_with(|| {
            runs.push(RunRow {
                invocation_id: id.clone(),
                started_at: text(&invocations, r, "started_at"),
                ..RunRow::default()
            });
            runs.len() - 1
        });
        let run = &mut runs[index];
        run.command = text(&invocations, r, "command");
        run.mode = text(&invocations, r, "mode");
        run.outcome = text(&invocations, r, "outcome");
        run.duration_ms = text(&invocations, r, "duration_ms").and_then(|v| v.parse().ok());
        run.error_message = text(&invocations, r, "error");
        run.deployment_id = text(&invocations, r, "deployment");
        run.completed_at = text(&invocations, r, "completed_at");
    }
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    runs.truncate(limit);
    Ok(runs)
}

/// One event of a run, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub sequence: u64,
    pub emitted_at: String,
    pub kind: String,
    pub step_id: Option<String>,
    pub phase: Option<String>,
    pub payload: String,
}

/// Every event of `invocation`, in sequence order. One query.
///
/// # Errors
/// A read failed.
pub fn events_of(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<Vec<EventRow>, WarehouseError> {
    if !client.table_exists(database, EVENTS)? {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!(
        "SELECT toString(sequence) AS sequence_number, toString(emitted_at) AS emitted_at, event_kind, \
         ifNull(step_id, '') AS step_id, ifNull(phase, '') AS phase, payload_json \
         FROM {} WHERE invocation_id = {} ORDER BY sequence",
        stb_ddl::QualifiedName::new(database, EVENTS),
        stb_ddl::string_literal(invocation)
    ))?;
    Ok((0..rows.data.len())
        .map(|r| EventRow {
            sequence: text(&rows, r, "sequence_number")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            emitted_at: text(&rows, r, "emitted_at").unwrap_or_default(),
            kind: text(&rows, r, "event_kind").unwrap_or_default(),
            step_id: text(&rows, r, "step_id"),
            phase: text(&rows, r, "phase"),
            payload: text(&rows, r, "payload_json").unwrap_or_default(),
        })
        .collect())
}

/// What the last replay statements of a database read, and how long they took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReads {
    pub rows: u64,
    pub milliseconds: u64,
    pub statements: u64,
}

/// The rows the last `limit` replay statements of `database` read and the time they
/// took: their query ids from the run events, their figures from the server's query log
/// (read from an hour before the oldest of them on, so the server reads only that part
/// of the log, which is ordered by date and time). Two requests: the ids first, then the
/// log with them as literals (one request with the ids as a subquery made the server
/// extract them from every replay event once per use, 180 ms on a one-model project).
/// `None` when no replay finished there.
///
/// # Errors
/// The events or the query log could not be read.
pub fn recent_replay_reads(
    client: &Client,
    database: &str,
    limit: usize,
) -> Result<Option<ReplayReads>, WarehouseError> {
    let replays = client.query(&format!(
        "SELECT JSONExtractString(payload_json, 'queryId') AS id, toString(emitted_at) AS at \
         FROM {}.{EVENTS} WHERE event_kind = 'statement_started' AND startsWith(step_id, 'replay_') \
         ORDER BY emitted_at DESC LIMIT {limit}",
        stb_ddl::identifier(database)
    ))?;
    let ids: Vec<String> = (0..replays.data.len())
        .filter_map(|row| replays.text(row, "id"))
        .filter(|id| !id.is_empty())
        .map(|id| stb_ddl::string_literal(&id))
        .collect();
    // Newest first: the last row is the oldest.
    let Some(oldest) = replays
        .data
        .len()
        .checked_sub(1)
        .and_then(|row| replays.text(row, "at"))
    else {
        return Ok(None);
    };
    if ids.is_empty() {
        return Ok(None);
    }
    let oldest = format!(
        "toDateTime64({}, 3, 'UTC')",
        stb_ddl::string_literal(&oldest)
    );
    let rows = client.query(&format!(
        "SELECT sum(read_rows) AS read, sum(query_duration_ms) AS ms, count() AS replays FROM system.query_log \
         WHERE type = 'QueryFinish' AND event_date >= toDate({oldest}) - 1 \
         AND event_time >= toDateTime({oldest}) - 3600 AND query_id IN ({})",
        ids.join(", ")
    ))?;
    let number = |column: &str| rows.text(0, column).and_then(|t| t.parse::<u64>().ok());
    Ok(match (number("read"), number("ms"), number("replays")) {
        (Some(rows), Some(milliseconds), Some(statements)) if statements > 0 => Some(ReplayReads {
            rows,
            milliseconds,
            statements,
        }),
        _ => None,
    })
}
