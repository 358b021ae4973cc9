//! The run event stream: one row per event in `_streambuild_run_events`, written through
//! the observation connection so telemetry never queues behind a long statement, with a
//! heartbeat thread that proves the run is alive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::client::Client;
use crate::error::WarehouseError;

/// How often a running command says it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Payloads above this size are replaced by a marker (run starts are kept whole).
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;

/// One event, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    sequence: u64,
    kind: String,
    step_id: Option<String>,
    phase: Option<String>,
    payload: String,
}

/// Writes a run's events, in order, retrying ones that failed with the next event.
#[derive(Debug)]
pub struct RunEventSink {
    client: Arc<Client>,
    table: String,
    invocation_id: String,
    next_sequence: AtomicU64,
    /// Events not yet written because the warehouse refused or was unreachable.
    backlog: Mutex<Vec<Pending>>,
}

impl RunEventSink {
    /// A sink for `invocation_id` in `database` (its metadata must exist).
    #[must_use]
    pub fn new(client: Arc<Client>, database: &str, invocation_id: &str) -> Self {
        Self {
            client,
            table: format!("{}._streambuild_run_events", stb_ddl::identifier(database)),
            invocation_id: invocation_id.to_owned(),
            next_sequence: AtomicU64::new(1),
            backlog: Mutex::new(Vec::new()),
        }
    }

    #[must_use]
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// Records an event; returns its sequence number. A failure keeps the event for the
    /// next call, so a flaky warehouse loses no events, only timeliness.
    ///
    /// # Errors
    /// The write (and any backlog before it) failed; the caller decides whether that is
    /// fatal (destructive commands) or a warning (builds).
    pub fn emit(
        &self,
        kind: &str,
        step_id: Option<&str>,
        phase: Option<&str>,
        payload: &serde_json::Value,
    ) -> Result<u64, WarehouseError> {
        let sequence = self.next_sequence.fetch_add(1, Ordering::SeqCst);
        let mut text = payload.to_string();
        if text.len() > MAX_PAYLOAD_BYTES && kind != "run_started" {
            text = serde_json::json!({"payload_truncated": true, "original_bytes": text.len()})
                .to_string();
        }
        let mut backlog = self
            .backlog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        backlog.push(Pending {
            sequence,
            kind: kind.to_owned(),
            step_id: step_id.map(str::to_owned),
            phase: phase.map(str::to_owned),
            payload: text,
        });
        let values: Vec<String> = backlog
            .iter()
            .map(|event| {
                let optional = |value: &Option<String>| {
                    value
                        .as_deref()
                        .map_or_else(|| "NULL".to_owned(), stb_ddl::string_literal)
                };
                format!(
                    "({}, {}, {}, {}, {}, {})",
                    stb_ddl::string_literal(&self.invocation_id),
                    event.sequence,
                    stb_ddl::string_literal(&event.kind),
                    optional(&event.step_id),
                    optional(&event.phase),
                    stb_ddl::string_literal(&event.payload)
                )
            })
            .collect();
        self.client.execute(
            &format!(
                "INSERT INTO {} (invocation_id, sequence, event_kind, step_id, phase, payload_json) VALUES {}",
                self.table,
                values.join(", ")
            ),
            None,
        )?;
        backlog.clear();
        Ok(sequence)
    }

    /// Starts the heartbeat: a `run_heartbeat` event every `interval` until the returned
    /// handle is stopped or dropped. Failed heartbeats are retried with the next one.
    #[must_use]
    pub fn heartbeat(self: &Arc<Self>, interval: Duration) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let sink = Arc::clone(self);
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let _ = sink.emit("run_heartbeat", None, None, &serde_json::json!({}));
            }
        });
        Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// A running heartbeat; stops (and waits for its thread) when dropped.
#[derive(Debug)]
pub struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Milliseconds since `invocation`'s last event by the warehouse clock; `None` when it left
/// none (or nothing was ever recorded in `database`).
///
/// # Errors
/// The events could not be read.
pub fn last_event_age_ms(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<Option<i64>, WarehouseError> {
    if !client.table_exists(database, EVENTS_TABLE)? {
        return Ok(None);
    }
    let rows = client.query(&format!(
        "SELECT count() AS n, dateDiff('millisecond', max(emitted_at), now64(3, 'UTC')) AS age FROM {} WHERE invocation_id = {}",
        events_table(database),
        stb_ddl::string_literal(invocation)
    ))?;
    if rows.text(0, "n").as_deref() == Some("0") {
        return Ok(None);
    }
    Ok(rows.text(0, "age").and_then(|age| age.parse().ok()))
}

/// Appends a `lock_broken` event (who broke it) to `invocation`'s own event stream.
///
/// # Errors
/// The event could not be written.
pub fn append_lock_broken(
    client: &Client,
    database: &str,
    invocation: &str,
    broken_by: &str,
) -> Result<(), WarehouseError> {
    crate::metadata::migrate(client, database)?;
    let events = events_table(database);
    let payload = serde_json::json!({"brokenBy": broken_by, "database": database}).to_string();
    client.execute(
        &format!(
            "INSERT INTO {events} (invocation_id, sequence, event_kind, payload_json) SELECT {owner}, (SELECT max(sequence) FROM {events} WHERE invocation_id = {owner}) + 1, 'lock_broken', {payload}",
            owner = stb_ddl::string_literal(invocation),
            payload = stb_ddl::string_literal(&payload)
        ),
        None,
    )?;
    Ok(())
}

const EVENTS_TABLE: &str = "_streambuild_run_events";

fn events_table(database: &str) -> String {
    stb_ddl::QualifiedName::new(database, EVENTS_TABLE).to_string()
}
