//! `GET /api/state`: the project as the warehouse holds it (what `stb status` reads) and
//! the warehouse's health. The first request takes the snapshot; from then on a
//! background task takes it again every 15 s, so pages that poll never make the warehouse
//! answer per request. A reload or `POST /api/warehouse/refresh` throws the snapshot away;
//! a snapshot that cannot be taken again leaves the last one served, marked `stale` with
//! the error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use stb_engine::health::Health;
use stb_engine::status::ProjectStatus;

use crate::AppState;
use crate::error::ApiError;

/// How often the background task takes the snapshot again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(15);

/// How far back activity counts, as `stb status`'s default `--window`.
const ACTIVITY_WINDOW_SECONDS: u64 = 120;

/// One snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    #[serde(flatten)]
    pub status: ProjectStatus,
    pub warehouse_health: Health,
    /// The compile it was read through (`/api/definitions`' version key).
    pub version_key: String,
    /// When the server took it (ms since the epoch; `captured_at` is the warehouse's clock).
    pub taken_at_ms: u128,
    /// The last attempt to take it again failed: this is older than it should be.
    pub stale: bool,
    /// Why it is stale.
    pub error: Option<serde_json::Value>,
    #[serde(skip)]
    generation: u64,
}

/// The held snapshot and the generation a new one must match.
#[derive(Default)]
pub struct Snapshots {
    slot: tokio::sync::Mutex<Option<Snapshot>>,
    generation: AtomicU64,
}

impl Snapshots {
    /// The next request takes a new snapshot (the held one is served, stale, only when that
    /// fails).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The held snapshot as it is, without reading the warehouse (`None` before the first
    /// one, or while one is being taken).
    pub async fn held(&self) -> Option<Snapshot> {
        self.slot.try_lock().ok().and_then(|slot| slot.clone())
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Reads a new snapshot through the held compile.
async fn take(state: &AppState, generation: u64) -> Result<Snapshot, ApiError> {
    let held = state.held();
    let (Some(compilation), Some((version_key, _))) = (held.compilation.clone(), &held.definitions)
    else {
        return Err(ApiError::compile_failing());
    };
    let version_key = version_key.clone();
    let database = state.database.clone();
    let windows = state.run_windows;
    state
        .warehouse
        .read(move |client| {
            let status = stb_engine::status::read(
                client,
                &database,
                &compilation.project,
                &compilation.compiled,
                ACTIVITY_WINDOW_SECONDS,
                windows,
            )
            .map_err(|e| ApiError::engine(&e))?;
            Ok(Snapshot {
                status,
                warehouse_health: stb_engine::health::read(client, &database),
                version_key,
                taken_at_ms: now_ms(),
                stale: false,
                error: None,
                generation,
            })
        })
        .await
}

/// Takes a snapshot into `slot`; when that fails, the held one (if any) is marked stale
/// and the error returned.
async fn renew(state: &AppState, slot: &mut Option<Snapshot>) -> Result<Snapshot, ApiError> {
    let generation = state.snapshots.generation.load(Ordering::SeqCst);
    match take(state, generation).await {
        Ok(fresh) => {
            *slot = Some(fresh.clone());
            Ok(fresh)
        }
        Err(error) => {
            if let Some(held) = slot.as_mut() {
                held.stale = true;
                held.error = Some(error.detail.clone());
            }
            Err(error)
        }
    }
}

/// The snapshot to serve: the held one until it is thrown away, else a new one (requests
/// arriving meanwhile wait for it rather than read the warehouse again); the held one,
/// stale, when a new one cannot be taken.
///
/// # Errors
/// No snapshot could be taken and none is held: the project never compiled (409), the
/// warehouse cannot be reached (503) or answered an error (502).
pub async fn current(state: &AppState) -> Result<Snapshot, ApiError> {
    let mut slot = state.snapshots.slot.lock().await;
    let generation = state.snapshots.generation.load(Ordering::SeqCst);
    // A stale one is served as it is until the background task or a refresh renews it:
    // requests do not each wait on a warehouse that is failing.
    if let Some(held) = slot.as_ref()
        && held.generation == generation
    {
        return Ok(held.clone());
    }
    match renew(state, &mut slot).await {
        Ok(fresh) => Ok(fresh),
        Err(error) => slot.clone().ok_or(error),
    }
}

/// Takes the snapshot again every [`REFRESH_EVERY`] once a request has asked for one,
/// while the warehouse is reachable, until the server stops.
pub async fn keep_fresh(state: Arc<AppState>) {
    loop {
        tokio::time::sleep(REFRESH_EVERY).await;
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        if !state.warehouse.snapshot().connected {
            continue;
        }
        let mut slot = state.snapshots.slot.lock().await;
        if slot.is_some() {
            let _ = renew(&state, &mut slot).await;
        }
    }
}
