//! The run event stream: one row per event in `_streambuild_run_events`, written through
//! the observation connection so telemetry never queues behind a long statement. While a
//! run is under way a writer thread sends queued events (every event queued since its last
//! write goes out in one INSERT, so a build does not pay a round trip per event) and proves
//! the run is alive with a heartbeat when nothing else was said.
//!
//! A statement's completion and progress are not waited for by anyone: the writer lets
//! them wait (at most [`LAZY_DELAY`]) for the next event that is, so one statement's
//! completion and the next one's start share one INSERT. Every INSERT is a new part the
//! warehouse writes and later merges; on a build of fast statements this about halves
//! them. A statement's start (its query id is what `stb unlock` kills by), and every other
//! event, goes out as soon as the writer is free, unless its emitter queues it lazily
//! ([`RunEventSink::queue_lazy`]: a build's short DDL, which no kill needs to find). A
//! completion lost with a killed process costs nothing: its statement is no longer
//! running, so unlock finds nothing to kill.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::WarehouseError;

/// How often a running command says it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Payloads above this size are replaced by a marker (the records a recovery reads back
/// are kept whole: [`WHOLE_EVENTS`]).
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;
/// After a failed write the writer waits this long before trying again (queued events
/// still go out with the next synchronous write).
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// The longest a lazy event (a statement's completion or progress) waits for company.
pub const LAZY_DELAY: Duration = Duration::from_millis(100);
/// Every batch of events a run's writer sends carries a query id with this prefix: a
/// build waiting for the inserts that could feed its driving inputs knows these write
/// only the run's own records, and does not wait for them.
pub const WRITER_QUERY_PREFIX: &str = "stb-run-events-";
/// The events that may wait for company: nothing depends on their being written at once,
/// and the next statement's start is never far behind a fast statement's completion.
const LAZY_EVENTS: &[&str] = &["statement_completed", "statement_progress"];
/// The events kept whole whatever their size: a run's start, and what `stb unlock` and
/// `stb build --resume` read back to give a target back or go on with a build (a
/// truncated one would leave a suspended build neither resumable nor restorable).
const WHOLE_EVENTS: &[&str] = &[
    "run_started",
    "restore_point",
    "resume_point",
    "resume_models",
    "replay_suspended",
];

/// One event, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    sequence: u64,
    /// It may wait (at most the lazy delay) for an event that may not.
    lazy: bool,
    kind: String,
    step_id: Option<String>,
    phase: Option<String>,
    payload: String,
}

/// What the writer thread and the emitters share.
#[derive(Debug, Default)]
struct Queue {
    /// Events not yet written: queued, or refused by the warehouse and kept for the next
    /// write, in sequence order.
    pending: Vec<Pending>,
    /// Set when the writer thread should write what is queued and stop.
    stopping: bool,
}

impl Queue {
    /// An event that should go out now is queued (anything but a lazy one).
    fn urgent(&self) -> bool {
        self.pending.iter().any(|event| !event.lazy)
    }
}

/// Writes a run's events in sequence order, retrying ones that failed with the next write.
#[derive(Debug)]
pub struct RunEventSink {
    client: Arc<Client>,
    table: String,
    invocation_id: String,
    next_sequence: AtomicU64,
    queue: Mutex<Queue>,
    queued: Condvar,
    /// Held for the whole of a write, so two writes never overlap: a reader following the
    /// stream by sequence number must never see a later event before an earlier one.
    writing: Mutex<()>,
    /// A writer thread is running: queued events need no synchronous write.
    writer_running: AtomicBool,
    /// A background write failed since the last `take_failure`.
    failed: AtomicBool,
    /// How long lazy events wait for company ([`LAZY_DELAY`] unless a test says otherwise).
    lazy_delay: Duration,
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
            queue: Mutex::new(Queue::default()),
            queued: Condvar::new(),
            writing: Mutex::new(()),
            writer_running: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            lazy_delay: LAZY_DELAY,
        }
    }

    /// The sink with lazy events waiting at most `delay` for company.
    #[must_use]
    pub fn with_lazy_delay(mut self, delay: Duration) -> Self {
        self.lazy_delay = delay;
        self
    }

    #[must_use]
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// Records an event and writes it (with everything queued before it) now; returns its
    /// sequence number. A failure keeps the events for the next write, so a flaky
    /// warehouse loses no events, only timeliness.
    ///
    /// # Errors
    /// The write failed; the caller decides whether that is fatal (destructive commands)
    /// or a warning (builds).
    pub fn emit(
        &self,
        kind: &str,
        step_id: Option<&str>,
        phase: Option<&str>,
        payload: &serde_json::Value,
    ) -> Result<u64, WarehouseError> {
        let lazy = LAZY_EVENTS.contains(&kind);
        let sequence = self.enqueue(kind, step_id, phase, payload, lazy);
        self.flush()?;
        Ok(sequence)
    }

    /// Records an event for the writer thread to send; returns its sequence number. With
    /// no writer running it is written now, as by `emit`; a failure then shows through
    /// `take_failure`.
    pub fn queue(
        &self,
        kind: &str,
        step_id: Option<&str>,
        phase: Option<&str>,
        payload: &serde_json::Value,
    ) -> u64 {
        let lazy = LAZY_EVENTS.contains(&kind);
        self.queue_as(kind, (step_id, phase), payload, lazy)
    }

    /// [`Self::queue`] for an event that may wait (at most the lazy delay) for company,
    /// whatever its kind: a build's start of a short statement (DDL), which neither a
    /// cancellation nor `stb unlock` needs on record at once.
    pub fn queue_lazy(
        &self,
        kind: &str,
        step_id: Option<&str>,
        phase: Option<&str>,
        payload: &serde_json::Value,
    ) -> u64 {
        self.queue_as(kind, (step_id, phase), payload, true)
    }

    fn queue_as(
        &self,
        kind: &str,
        (step_id, phase): (Option<&str>, Option<&str>),
        payload: &serde_json::Value,
        lazy: bool,
    ) -> u64 {
        let sequence = self.enqueue(kind, step_id, phase, payload, lazy);
        if self.writer_running.load(Ordering::SeqCst) {
            self.queued.notify_all();
        } else if self.flush().is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        sequence
    }

    /// True once after any write that failed in the background (or from `queue`).
    pub fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::SeqCst)
    }

    fn enqueue(
        &self,
        kind: &str,
        step_id: Option<&str>,
        phase: Option<&str>,
        payload: &serde_json::Value,
        lazy: bool,
    ) -> u64 {
        let mut text = payload.to_string();
        if text.len() > MAX_PAYLOAD_BYTES && !WHOLE_EVENTS.contains(&kind) {
            text = serde_json::json!({"payload_truncated": true, "original_bytes": text.len()})
                .to_string();
        }
        let mut queue = self.lock_queue();
        // Numbered under the queue's lock, so the queue is always in sequence order.
        let sequence = self.next_sequence.fetch_add(1, Ordering::SeqCst);
        queue.pending.push(Pending {
            sequence,
            lazy,
            kind: kind.to_owned(),
            step_id: step_id.map(str::to_owned),
            phase: phase.map(str::to_owned),
            payload: text,
        });
        sequence
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes everything queued, in one INSERT.
    ///
    /// # Errors
    /// The write failed; the events stay queued, ahead of any queued since.
    pub fn flush(&self) -> Result<(), WarehouseError> {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = std::mem::take(&mut self.lock_queue().pending);
        if batch.is_empty() {
            return Ok(());
        }
        match self.write(&batch) {
            Ok(()) => Ok(()),
            Err(error) => {
                let mut queue = self.lock_queue();
                let newer = std::mem::replace(&mut queue.pending, batch);
                queue.pending.extend(newer);
                Err(error)
            }
        }
    }

    fn write(&self, batch: &[Pending]) -> Result<(), WarehouseError> {
        let optional = |value: &Option<String>| {
            value
                .as_deref()
                .map_or_else(|| "NULL".to_owned(), stb_ddl::string_literal)
        };
        let values: Vec<String> = batch
            .iter()
            .map(|event| {
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
        let query_id = format!("{WRITER_QUERY_PREFIX}{}", uuid::Uuid::new_v4());
        self.client.execute(
            &format!(
                "INSERT INTO {} (invocation_id, sequence, event_kind, step_id, phase, payload_json) VALUES {}",
                self.table,
                values.join(", ")
            ),
            Some(&query_id),
        )?;
        Ok(())
    }

    /// Starts the writer thread: it sends queued events as they come and a `run_heartbeat`
    /// after `interval` without any event, until the returned handle is dropped (which
    /// writes what is still queued).
    #[must_use]
    pub fn heartbeat(self: &Arc<Self>, interval: Duration) -> Heartbeat {
        self.lock_queue().stopping = false;
        self.writer_running.store(true, Ordering::SeqCst);
        let sink = Arc::clone(self);
        let thread = std::thread::spawn(move || sink.run_writer(interval));
        Heartbeat {
            sink: Arc::clone(self),
            thread: Some(thread),
        }
    }

    fn run_writer(&self, interval: Duration) {
        let mut next_heartbeat = Instant::now() + interval;
        loop {
            let mut queue = self.lock_queue();
            while queue.pending.is_empty() && !queue.stopping {
                let now = Instant::now();
                if now >= next_heartbeat {
                    break;
                }
                queue = self
                    .queued
                    .wait_timeout(queue, next_heartbeat - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            if !queue.pending.is_empty() && !queue.urgent() {
                // Only lazy events: give the next statement's start a moment to join them.
                queue = self
                    .queued
                    .wait_timeout_while(queue, self.lazy_delay, |q| !q.urgent() && !q.stopping)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            let stopping = queue.stopping;
            let heartbeat_due = queue.pending.is_empty() && !stopping;
            drop(queue);
            if heartbeat_due {
                self.enqueue("run_heartbeat", None, None, &serde_json::json!({}), false);
            }
            next_heartbeat = Instant::now() + interval;
            if self.flush().is_err() {
                self.failed.store(true, Ordering::SeqCst);
                if stopping {
                    return;
                }
                // Not a busy loop against a warehouse that refuses.
                let queue = self.lock_queue();
                let _ = self
                    .queued
                    .wait_timeout_while(queue, RETRY_DELAY, |q| !q.stopping);
            } else if stopping {
                return;
            }
        }
    }
}

/// The running writer thread; stops when dropped, after writing what is queued.
#[derive(Debug)]
pub struct Heartbeat {
    sink: Arc<RunEventSink>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.sink.lock_queue().stopping = true;
        self.sink.queued.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.sink.writer_running.store(false, Ordering::SeqCst);
        // Anything queued while the thread was stopping.
        if self.sink.flush().is_err() {
            self.sink.failed.store(true, Ordering::SeqCst);
        }
    }
}

/// The events others append to a run's stream (a lock break, a cancellation, a resume by
/// another run): they say nothing about whether the run itself is alive, so its silence
/// ignores them.
pub const FOREIGN_EVENTS: &str = "('lock_broken', 'cancellation_requested', 'cancellation_completed', 'cancellation_failed', 'run_resumed')";

/// Milliseconds since `invocation`'s own last event by the warehouse clock (events others
/// appended do not count); `None` when it left
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
        "SELECT count() AS n, dateDiff('millisecond', max(emitted_at), now64(3, 'UTC')) AS age FROM {} WHERE invocation_id = {} AND event_kind NOT IN {FOREIGN_EVENTS}",
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
    append_event(
        client,
        database,
        invocation,
        "lock_broken",
        &serde_json::json!({"brokenBy": broken_by, "database": database}),
    )
}

/// Appends an event written by someone other than the run (a lock break, a cancellation)
/// to `invocation`'s stream, after its last event.
///
/// # Errors
/// The event could not be written.
pub fn append_event(
    client: &Client,
    database: &str,
    invocation: &str,
    kind: &str,
    payload: &serde_json::Value,
) -> Result<(), WarehouseError> {
    crate::metadata::migrate(client, database)?;
    let events = events_table(database);
    client.execute(
        &format!(
            "INSERT INTO {events} (invocation_id, sequence, event_kind, payload_json) SELECT {owner}, (SELECT max(sequence) FROM {events} WHERE invocation_id = {owner}) + 1, {kind}, {payload}",
            owner = stb_ddl::string_literal(invocation),
            kind = stb_ddl::string_literal(kind),
            payload = stb_ddl::string_literal(&payload.to_string())
        ),
        None,
    )?;
    Ok(())
}

/// Whether someone asked `invocation` to stop (`cancellation_requested` in its stream).
///
/// # Errors
/// The events could not be read.
pub fn cancellation_requested(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<bool, WarehouseError> {
    let rows = client.query(&format!(
        "SELECT count() AS n FROM {} WHERE invocation_id = {} AND event_kind = 'cancellation_requested'",
        events_table(database),
        stb_ddl::string_literal(invocation)
    ))?;
    Ok(rows.text(0, "n").is_some_and(|n| n != "0"))
}

const EVENTS_TABLE: &str = "_streambuild_run_events";

fn events_table(database: &str) -> String {
    stb_ddl::QualifiedName::new(database, EVENTS_TABLE).to_string()
}
