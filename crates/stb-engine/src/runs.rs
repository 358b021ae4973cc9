//! Runs you can watch: each run's status derived on read from its records, on the
//! warehouse's clock (`stb runs list | show`; the dev server reads the same values).
//!
//! A run with a terminal invocation row has that row's outcome; else a `run_completed`
//! event's; else it is `running` while its last event (heartbeats come every 10 s) is
//! younger than 45 s, `unresponsive` until `run_presumed_failed_after`, then
//! `presumed_failed`. A run that heartbeats again is running again. Cancellation events
//! written by whoever cancelled it win over the rest; a run whose lock an operator broke
//! (`stb unlock`) is presumed failed from then on, unless it writes again.

use serde::Serialize;
use stb_warehouse::Client;
use stb_warehouse::runs::{EventRow, RunRow, events_of, one, recent};

use crate::EngineError;

/// A run whose last event is younger than this is alive (heartbeats come every 10 s).
pub const SIGNAL_WINDOW_MS: i64 = 45_000;

/// How long a silent run stays `running`, then `unresponsive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Windows {
    pub signal_ms: i64,
    pub presumed_failed_ms: i64,
}

impl Windows {
    /// The spec's 45 s signal window and the project's `run_presumed_failed_after`.
    /// `STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS` and
    /// `STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS` override both (tests use seconds).
    #[must_use]
    pub fn of(presumed_failed_after_seconds: u64, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let seconds = |name: &str| env(name).and_then(|v| v.trim().parse::<i64>().ok());
        let signal_ms =
            seconds("STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS").map_or(SIGNAL_WINDOW_MS, |s| s * 1000);
        let presumed_failed_ms = seconds("STREAMBUILD_RUN_PRESUMED_FAILED_AFTER_SECONDS")
            .unwrap_or_else(|| i64::try_from(presumed_failed_after_seconds).unwrap_or(600))
            * 1000;
        Self {
            signal_ms,
            presumed_failed_ms: presumed_failed_ms.max(signal_ms),
        }
    }
}

/// A run's status, derived.
#[must_use]
pub fn status(run: &RunRow, windows: Windows) -> &'static str {
    match run.cancellation.as_deref() {
        Some("cancellation_failed") => return "cancellation_failed",
        Some("cancellation_completed") => return "cancelled",
        _ => {}
    }
    let outcome = run.outcome.clone().or_else(|| {
        run.run_completed
            .as_deref()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .and_then(|p| p["outcome"].as_str().map(str::to_owned))
    });
    if let Some(outcome) = outcome {
        return match outcome.as_str() {
            "succeeded" => "succeeded",
            "cancelled" => "cancelled",
            _ => "failed",
        };
    }
    // `stb unlock` broke its lock: an operator declared it gone (until it speaks again).
    if run.lock_broken {
        return "presumed_failed";
    }
    match run.silent_ms {
        Some(silent) if silent < windows.signal_ms => "running",
        Some(silent) if silent < windows.presumed_failed_ms => "unresponsive",
        _ => "presumed_failed",
    }
}

/// One run as `stb runs list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub invocation_id: String,
    pub status: &'static str,
    pub command: Option<String>,
    pub mode: Option<String>,
    pub display_command: Option<String>,
    /// Who started it (`user@host (pid N)`, or the dev server's signed-in user).
    pub owner: Option<String>,
    pub started_at: Option<String>,
    pub last_event_at: Option<String>,
    /// Seconds since its last event, while it has no outcome.
    pub silent_seconds: Option<i64>,
    pub duration_ms: Option<u64>,
    /// What it was asked to build (`model:<name>`), and its selectors.
    pub scope: Vec<String>,
    pub selectors: Vec<String>,
    pub total_statements: Option<u64>,
    pub completed_statements: u64,
    pub written_rows: u64,
    pub deployment_id: Option<String>,
    pub error_message: Option<String>,
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Summarises `run` with its derived status.
#[must_use]
pub fn summarise(run: &RunRow, windows: Windows) -> RunSummary {
    let started: serde_json::Value = run
        .run_started
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    let status = status(run, windows);
    let field = |name: &str| started[name].as_str().map(str::to_owned);
    RunSummary {
        invocation_id: run.invocation_id.clone(),
        status,
        command: run.command.clone().or_else(|| field("command")),
        mode: run.mode.clone().or_else(|| field("mode")),
        display_command: field("displayCommand"),
        owner: field("owner"),
        started_at: run.started_at.clone(),
        last_event_at: run.last_event_at.clone(),
        silent_seconds: matches!(status, "running" | "unresponsive" | "presumed_failed")
            .then(|| run.silent_ms.map(|ms| ms / 1000))
            .flatten(),
        duration_ms: run.duration_ms,
        scope: strings(&started["executedLogicalIds"]),
        selectors: strings(&started["selectors"]),
        total_statements: started["totalStatements"].as_u64(),
        completed_statements: run.completed_statements,
        written_rows: run.written_rows,
        deployment_id: run.deployment_id.clone().or_else(|| field("deploymentId")),
        error_message: run.error_message.clone(),
    }
}

/// The `limit` most recent runs of `database`, newest first, with their status.
///
/// # Errors
/// A read failed.
pub fn list(
    client: &Client,
    database: &str,
    limit: usize,
    windows: Windows,
) -> Result<Vec<RunSummary>, EngineError> {
    let runs = recent(client, database, limit).map_err(|e| EngineError::from(&e))?;
    Ok(runs.iter().map(|run| summarise(run, windows)).collect())
}

/// One statement of a run's timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatementTiming {
    pub sequence: u64,
    pub display_name: String,
    pub intent: Option<String>,
    pub query_id: Option<String>,
    pub started_at: Option<String>,
    pub elapsed_ms: Option<u64>,
    pub written_rows: Option<u64>,
    pub error_message: Option<String>,
}

/// One run in detail: its summary, its statements in order, and every event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunDetail {
    pub run: RunSummary,
    pub statements: Vec<StatementTiming>,
    pub events: Vec<serde_json::Value>,
}

/// The statements of a run, from its `statement_started` / `statement_completed` pairs.
#[must_use]
pub fn timeline(events: &[EventRow]) -> Vec<StatementTiming> {
    let mut statements: Vec<StatementTiming> = Vec::new();
    for event in events {
        let payload: serde_json::Value = serde_json::from_str(&event.payload).unwrap_or_default();
        let Some(sequence) = payload["statementSequence"].as_u64() else {
            continue;
        };
        let index = match statements.iter().position(|s| s.sequence == sequence) {
            Some(index) => index,
            None => {
                statements.push(StatementTiming {
                    sequence,
                    ..StatementTiming::default()
                });
                statements.len() - 1
            }
        };
        let statement = &mut statements[index];
        if let Some(name) = payload["displayName"].as_str() {
            statement.display_name = name.to_owned();
        }
        match event.kind.as_str() {
            "statement_started" => {
                statement.started_at = Some(event.emitted_at.clone());
                statement.intent = payload["intent"].as_str().map(str::to_owned);
                statement.query_id = payload["queryId"].as_str().map(str::to_owned);
            }
            "statement_completed" => {
                statement.elapsed_ms = payload["elapsedMs"].as_u64();
                statement.written_rows = payload["writtenRows"].as_u64();
                statement.error_message = payload["errorMessage"].as_str().map(str::to_owned);
            }
            _ => {}
        }
    }
    statements.sort_by_key(|s| s.sequence);
    statements
}

/// Run `invocation` of `database` in detail.
///
/// # Errors
/// The run is unknown (`STB-RUNS-001`), or a read failed.
pub fn show(
    client: &Client,
    database: &str,
    invocation: &str,
    windows: Windows,
) -> Result<RunDetail, EngineError> {
    let run = one(client, database, invocation)
        .map_err(|e| EngineError::from(&e))?
        .ok_or_else(|| {
            EngineError::new(
                RUN_CODE,
                format!("no run '{invocation}' in '{database}'"),
                "`stb runs list` shows the recent runs and their ids",
            )
            .of_kind(crate::ErrorKind::NotFound)
        })?;
    let events = events_of(client, database, invocation).map_err(|e| EngineError::from(&e))?;
    Ok(RunDetail {
        run: summarise(&run, windows),
        statements: timeline(&events),
        events: events
            .iter()
            .map(|e| {
                serde_json::json!({
                    "sequence": e.sequence,
                    "emittedAt": e.emitted_at,
                    "event": e.kind,
                    "stepId": e.step_id,
                    "phase": e.phase,
                    "payload": serde_json::from_str::<serde_json::Value>(&e.payload).unwrap_or_default(),
                })
            })
            .collect(),
    })
}

/// The whole invocation id `given` names: itself when a run has that id, else the one run
/// whose id begins with it (a short id as `stb runs list` prints it).
///
/// # Errors
/// No run has that id or prefix, or several do (`STB-RUNS-001`, naming them), or a read
/// failed.
pub fn resolve_invocation(
    client: &Client,
    database: &str,
    given: &str,
) -> Result<String, EngineError> {
    let error = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    if one(client, database, given).map_err(error)?.is_some() {
        return Ok(given.to_owned());
    }
    if given.trim().chars().count() < MIN_PREFIX {
        return Err(EngineError::new(
            RUN_CODE,
            format!("no run '{given}' in '{database}'"),
            format!(
                "give the run's id, or at least its first {MIN_PREFIX} characters (`stb runs list` shows them)"
            ),
        )
        .of_kind(crate::ErrorKind::NotFound));
    }
    let matches =
        stb_warehouse::runs::ids_starting_with(client, database, given, 6).map_err(error)?;
    match matches.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(EngineError::new(
            RUN_CODE,
            format!("no run '{given}' in '{database}'"),
            "`stb runs list` shows the recent runs and their ids",
        )
        .of_kind(crate::ErrorKind::NotFound)),
        several => Err(EngineError::new(
            RUN_CODE,
            format!(
                "'{given}' begins {} run ids in '{database}': {}",
                if several.len() > 5 {
                    "more than five".to_owned()
                } else {
                    several.len().to_string()
                },
                several
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "give more of the id",
        )),
    }
}

/// The fewest characters a run id's prefix must have: an empty or one-letter prefix would
/// name whichever run happens to be alone.
pub const MIN_PREFIX: usize = 4;

/// The short form of a run id that lists and hints print: the first eight characters of a
/// UUID (32 random bits: two runs of one target share them about never), any other id
/// whole (ids a caller chose, `STREAMBUILD_RUN_INVOCATION_ID`, may share long prefixes).
/// `stb runs show` and `cancel` take it.
#[must_use]
pub fn short_id(invocation: &str) -> &str {
    // The hyphenated form only (36 characters): its first eight are the leading hex digits.
    let is_uuid = invocation.len() == 36 && uuid::Uuid::try_parse(invocation).is_ok();
    if is_uuid {
        &invocation[..8]
    } else {
        invocation
    }
}

/// An unknown run.
pub const RUN_CODE: &str = "STB-RUNS-001";

#[cfg(test)]
mod short_id_tests {
    use super::short_id;

    #[test]
    fn uuids_print_short_and_other_ids_whole() {
        assert_eq!(short_id("7f3c2a1b-0d4e-4f5a-9b6c-1d2e3f4a5b6c"), "7f3c2a1b");
        assert_eq!(short_id("heavy_0123456789ab"), "heavy_0123456789ab");
        assert_eq!(
            short_id("7f3c2a1b-0d4e-4f5a-9b6c-1d2e3f4a5b6"),
            "7f3c2a1b-0d4e-4f5a-9b6c-1d2e3f4a5b6"
        );
        assert_eq!(short_id(""), "");
    }
}
/// A run that cannot be cancelled (it ended, or it is presumed failed).
pub const CANCEL_CODE: &str = "STB-RUNS-002";

/// What a cancellation came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cancellation {
    pub invocation_id: String,
    /// `cancelled`, or `cancellation_failed` with the reason.
    pub status: &'static str,
    /// The statement that was running when it was asked.
    pub query_id: Option<String>,
    pub requested_at: String,
    pub error_message: Option<String>,
}

/// Asks run `invocation` to stop (a `cancellation_requested` event its build watches
/// for: it kills its statement in flight and records itself cancelled), waits up to
/// `wait` for it to end, and records the outcome (`cancellation_completed`, or
/// `cancellation_failed` with why).
///
/// # Errors
/// The run is unknown or not running or unresponsive (`STB-RUNS-002`), or a read or
/// write failed.
pub fn cancel(
    client: &Client,
    database: &str,
    invocation: &str,
    windows: Windows,
    wait: std::time::Duration,
) -> Result<Cancellation, EngineError> {
    let error = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    let detail = show(client, database, invocation, windows)?;
    if !matches!(detail.run.status, "running" | "unresponsive") {
        return Err(EngineError::new(
            CANCEL_CODE,
            format!(
                "run '{invocation}' is {}: there is nothing to cancel",
                detail.run.status
            ),
            "`stb runs list` shows which runs are still running",
        )
        .of_kind(crate::ErrorKind::Conflict));
    }
    let query_id = detail
        .statements
        .iter()
        .rev()
        .find(|s| s.elapsed_ms.is_none())
        .and_then(|s| s.query_id.clone());
    let requested_at = crate::deployments::warehouse_now(client)?;
    stb_warehouse::events::append_event(
        client,
        database,
        invocation,
        "cancellation_requested",
        &serde_json::json!({"queryId": query_id, "requestedAt": requested_at}),
    )
    .map_err(error)?;
    let started = std::time::Instant::now();
    let ended = loop {
        let now = one(client, database, invocation)
            .map_err(error)?
            .map_or("presumed_failed", |run| status(&run, windows));
        if !matches!(now, "running" | "unresponsive") || started.elapsed() >= wait {
            break now;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let (status, message) = match ended {
        "cancelled" => ("cancelled", None),
        "running" | "unresponsive" => {
            // Its process may be gone while its statement still runs in the warehouse:
            // stop the statement at least.
            let killed = query_id.as_ref().is_some_and(|id| {
                client
                    .execute(
                        &format!(
                            "KILL QUERY WHERE query_id = {} SYNC",
                            stb_ddl::string_literal(id)
                        ),
                        None,
                    )
                    .is_ok()
            });
            (
                "cancellation_failed",
                Some(format!(
                    "the run did not stop within {} s; is its process still alive?{}",
                    wait.as_secs(),
                    if killed {
                        " Its statement in flight was killed in the warehouse."
                    } else {
                        ""
                    }
                )),
            )
        }
        other => (
            "cancellation_failed",
            Some(format!(
                "the run ended as {other} before it could be cancelled"
            )),
        ),
    };
    stb_warehouse::events::append_event(
        client,
        database,
        invocation,
        if status == "cancelled" {
            "cancellation_completed"
        } else {
            "cancellation_failed"
        },
        &serde_json::json!({
            "queryId": query_id,
            "requestedAt": requested_at,
            "status": status,
            "warehouseTerminationConfirmed": status == "cancelled",
            "errorMessage": message,
        }),
    )
    .map_err(error)?;
    Ok(Cancellation {
        invocation_id: invocation.to_owned(),
        status,
        query_id,
        requested_at,
        error_message: message,
    })
}

#[cfg(test)]
mod tests;
