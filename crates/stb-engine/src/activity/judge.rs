//! What the evidence says, decided without I/O: whether rows are arriving in a relation
//! (activity, from the warehouse's logs over a short window) and whether its newest row is
//! as recent as its source promises (freshness, from the data itself).

use serde::Serialize;
use stb_project::policies::Freshness;

/// Where activity evidence came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    QueryViewsLog,
    PartLog,
    SystemParts,
    Unavailable,
}

/// Which logs the warehouse keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Capabilities {
    pub query_views_log: bool,
    pub part_log: bool,
}

/// A materialized view's executions into one relation within the window
/// (`system.query_views_log`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewRuns {
    pub last_triggered_at: Option<String>,
    pub last_write_at: Option<String>,
    pub rows_written: u64,
    /// The latest execution's status (`QueryFinish`, `ExceptionWhileProcessing`, ...).
    pub latest_status: String,
}

/// New parts of one relation (`system.part_log`, `NewPart` only: merges and mutations
/// write no new rows).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewParts {
    /// The newest new part the log still holds, inside the window or not.
    pub last_write_at: Option<String>,
    pub rows_in_window: u64,
}

/// The newest modification time of a relation's active parts (`system.parts`): merges
/// touch it too, so it is approximate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartTimes {
    pub modified_at: Option<String>,
    pub seconds_ago: Option<i64>,
}

/// Everything read about one relation's activity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    pub views: Option<ViewRuns>,
    pub new_parts: Option<NewParts>,
    pub parts: Option<PartTimes>,
    /// A read failed: nothing can be said.
    pub read_error: Option<String>,
}

/// A relation's activity over the window, in the reference's payload shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// `moving`, `idle`, `stalled` or `unknown`.
    pub state: &'static str,
    pub source: EvidenceSource,
    /// Whether any activity log exists on the warehouse.
    pub source_available: bool,
    /// Evidence that may count merges as writes.
    pub approximate: bool,
    pub last_triggered_at: Option<String>,
    pub last_write_at: Option<String>,
    pub rows_written: u64,
    pub window_seconds: u64,
    pub detail: String,
}

/// The activity `evidence` shows for one relation, from the best source that has
/// something to say about it: the views log (it sees materialized views fail), then the
/// part log (it also sees plain inserts, which the views log never does), then part
/// modification times when the warehouse keeps neither log.
#[must_use]
pub fn activity(capabilities: Capabilities, evidence: &Evidence, window_seconds: u64) -> Activity {
    let available = capabilities.query_views_log || capabilities.part_log;
    let base = |state, source, detail: String| Activity {
        state,
        source,
        source_available: available,
        approximate: false,
        last_triggered_at: None,
        last_write_at: None,
        rows_written: 0,
        window_seconds,
        detail,
    };
    if let Some(error) = &evidence.read_error {
        return base(
            "unknown",
            EvidenceSource::Unavailable,
            format!("ClickHouse activity telemetry could not be read: {error}"),
        );
    }
    if let Some(views) = evidence
        .views
        .as_ref()
        .filter(|_| capabilities.query_views_log)
    {
        let failed = matches!(
            views.latest_status.as_str(),
            "ExceptionBeforeStart" | "ExceptionWhileProcessing"
        );
        let (state, detail) = if failed {
            ("stalled", "The latest materialized-view execution failed.")
        } else if views.rows_written > 0 {
            ("moving", "Materialized views wrote rows within the window.")
        } else {
            (
                "idle",
                "Materialized views ran within the window and wrote no rows.",
            )
        };
        return Activity {
            last_triggered_at: views.last_triggered_at.clone(),
            last_write_at: views.last_write_at.clone(),
            rows_written: views.rows_written,
            ..base(state, EvidenceSource::QueryViewsLog, detail.to_owned())
        };
    }
    if capabilities.part_log {
        let parts = evidence.new_parts.clone().unwrap_or_default();
        let (state, detail) = if parts.rows_in_window > 0 {
            ("moving", "New parts were written within the window.")
        } else {
            ("idle", "No new part within the window.")
        };
        return Activity {
            last_write_at: parts.last_write_at,
            rows_written: parts.rows_in_window,
            ..base(state, EvidenceSource::PartLog, detail.to_owned())
        };
    }
    if capabilities.query_views_log {
        return base(
            "idle",
            EvidenceSource::QueryViewsLog,
            "No materialized-view execution within the window (plain inserts are not logged without the part log).".to_owned(),
        );
    }
    match &evidence.parts {
        Some(PartTimes {
            modified_at: Some(modified),
            seconds_ago,
        }) => {
            let recent =
                seconds_ago.is_some_and(|s| s <= i64::try_from(window_seconds).unwrap_or(i64::MAX));
            Activity {
                approximate: true,
                last_write_at: Some(modified.clone()),
                ..base(
                    if recent { "moving" } else { "idle" },
                    EvidenceSource::SystemParts,
                    "From part modification times, which may include background merges.".to_owned(),
                )
            }
        }
        _ => base(
            "unknown",
            EvidenceSource::Unavailable,
            "ClickHouse activity telemetry is unavailable.".to_owned(),
        ),
    }
}

/// The newest row of a relation, by its time column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Newest {
    pub column: Option<String>,
    pub newest_at: Option<String>,
    /// Warehouse now minus the newest row's time, in seconds.
    pub lag_seconds: Option<i64>,
    pub has_rows: bool,
}

/// A relation's freshness: `fresh`, `lagging` (older than `warn_after`), `stalled` (older
/// than `error_after`, or no rows at all), `unchecked` (no expectation declared: the lag
/// is still reported), or `unknown` (no time column to judge by).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreshnessState {
    pub state: &'static str,
    pub column: Option<String>,
    pub newest_at: Option<String>,
    pub lag_seconds: Option<i64>,
    pub warn_after_seconds: Option<u64>,
    pub error_after_seconds: Option<u64>,
}

/// Judges `newest` against `expectation`.
#[must_use]
pub fn freshness(newest: &Newest, expectation: Option<Freshness>) -> FreshnessState {
    let expected = expectation.unwrap_or_default();
    let exceeds = |limit: Option<u64>| {
        limit.is_some_and(|limit| {
            newest
                .lag_seconds
                .is_some_and(|lag| lag > i64::try_from(limit).unwrap_or(i64::MAX))
        })
    };
    let state = if newest.column.is_none() {
        "unknown"
    } else if expectation.is_none() {
        "unchecked"
    } else if !newest.has_rows || exceeds(expected.error_after_seconds) {
        "stalled"
    } else if exceeds(expected.warn_after_seconds) {
        "lagging"
    } else {
        "fresh"
    };
    FreshnessState {
        state,
        column: newest.column.clone(),
        newest_at: newest.has_rows.then(|| newest.newest_at.clone()).flatten(),
        lag_seconds: newest.has_rows.then_some(newest.lag_seconds).flatten(),
        warn_after_seconds: expected.warn_after_seconds,
        error_after_seconds: expected.error_after_seconds,
    }
}

#[cfg(test)]
mod tests;
