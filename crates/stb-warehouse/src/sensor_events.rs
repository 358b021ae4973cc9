//! The events sensors react to, derived from what the warehouse records, never emitted:
//! `AuditCompleted` from `_streambuild_node_results` (audits only; a deferred result is no
//! event and no previous status) and `RunCompleted` from `_streambuild_invocations` (the
//! observed commands only). Each stream is read per named target, ordered by completion
//! time and id, in pages, up to a head captured when a pass begins.

use serde_json::{Value, json};

use crate::{Client, WarehouseError};

/// A place in a stream: an event's completion time as written and its id. The epoch and
/// an empty id are before every event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub at: String,
    pub id: String,
}

/// Events read per request.
pub const PAGE: usize = 50;

/// The commands a `RunCompleted` reports.
pub const OBSERVED_COMMANDS: &[&str] = &[
    "audit",
    "test",
    "build",
    "deployment promote",
    "janitor",
    "destroy pipelines",
    "reset target",
];

/// The statuses an audit result counts as failing for transitions (a warning too, since
/// the reference's 0.26.10).
const FAILING: &[&str] = &["failed", "error", "warning"];

/// Which records a sensor's events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Audits,
    Runs,
}

impl Stream {
    /// For a sensor's `eventType`.
    #[must_use]
    pub fn of(event_type: &str) -> Option<Self> {
        match event_type {
            "AuditCompleted" => Some(Self::Audits),
            "RunCompleted" => Some(Self::Runs),
            _ => None,
        }
    }

    /// The stream's name in a checkpoint (`node_results`, `invocations`).
    #[must_use]
    pub fn source(self) -> &'static str {
        match self {
            Self::Audits => "node_results",
            Self::Runs => "invocations",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Self::Audits => "_streambuild_node_results",
            Self::Runs => "_streambuild_invocations",
        }
    }

    fn id_column(self) -> &'static str {
        match self {
            Self::Audits => "result_id",
            Self::Runs => "invocation_id",
        }
    }

    /// The rows of this stream for `target`.
    fn filter(self, target: &str) -> String {
        let target = stb_ddl::string_literal(target);
        match self {
            Self::Audits => {
                format!(
                    "node_kind = 'audit' AND target_identity = {target} AND status != 'deferred'"
                )
            }
            Self::Runs => {
                let commands: Vec<String> = OBSERVED_COMMANDS
                    .iter()
                    .map(|c| stb_ddl::string_literal(c))
                    .collect();
                format!(
                    "target_identity = {target} AND command IN ({})",
                    commands.join(", ")
                )
            }
        }
    }
}

/// One event: its id, when it completed (as written and in epoch milliseconds), its
/// trigger (audits only) and its fields as handlers see them (`kind` its type).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub completed_at: String,
    pub completed_ms: i64,
    pub trigger: Option<String>,
    pub target: String,
    pub fields: Value,
}

impl Event {
    /// The position of this event: a checkpoint there is past it.
    #[must_use]
    pub fn position(&self) -> Position {
        Position {
            at: self.completed_at.clone(),
            id: self.id.clone(),
        }
    }
}

fn table(database: &str, stream: Stream) -> String {
    format!(
        "{}.{}",
        stb_ddl::identifier(database),
        stb_ddl::identifier(stream.table())
    )
}

/// Where the stream ends now (the epoch and an empty id when it is empty or its table
/// does not exist yet): a pass delivers nothing past it.
///
/// # Errors
/// The warehouse refused the read.
pub fn head(
    client: &Client,
    database: &str,
    target: &str,
    stream: Stream,
) -> Result<Position, WarehouseError> {
    let sql = format!(
        "SELECT toString(tupleElement(m, 1)) AS at, tupleElement(m, 2) AS id FROM (SELECT max((completed_at, {id})) AS m FROM {table} WHERE {filter})",
        id = stream.id_column(),
        table = table(database, stream),
        filter = stream.filter(target),
    );
    let rows = client.query_if_exists(&sql)?;
    let read = |column: &str| rows.as_ref().and_then(|r| r.text(0, column));
    Ok(Position {
        at: read("at").unwrap_or_else(|| "1970-01-01 00:00:00.000".to_owned()),
        id: read("id").unwrap_or_default(),
    })
}

/// The events after `after`, up to and including `head`, oldest first, at most a page.
///
/// # Errors
/// The warehouse refused the read.
pub fn page(
    client: &Client,
    database: &str,
    target: &str,
    stream: Stream,
    (after, head): (&Position, &Position),
) -> Result<Vec<Event>, WarehouseError> {
    let position = |position: &Position| {
        format!(
            "(toDateTime64({}, 3, 'UTC'), {})",
            stb_ddl::string_literal(&position.at),
            stb_ddl::string_literal(&position.id)
        )
    };
    let id = stream.id_column();
    read(
        client,
        (database, target, stream),
        &format!("(completed_at, {id}) <= {}", position(head)),
        &format!(
            "(completed_at, {id}) > {} ORDER BY completed_at, {id} LIMIT {PAGE}",
            position(after)
        ),
    )
}

/// The event `event_id` of the stream, rebuilt from its record (a retry of a dead letter).
///
/// # Errors
/// The warehouse refused the read.
pub fn by_id(
    client: &Client,
    database: &str,
    target: &str,
    stream: Stream,
    event_id: &str,
) -> Result<Option<Event>, WarehouseError> {
    let id = stream.id_column();
    let event = stb_ddl::string_literal(event_id);
    let found = read(
        client,
        (database, target, stream),
        "1",
        &format!("{id} = {event} LIMIT 1"),
    )?;
    Ok(found.into_iter().next())
}

/// The stream's rows within `inner` (over which an audit's previous status is read),
/// then cut by `outer` (a condition, with its own order and limit).
fn read(
    client: &Client,
    (database, target, stream): (&str, &str, Stream),
    inner: &str,
    outer: &str,
) -> Result<Vec<Event>, WarehouseError> {
    let columns = match stream {
        // The previous status is the newest earlier non-deferred one of the same binding:
        // read over the whole stream, then cut.
        Stream::Audits => {
            "result_id, invocation_id, node_name, binding_key, trigger, \
             if(isNull(scheduled_for), NULL, toString(scheduled_for)) AS scheduled_for, status, severity, \
             toString(failure_count) AS failure_count, payload_json, error_message, \
             lagInFrame(status, 1, '') OVER (PARTITION BY binding_key ORDER BY completed_at, result_id \
             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS previous_status"
        }
        Stream::Runs => {
            "invocation_id, command, mode, outcome, toString(exit_code) AS exit_code, \
             deployment_id, toString(selected_node_count) AS selected_node_count, error_message"
        }
    };
    let sql = format!(
        "SELECT *, toString(completed_at) AS completed, toString(toUnixTimestamp64Milli(completed_at)) AS completed_ms \
         FROM (SELECT {columns}, completed_at, target_identity FROM {table} WHERE {filter} AND {inner}) \
         WHERE {outer}",
        table = table(database, stream),
        filter = stream.filter(target),
    );
    let Some(rows) = client.query_if_exists(&sql)? else {
        return Ok(Vec::new());
    };
    Ok((0..rows.data.len())
        .map(|row| read_event(&rows, row, stream))
        .collect())
}

fn read_event(rows: &crate::Rows, row: usize, stream: Stream) -> Event {
    let text = |column: &str| rows.text(row, column);
    let number = |column: &str| {
        text(column)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let completed_at = text("completed").unwrap_or_default();
    let target = text("target_identity").unwrap_or_default();
    match stream {
        Stream::Audits => {
            let status = text("status").unwrap_or_default();
            let previous = text("previous_status").filter(|s| !s.is_empty());
            let payload: Value = text("payload_json")
                .and_then(|p| serde_json::from_str(&p).ok())
                .unwrap_or(Value::Null);
            let (columns, sample) = sample_rows(&payload);
            let id = text("result_id").unwrap_or_default();
            let trigger = text("trigger").unwrap_or_default();
            Event {
                fields: json!({
                    "kind": "AuditCompleted",
                    "id": id,
                    "audit_name": text("node_name"),
                    "status": status,
                    "previous_status": previous,
                    "transition": transition(&status, previous.as_deref()),
                    "severity": text("severity"),
                    "failure_count": number("failure_count"),
                    "target": target,
                    "trigger": trigger,
                    "completed_at": completed_at,
                    "binding_key": text("binding_key"),
                    "invocation_id": text("invocation_id"),
                    "scheduled_for": text("scheduled_for"),
                    "error_message": text("error_message"),
                    "sample_column_names": columns,
                    "sample_rows": sample,
                }),
                id,
                completed_ms: number("completed_ms"),
                trigger: Some(trigger),
                completed_at,
                target,
            }
        }
        Stream::Runs => {
            let id = text("invocation_id").unwrap_or_default();
            Event {
                fields: json!({
                    "kind": "RunCompleted",
                    "id": id,
                    "command": text("command"),
                    "mode": text("mode"),
                    "outcome": text("outcome"),
                    "exit_code": number("exit_code"),
                    "target": target,
                    "deployment_id": text("deployment_id"),
                    "selected_node_count": number("selected_node_count"),
                    "error_message": text("error_message"),
                    "completed_at": completed_at,
                }),
                id,
                completed_ms: number("completed_ms"),
                trigger: None,
                completed_at,
                target,
            }
        }
    }
}

/// `new_failure`, `still_failing`, `recovered` or `still_passing`: a warning fails.
#[must_use]
pub fn transition(status: &str, previous: Option<&str>) -> &'static str {
    let failing = |s: &str| FAILING.contains(&s);
    match (failing(status), previous.is_some_and(failing)) {
        (true, false) => "new_failure",
        (true, true) => "still_failing",
        (false, true) => "recovered",
        (false, false) => "still_passing",
    }
}

/// The audit's sample: its column names (in the query's order where the record keeps it,
/// else the first row's) and each row's values in that order.
fn sample_rows(payload: &Value) -> (Vec<String>, Vec<Vec<Value>>) {
    let rows = payload["sample_rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let recorded: Option<Vec<String>> = payload["sample_columns"].as_array().map(|names| {
        names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect()
    });
    let columns: Vec<String> = recorded.filter(|c| !c.is_empty()).unwrap_or_else(|| {
        rows.first()
            .and_then(Value::as_object)
            .map(|first| first.keys().cloned().collect())
            .unwrap_or_default()
    });
    let values = rows
        .iter()
        .filter_map(Value::as_object)
        .map(|row| {
            columns
                .iter()
                .map(|c| row.get(c).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    (columns, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_fails_and_a_pass_after_it_recovers() {
        assert_eq!(transition("failed", None), "new_failure");
        assert_eq!(transition("warning", Some("passed")), "new_failure");
        assert_eq!(transition("error", Some("warning")), "still_failing");
        assert_eq!(transition("passed", Some("warning")), "recovered");
        assert_eq!(transition("passed", None), "still_passing");
        assert_eq!(transition("passed", Some("passed")), "still_passing");
    }

    #[test]
    fn samples_keep_the_first_row_s_columns() {
        let payload =
            json!({"sample_rows": [{"order_id": 7, "total": -1}, {"order_id": 8, "total": -2}]});
        let (columns, rows) = sample_rows(&payload);
        assert_eq!(columns, ["order_id", "total"]);
        assert_eq!(
            rows,
            vec![vec![json!(7), json!(-1)], vec![json!(8), json!(-2)]]
        );
        assert_eq!(sample_rows(&json!({})), (Vec::new(), Vec::new()));
        let ordered = json!({"sample_rows": [{"order_id": 7, "total": -1}], "sample_columns": ["total", "order_id"]});
        assert_eq!(
            sample_rows(&ordered),
            (
                vec!["total".to_owned(), "order_id".to_owned()],
                vec![vec![json!(-1), json!(7)]]
            )
        );
    }
}
