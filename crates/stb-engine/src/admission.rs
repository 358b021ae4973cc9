//! Admission: whether a build may start while other runs are still going.
//!
//! The target lock already keeps two runs from writing at once. Admission comes first and
//! answers a different question: is this build's plan still right when it gets to run? A
//! build whose scope overlaps a live run (it writes what the other reads or writes, or
//! reads what the other writes) was planned against relations that run is changing, so it
//! is refused, naming the run, its owner and its scope. A build that overlaps nothing is
//! admitted and queues behind the lock ([`acquire`]). Runs presumed failed never block
//! admission; a lock such a run left stays until `stb unlock` breaks it (no age-based
//! takeover: a run can only be presumed failed, never known dead).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use stb_warehouse::runs::{RunRow, active, one};
use stb_warehouse::{Client, LockError, TargetLock};

use crate::EngineError;
use crate::runs::{Windows, status};

/// A build overlaps a live run.
pub const OVERLAP_CODE: &str = "STB-RUNS-003";
/// The lock is held by a run that is not running any more (unresponsive or presumed failed).
pub const STALE_LOCK_CODE: &str = "STB-RUNS-004";
/// The build was interrupted while it waited for the lock; nothing ran.
pub const WAIT_INTERRUPTED_CODE: &str = "STB-RUNS-005";

/// The build's scope left the pipelines it was authorised for.
pub const UNAUTHORISED_SCOPE_CODE: &str = "STB-RUNS-006";
/// The lock is held by a build suspended inside a chunked replay.
pub const SUSPENDED_CODE: &str = "STB-LOCK-005";

/// Refuses a build whose models (`scope.writes`, `model:<name>`) belong to a pipeline
/// outside `authorised` (the dev server passes the pipelines it authorised; the scope may
/// have grown between its plan and this one).
///
/// # Errors
/// The pipelines outside, named ([`UNAUTHORISED_SCOPE_CODE`]).
pub fn within_authorised(
    scope: &Scope,
    pipeline_of: &dyn Fn(&str) -> Option<String>,
    authorised: &[String],
) -> Result<(), EngineError> {
    let mut outside: BTreeSet<String> = BTreeSet::new();
    for id in &scope.writes {
        let model = id.strip_prefix("model:").unwrap_or(id);
        match pipeline_of(model) {
            Some(pipeline) if authorised.contains(&pipeline) => {}
            Some(pipeline) => {
                outside.insert(pipeline);
            }
            None => {
                outside.insert(format!("(unowned model {model})"));
            }
        }
    }
    if outside.is_empty() {
        return Ok(());
    }
    Err(EngineError::new(
        UNAUTHORISED_SCOPE_CODE,
        format!(
            "the build's scope changed since it was authorised: it now also touches {}; nothing was started",
            outside.into_iter().collect::<Vec<_>>().join(", ")
        ),
        "plan again and start the build again: it is authorised on what it will build",
    ))
}

/// What a run writes and reads, as logical ids (`model:<name>`, `source:<name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scope {
    pub writes: BTreeSet<String>,
    pub reads: BTreeSet<String>,
}

impl Scope {
    #[must_use]
    pub fn new(
        writes: impl IntoIterator<Item = String>,
        reads: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            writes: writes.into_iter().collect(),
            reads: reads.into_iter().collect(),
        }
    }

    /// A run's scope from its `run_started` payload (`executedLogicalIds` are written,
    /// `contextLogicalIds` read); `None` when the payload does not say (a destruction, an
    /// older tool), which conflicts with everything.
    #[must_use]
    pub fn of_run_started(payload: Option<&str>) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(payload?).ok()?;
        let ids = |field: &str| -> Option<Vec<String>> {
            value[field]
                .as_array()?
                .iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect()
        };
        Some(Self::new(
            ids("executedLogicalIds")?,
            ids("contextLogicalIds").unwrap_or_default(),
        ))
    }

    /// The union of two scopes (a mixed build's phases).
    #[must_use]
    pub fn union(mut self, other: &Self) -> Self {
        self.writes.extend(other.writes.iter().cloned());
        self.reads.extend(other.reads.iter().cloned());
        self
    }
}

/// Where `requested` meets a live run of scope `live`: the ids one writes and the other
/// reads or writes. A run whose scope is unknown meets everything (reported as `*`).
#[must_use]
pub fn overlap(live: Option<&Scope>, requested: &Scope) -> Vec<String> {
    let Some(live) = live else {
        return vec!["*".to_owned()];
    };
    let mut shared: BTreeSet<&String> = BTreeSet::new();
    shared.extend(live.writes.intersection(&requested.writes));
    shared.extend(live.writes.intersection(&requested.reads));
    shared.extend(live.reads.intersection(&requested.writes));
    shared.into_iter().cloned().collect()
}

/// A live run that stands in a build's way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub invocation_id: String,
    /// `running` or `unresponsive`.
    pub status: &'static str,
    pub owner: Option<String>,
    pub display_command: Option<String>,
    pub started_at: Option<String>,
    pub silent_ms: i64,
    /// What it writes (its scope); empty when unknown.
    pub writes: Vec<String>,
    /// Where it meets the requested build (`*`: everywhere).
    pub overlap: Vec<String>,
}

/// Whether a run of this status can still write: it may be alive.
fn may_be_alive(run: &RunRow, windows: Windows) -> Option<&'static str> {
    match status(run, windows) {
        live @ ("running" | "unresponsive") => Some(live),
        // A cancellation that did not confirm leaves a run that may still be writing.
        "cancellation_failed"
            if run
                .silent_ms
                .is_some_and(|s| s < windows.presumed_failed_ms) =>
        {
            Some(if run.silent_ms.is_some_and(|s| s < windows.signal_ms) {
                "running"
            } else {
                "unresponsive"
            })
        }
        _ => None,
    }
}

/// `run` as a blocker of `requested`, when it may be alive and overlaps it.
#[must_use]
pub fn blocker(run: &RunRow, requested: &Scope, windows: Windows) -> Option<Blocker> {
    let status = may_be_alive(run, windows)?;
    let scope = Scope::of_run_started(run.run_started.as_deref());
    let overlap = overlap(scope.as_ref(), requested);
    if overlap.is_empty() {
        return None;
    }
    let started: serde_json::Value = run
        .run_started
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    Some(Blocker {
        invocation_id: run.invocation_id.clone(),
        status,
        owner: owner_of(run.run_started.as_deref()),
        display_command: started["displayCommand"].as_str().map(str::to_owned),
        started_at: run.started_at.clone(),
        silent_ms: run.silent_ms.unwrap_or(0),
        writes: scope
            .map(|s| s.writes.into_iter().collect())
            .unwrap_or_default(),
        overlap,
    })
}

fn seconds(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}

fn listed(ids: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = ids
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        text.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    text
}

/// The refusal for a build `blocker` stands in the way of: who, what, and what to do.
#[must_use]
pub fn refusal(blocker: &Blocker, windows: Windows) -> EngineError {
    let who = blocker.owner.as_deref().unwrap_or("an unknown owner");
    let scope = if blocker.writes.is_empty() {
        "an unknown scope".to_owned()
    } else {
        listed(&blocker.writes)
    };
    let meets = if blocker.overlap == ["*"] {
        "its scope is not recorded, so it may touch anything".to_owned()
    } else {
        format!("both touch {}", listed(&blocker.overlap))
    };
    let id = &blocker.invocation_id;
    // Commands take the short id the run list prints.
    let short = crate::runs::short_id(id);
    if blocker.status == "unresponsive" {
        let remaining = windows.presumed_failed_ms - blocker.silent_ms;
        return EngineError::new(
            OVERLAP_CODE,
            format!(
                "Run {id} is unresponsive: no signal for {}s. No new run was started. To prevent overlapping warehouse writes, StreamBuild will wait {}s more before treating it as presumed failed (configured safety window: {}s via defaults.run_presumed_failed_after). Retry after that. (Owner {who}; it writes {scope}; {meets}.)",
                seconds(blocker.silent_ms),
                seconds(remaining),
                seconds(windows.presumed_failed_ms),
            ),
            format!(
                "if its process is gone, retry once it is presumed failed; `stb runs show {short}` shows its last activity"
            ),
        );
    }
    EngineError::new(
        OVERLAP_CODE,
        format!(
            "Run {id} is still running (owner {who}, started {}): it writes {scope}, and {meets}. No new run was started.",
            blocker
                .started_at
                .as_deref()
                .unwrap_or("at an unknown time"),
        ),
        format!(
            "wait for it to finish (`stb runs show {short}`), or cancel it: `stb runs cancel {short}`"
        ),
    )
}

/// Refuses `requested` when a live run other than its own (`own`: a mixed build has one
/// per phase) overlaps it.
///
/// # Errors
/// The first overlapping live run ([`OVERLAP_CODE`]), or a read failed.
pub fn admit(
    client: &Client,
    database: &str,
    own: &[&str],
    requested: &Scope,
    windows: Windows,
) -> Result<(), EngineError> {
    let runs =
        active(client, database, windows.presumed_failed_ms).map_err(|e| EngineError::from(&e))?;
    match runs
        .iter()
        .filter(|run| !own.contains(&run.invocation_id.as_str()))
        .find_map(|run| blocker(run, requested, windows))
    {
        Some(blocker) => Err(refusal(&blocker, windows)),
        None => Ok(()),
    }
}

/// How an admitted build waits for the target lock.
pub struct LockWait<'a> {
    pub scope: Scope,
    pub windows: Windows,
    /// Told once per holder the build starts waiting for (its id, and its owner if known).
    pub on_wait: &'a (dyn Fn(&str, Option<&str>) + Sync),
}

/// How often a waiting build tries the lock again.
const RETRY: Duration = Duration::from_millis(500);

/// How long the lock's holder has held it without running: the window a waiting build
/// gives a holder that ended (or records no run) to give the lock back counts from when it
/// was first seen so, not from when the build began waiting. Counted from the start of the
/// wait, a build queued behind a long run gave up the moment that run ended, before its
/// release (a build waiting 50 s behind a replay was refused with the lock "held").
#[derive(Debug, Default)]
struct HandOver {
    /// The holder seen not running, and since when.
    since: Option<(String, Instant)>,
}

impl HandOver {
    /// The holder was seen running: any earlier hand-over did not happen yet.
    fn running(&mut self) {
        self.since = None;
    }

    /// `holder` was seen at `now` holding the lock without running; how long it has been so.
    fn not_running(&mut self, holder: &str, now: Instant) -> Duration {
        match &self.since {
            Some((seen, since)) if seen == holder => now.saturating_duration_since(*since),
            _ => {
                self.since = Some((holder.to_owned(), now));
                Duration::ZERO
            }
        }
    }
}

/// Takes `database`'s lock for the first of runs `own` (a mixed build has two), waiting
/// while a live run that does not overlap this build holds it. Every retry admits the
/// build again: a run that started since and overlaps refuses it (its plan may be wrong).
///
/// # Errors
/// An overlapping run ([`OVERLAP_CODE`]); the lock's run stopped signalling
/// ([`STALE_LOCK_CODE`]); the wait was interrupted ([`WAIT_INTERRUPTED_CODE`]); a holder
/// that ended, or has no run record, kept it longer than the signal window after it was
/// first seen so (the lock's own error).
pub fn acquire<'c>(
    client: &'c Client,
    database: &str,
    own: &[&str],
    wait: &LockWait<'_>,
    interrupt: &AtomicBool,
) -> Result<TargetLock<'c>, EngineError> {
    let owner = own.first().copied().unwrap_or_default();
    let mut hand_over = HandOver::default();
    let mut told: Option<String> = None;
    loop {
        // The database is there: the build recorded its manifest in it before it asked
        // for the lock (creating it again was one more request per build).
        let holder = match TargetLock::acquire(client, database, owner, false) {
            Ok(lock) => return Ok(lock),
            Err(LockError::Held { owner, .. }) => owner,
            Err(other) => return Err(EngineError::from(&other)),
        };
        admit(client, database, own, &wait.scope, wait.windows)?;
        let run = one(client, database, &holder).map_err(|e| EngineError::from(&e))?;
        match run.as_ref().map(|run| (status(run, wait.windows), run)) {
            Some(("running", _)) => hand_over.running(),
            Some((state @ ("unresponsive" | "presumed_failed"), run)) => {
                return Err(stale_lock(database, &holder, state, run, wait.windows));
            }
            // Ended but not given back yet (its release is a moment away), or held by a
            // command that records no run (promote, rollback, janitor: short ones). Either
            // is waited for at most the signal window: a lock an ended run failed to give
            // back stays until `stb unlock`.
            // Suspended: it keeps the lock until it is resumed or given back; waiting for
            // it would only end in the same refusal.
            Some(_) => {
                if let Some((suspended, _)) =
                    crate::unlock::suspended_under(client, database, &holder)?
                {
                    return Err(EngineError::new(
                        SUSPENDED_CODE,
                        format!(
                            "the target lock of '{database}' is held by run {suspended}, a build suspended inside a chunked replay (what it built is partly filled); nothing ran"
                        ),
                        format!(
                            "`stb build --resume {suspended}` finishes it; `stb unlock` gives the target back as it found it; then build again"
                        ),
                    ));
                }
                wait_for_hand_over(&mut hand_over, &holder, database, wait.windows)?;
            }
            None => wait_for_hand_over(&mut hand_over, &holder, database, wait.windows)?,
        }
        if told.as_deref() != Some(holder.as_str()) {
            let owner = run
                .as_ref()
                .and_then(|r| owner_of(r.run_started.as_deref()));
            (wait.on_wait)(&holder, owner.as_deref());
            told = Some(holder.clone());
        }
        if interrupt.load(Ordering::SeqCst) {
            return Err(EngineError::new(
                WAIT_INTERRUPTED_CODE,
                format!(
                    "interrupted while waiting for run {holder} to release the target lock of '{database}'"
                ),
                "nothing ran; rerun the build when you are ready",
            ));
        }
        std::thread::sleep(RETRY);
    }
}

/// A holder that ended (or records no run) is waited for at most the signal window after
/// it was first seen so; then its lock is reported held.
fn wait_for_hand_over(
    hand_over: &mut HandOver,
    holder: &str,
    database: &str,
    windows: Windows,
) -> Result<(), EngineError> {
    let window = Duration::from_millis(u64::try_from(windows.signal_ms).unwrap_or(45_000));
    if hand_over.not_running(holder, Instant::now()) > window {
        return Err(EngineError::from(&LockError::Held {
            database: database.to_owned(),
            owner: holder.to_owned(),
        }));
    }
    Ok(())
}

/// The `owner` a `run_started` payload names.
fn owner_of(payload: Option<&str>) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(payload?).ok()?;
    value["owner"].as_str().map(str::to_owned)
}

fn stale_lock(
    database: &str,
    holder: &str,
    state: &str,
    run: &RunRow,
    windows: Windows,
) -> EngineError {
    let silent = run.silent_ms.unwrap_or(0);
    let hint = if state == "presumed_failed" {
        "`stb unlock` breaks the lock of a presumed-failed run and records it in that run's events; then rerun this build".to_owned()
    } else {
        format!(
            "if you know its process is gone, `stb unlock` breaks its lock now; otherwise it is presumed failed in {}s",
            seconds(windows.presumed_failed_ms - silent)
        )
    };
    EngineError::new(
        STALE_LOCK_CODE,
        format!(
            "the target lock of '{database}' is held by run {holder}, which is {} (no signal for {}s); nothing ran",
            state.replace('_', " "),
            seconds(silent)
        ),
        hint,
    )
}

#[cfg(test)]
mod tests;
