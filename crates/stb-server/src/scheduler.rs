//! The audit scheduler inside `stb dev`: every 10 s it runs the audits whose slot is due
//! (see [`stb_engine::schedule`]) against the live relations, recorded as `audit` runs
//! with the trigger `scheduled`. It waits while a build runs (one this server started, or
//! any live run of the target) so audits never read a half-built relation. Its health is
//! `GET /api/audit-scheduler`. Enabled by `[audit_scheduler] enabled = true`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use stb_engine::schedule::Slot;

use crate::AppState;
use crate::error::ApiError;

const TICK: Duration = Duration::from_secs(10);
const MAX_BACKOFF_SECONDS: u64 = 300;
/// Failed or erroring audit results kept for the health card.
const RECENT_FAILURES: usize = 20;

/// A scheduled audit that did not pass.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub name: String,
    pub status: String,
    pub message: Option<String>,
    pub at_ms: u128,
}

/// What the scheduler last did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    /// `disabled`, `idle`, `running`, `blocked` or `backing_off`; `starting` before the
    /// first tick.
    pub state: &'static str,
    /// Why it is blocked.
    pub reason: Option<String>,
    pub consecutive_errors: u32,
    pub latest_error: Option<String>,
    pub backoff_seconds: u64,
    pub last_tick_at_ms: Option<u128>,
    pub last_successful_tick_at_ms: Option<u128>,
    pub next_tick_at_ms: Option<u128>,
    pub running_audit_count: usize,
    /// The warehouse's clock at the last tick that read it (ms since the epoch).
    pub warehouse_now_ms: Option<i64>,
    /// Every scheduled audit's place at that tick.
    pub audits: Vec<Slot>,
    pub recent_failures: Vec<Failure>,
}

/// The scheduler's shared view.
pub struct Scheduler {
    health: crate::latest::Latest<Health>,
}

impl Default for Scheduler {
    fn default() -> Self {
        Self {
            health: crate::latest::Latest::new(Health {
                state: "starting",
                ..Health::default()
            }),
        }
    }
}

impl Scheduler {
    fn update(&self, change: impl FnOnce(&mut Health)) {
        self.health.update(change);
    }

    #[must_use]
    pub fn health(&self) -> Health {
        self.health.get()
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Why the scheduler may not run audits now, if it may not.
fn blocked(state: &AppState) -> Option<String> {
    if !state.warehouse.snapshot().connected {
        return Some("no warehouse connection".to_owned());
    }
    state
        .builds
        .running()
        .map(|run| format!("build {run} started from this server is running"))
}

/// One tick: plan, and run what is due. `Ok(false)` when it was blocked or disabled.
async fn tick(state: &AppState) -> Result<bool, String> {
    let held = state.held();
    let Some(compilation) = held.compilation.clone() else {
        state.scheduler.update(|h| {
            h.state = "blocked";
            h.reason = Some("the project has never compiled".to_owned());
        });
        return Ok(false);
    };
    if !compilation.project.audit_scheduler_enabled {
        state.scheduler.update(|h| {
            h.state = "disabled";
            h.reason = None;
            h.audits.clear();
        });
        return Ok(false);
    }
    if let Some(reason) = blocked(state) {
        state.scheduler.update(|h| {
            h.state = "blocked";
            h.reason = Some(reason);
        });
        return Ok(false);
    }
    let database = state.database.clone();
    let windows = state.run_windows;
    let planning = Arc::clone(&compilation);
    let (live, observed, slots) = state
        .warehouse
        .read(move |client| {
            let live: Vec<String> =
                stb_warehouse::runs::active(client, &database, windows.presumed_failed_ms)
                    .map_err(|e| ApiError::new(axum::http::StatusCode::BAD_GATEWAY, e.message))?
                    .iter()
                    .map(|run| stb_engine::runs::summarise(run, windows))
                    .filter(|run| matches!(run.status, "running" | "unresponsive"))
                    .map(|run| run.invocation_id)
                    .collect();
            let target = &planning.project.target;
            let observed = stb_engine::schedule::observe(client, &database, target)
                .map_err(|e| ApiError::engine(&e))?;
            let scheduled = stb_engine::schedule::scheduled(client, &database, &planning.compiled)
                .map_err(|e| ApiError::engine(&e))?;
            let slots = stb_engine::schedule::plan(&scheduled, &observed);
            Ok((live, observed, slots))
        })
        .await
        .map_err(|e| e.detail.to_string())?;
    let due: Vec<Slot> = slots.iter().filter(|s| s.state == "due").cloned().collect();
    state.scheduler.update(|h| {
        h.warehouse_now_ms = Some(observed.now_ms);
        h.audits = slots;
    });
    if let Some(run) = live.first() {
        state.scheduler.update(|h| {
            h.state = "blocked";
            h.reason = Some(format!("run {run} is building this target"));
        });
        return Ok(false);
    }
    if due.is_empty() {
        return Ok(true);
    }
    state.scheduler.update(|h| {
        h.state = "running";
        h.reason = None;
        h.running_audit_count = due.len();
    });
    let database = state.database.clone();
    let results = state
        .warehouse
        .read(move |client| {
            let slots: Vec<&Slot> = due.iter().collect();
            stb_engine::schedule::run_due(
                client,
                &database,
                &compilation.project,
                &compilation.compiled,
                &slots,
            )
            .map(|results| {
                results
                    .into_iter()
                    .filter(|r| !matches!(r.status, "passed" | "deferred"))
                    .map(|r| Failure {
                        name: r.name,
                        status: r.status.to_owned(),
                        message: r.message,
                        at_ms: now_ms(),
                    })
                    .collect::<Vec<_>>()
            })
            .map_err(|e| ApiError::engine(&e))
        })
        .await;
    state.scheduler.update(|h| h.running_audit_count = 0);
    let failures = results.map_err(|e| e.detail.to_string())?;
    state.scheduler.update(|h| {
        h.recent_failures.splice(0..0, failures);
        h.recent_failures.truncate(RECENT_FAILURES);
    });
    Ok(true)
}

/// Ticks until the server stops; errors back off 10 s doubling to 300 s.
pub async fn run(state: Arc<AppState>) {
    loop {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        let outcome = tick(&state).await;
        let wait = match outcome {
            Ok(ran) => {
                state.scheduler.update(|h| {
                    h.consecutive_errors = 0;
                    h.backoff_seconds = 0;
                    h.last_tick_at_ms = Some(now_ms());
                    if ran {
                        h.state = "idle";
                        h.reason = None;
                        h.last_successful_tick_at_ms = h.last_tick_at_ms;
                    }
                });
                TICK
            }
            Err(error) => {
                let mut backoff = 0;
                state.scheduler.update(|h| {
                    h.consecutive_errors += 1;
                    backoff = (10u64 << (h.consecutive_errors - 1).min(5)).min(MAX_BACKOFF_SECONDS);
                    h.backoff_seconds = backoff;
                    h.latest_error = Some(error);
                    h.state = "backing_off";
                    h.last_tick_at_ms = Some(now_ms());
                });
                Duration::from_secs(backoff)
            }
        };
        state
            .scheduler
            .update(|h| h.next_tick_at_ms = Some(now_ms() + wait.as_millis()));
        tokio::time::sleep(wait).await;
    }
}

/// `GET /api/audit-scheduler`: whether it is enabled, its state and each scheduled audit.
pub(crate) async fn health(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let enabled = state
        .held()
        .compilation
        .as_ref()
        .is_some_and(|c| c.project.audit_scheduler_enabled);
    let health = state.scheduler.health();
    let due = health.audits.iter().filter(|a| a.state == "due").count();
    Json(serde_json::json!({
        "enabled": enabled,
        "state": health.state,
        "dueCount": due,
        "health": health,
    }))
}
