//! Sensors inside `stb dev`: a dispatcher that makes a pass every 10 s (see
//! [`stb_sensors::dispatch`]) while `[sensors] enabled = true`, and the `/api/sensors*`
//! routes. Dispatchers of several servers on one control store take turns through the
//! target's lease; the one without it stands by. Its health is in `GET /api/sensors`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use stb_sensors::{Dispatcher, SensorError};

use crate::AppState;
use crate::auth::Principal;
use crate::error::ApiError;

const TICK: Duration = Duration::from_secs(10);
const MAX_BACKOFF_SECONDS: u64 = 300;

/// The dispatcher's health, as `GET /api/sensors` shows it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `disabled`, `idle`, `running`, `standby` (another server holds the lease) or
    /// `backing_off`.
    pub state: &'static str,
    pub consecutive_errors: u32,
    pub latest_error: Option<String>,
    pub backoff_seconds: u64,
    pub next_tick_seconds: u64,
    /// UTC, `YYYY-MM-DD HH:MM:SS.mmm`.
    pub last_successful_tick: Option<String>,
    pub last_evaluated_count: Option<u32>,
    /// `None` before the first pass.
    pub lease_held: Option<bool>,
}

/// The server's dispatcher: its health and its identity among the target's dispatchers.
pub struct Sensors {
    health: crate::latest::Latest<Health>,
    /// Who this server is to the lease and in the ticks it records.
    owner: String,
    /// The dispatcher of the loop, rebuilt when the project's sensors change.
    dispatcher: Mutex<Option<Dispatcher>>,
}

impl Default for Sensors {
    fn default() -> Self {
        Self {
            health: crate::latest::Latest::new(Health {
                state: "disabled",
                next_tick_seconds: TICK.as_secs(),
                ..Health::default()
            }),
            owner: format!("stb-dev-{}", uuid::Uuid::new_v4().simple()),
            dispatcher: Mutex::new(None),
        }
    }
}

impl Sensors {
    fn update(&self, change: impl FnOnce(&mut Health)) {
        self.health.update(change);
    }

    #[must_use]
    pub fn health(&self) -> Health {
        self.health.get()
    }
}

fn api_error(error: &SensorError) -> ApiError {
    ApiError::new(
        StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_GATEWAY),
        error.message.clone(),
    )
}

/// Makes a dispatcher of `compilation`'s sensors for this server, on a blocking thread
/// (its ledger calls wait on the current runtime); its worker starts only if it runs a
/// sensor.
fn dispatcher_of(
    state: &AppState,
    compilation: Arc<crate::Compilation>,
) -> impl FnOnce() -> Dispatcher + Send + 'static {
    let (store, database, owner) = (
        state.store.clone(),
        state.database.clone(),
        state.sensors.owner.clone(),
    );
    let handle = tokio::runtime::Handle::current();
    move || Dispatcher::new(&compilation.project, &database, store, handle, &owner)
}

/// A dispatcher for one request, over the project as compiled now. Runs `work` on a
/// blocking thread.
async fn with_dispatcher<T: Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&mut Dispatcher) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let make = dispatcher_of(state, state.compilation()?);
    tokio::task::spawn_blocking(move || work(&mut make()))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// One pass of the loop's dispatcher: `Ok(None)` when sensors are off for the project.
async fn tick(state: &Arc<AppState>) -> Result<Option<stb_sensors::PassSummary>, String> {
    let Some(compilation) = state.held().compilation.clone() else {
        return Ok(None);
    };
    let sensors = &compilation.project.sensors;
    if !sensors.settings.enabled
        || sensors.definitions.is_empty()
        || !state.warehouse.snapshot().connected
    {
        return Ok(None);
    }
    let shared = Arc::clone(state);
    let make = dispatcher_of(state, Arc::clone(&compilation));
    state
        .warehouse
        .read(move |client| {
            let mut slot = shared
                .sensors
                .dispatcher
                .lock()
                .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "poisoned"))?;
            if !slot
                .as_ref()
                .is_some_and(|d| d.serves(&compilation.project.sensors))
            {
                *slot = Some(make());
            }
            let dispatcher = slot
                .as_mut()
                .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no dispatcher"))?;
            dispatcher.pass(client).map_err(|e| api_error(&e))
        })
        .await
        .map(Some)
        .map_err(|e| match e.detail {
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        })
}

/// Passes until the server stops; errors back off 10 s doubling to 300 s. On the way out
/// the lease is given back, so another server's dispatcher takes over at once.
pub async fn run(state: Arc<AppState>) {
    loop {
        if state.stopping.load(Ordering::SeqCst) {
            break;
        }
        let outcome = tick(&state).await;
        let wait = match outcome {
            Ok(None) => {
                state.sensors.update(|h| {
                    h.state = "disabled";
                    h.consecutive_errors = 0;
                    h.backoff_seconds = 0;
                });
                TICK
            }
            Ok(Some(summary)) => {
                state.sensors.update(|h| {
                    h.state = if summary.lease_held {
                        "idle"
                    } else {
                        "standby"
                    };
                    h.consecutive_errors = 0;
                    h.backoff_seconds = 0;
                    h.lease_held = Some(summary.lease_held);
                    if summary.lease_held {
                        h.last_successful_tick = Some(stb_sensors::timestamp(now_ms()));
                        h.last_evaluated_count = Some(summary.evaluated);
                    }
                });
                TICK
            }
            Err(error) => {
                let mut backoff = 0;
                state.sensors.update(|h| {
                    h.consecutive_errors += 1;
                    backoff = (10u64 << (h.consecutive_errors - 1).min(5)).min(MAX_BACKOFF_SECONDS);
                    h.backoff_seconds = backoff;
                    h.latest_error = Some(error);
                    h.state = "backing_off";
                });
                Duration::from_secs(backoff)
            }
        };
        state
            .sensors
            .update(|h| h.next_tick_seconds = wait.as_secs().max(TICK.as_secs()));
        tokio::time::sleep(wait).await;
    }
}

/// Gives the lease back when the server stops, unless a pass is still running (a slow
/// handler): the server does not wait for it, and the lease expires on its own.
pub async fn release(state: &Arc<AppState>) {
    let shared = Arc::clone(state);
    let _ = tokio::task::spawn_blocking(move || {
        if let Ok(slot) = shared.sensors.dispatcher.try_lock()
            && let Some(dispatcher) = slot.as_ref()
        {
            let _ = dispatcher.release();
        }
    })
    .await;
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `GET /api/sensors`: every sensor with its status and last tick, the dead letters'
/// count, and the dispatcher's health.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let view = with_dispatcher(&state, |d| d.view().map_err(|e| api_error(&e))).await?;
    let mut shown = serde_json::to_value(&view)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    shown["health"] = serde_json::to_value(state.sensors.health()).unwrap_or_default();
    Ok(Json(shown))
}

/// `GET /api/sensors/dead-letters`.
pub(crate) async fn dead_letters(
    State(state): State<Arc<AppState>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let letters = with_dispatcher(&state, |d| d.dead_letters().map_err(|e| api_error(&e))).await?;
    Ok(Json(serde_json::json!({ "deadLetters": letters })))
}

#[derive(Debug, Deserialize)]
pub(crate) struct TicksQuery {
    limit: Option<i64>,
    after: Option<String>,
    before: Option<String>,
}

/// `GET /api/sensors/{name}/ticks?limit=1..500&after=ISO&before=ISO`.
pub(crate) async fn ticks(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(query): Query<TicksQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let bound = |label: &str, value: Option<&String>| -> Result<Option<i64>, ApiError> {
        value
            .map(|text| {
                stb_sensors::parse_iso_ms(text).ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("{label} must be an ISO timestamp, received '{text}'"),
                    )
                })
            })
            .transpose()
    };
    let window = (
        bound("after", query.after.as_ref())?,
        bound("before", query.before.as_ref())?,
    );
    let limit = query.limit.unwrap_or(50);
    let sensor = name.clone();
    let ticks = with_dispatcher(&state, move |d| {
        d.ticks(&sensor, limit, window).map_err(|e| api_error(&e))
    })
    .await?;
    Ok(Json(
        serde_json::json!({ "sensorName": name, "ticks": ticks }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StatusRequest {
    status: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventRequest {
    sensor_name: String,
    event_id: String,
    #[serde(default)]
    reason: Option<String>,
}

async fn authorize(state: &Arc<AppState>, principal: &Principal) -> Result<(), ApiError> {
    crate::work::authorize_in(
        state,
        principal,
        "automation.manage",
        crate::authz::Scope::Target,
    )
    .await
}

/// `POST /api/sensors/{name}/status` with `{status: running|stopped|declared_in_code}`.
pub(crate) async fn set_status(
    State(state): State<Arc<AppState>>,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(name): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&state, &principal).await?;
    let request: StatusRequest = crate::error::json_body(&bytes)?;
    let actor = principal.username.clone();
    let sensor = name.clone();
    let status = with_dispatcher(&state, move |d| {
        d.set_status(&sensor, &request.status, Some(&actor))
            .map_err(|e| api_error(&e))
    })
    .await?;
    Ok(Json(
        serde_json::json!({ "sensorName": name, "status": status }),
    ))
}

/// `POST /api/sensors/dead-letters/retry` with `{sensorName, eventId}`.
pub(crate) async fn retry(
    State(state): State<Arc<AppState>>,
    axum::Extension(principal): axum::Extension<Principal>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&state, &principal).await?;
    let request: EventRequest = crate::error::json_body(&bytes)?;
    let make = dispatcher_of(&state, state.compilation()?);
    let (sensor, event) = (request.sensor_name.clone(), request.event_id.clone());
    let status = state
        .warehouse
        .read(move |client| {
            make()
                .retry(client, &sensor, &event)
                .map_err(|e| api_error(&e))
        })
        .await?;
    Ok(Json(serde_json::json!({
        "sensorName": request.sensor_name,
        "eventId": request.event_id,
        "status": status,
    })))
}

/// `POST /api/sensors/dead-letters/skip` with `{sensorName, eventId, reason}`.
pub(crate) async fn skip(
    State(state): State<Arc<AppState>>,
    axum::Extension(principal): axum::Extension<Principal>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&state, &principal).await?;
    let request: EventRequest = crate::error::json_body(&bytes)?;
    let (sensor, event) = (request.sensor_name.clone(), request.event_id.clone());
    let reason = request.reason.clone().unwrap_or_default();
    with_dispatcher(&state, move |d| {
        d.skip(&sensor, &event, &reason).map_err(|e| api_error(&e))
    })
    .await?;
    Ok(Json(serde_json::json!({
        "sensorName": request.sensor_name,
        "eventId": request.event_id,
        "status": "skipped",
    })))
}
