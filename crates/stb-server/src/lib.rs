//! `stb dev`'s HTTP server: the JSON API under `/api`, behind one authentication mode,
//! CSRF proofs on unsafe methods, login throttling and security headers on every answer,
//! and the web UI embedded at build time ([`ui`]) on every other path. Unknown `/api` paths
//! answer JSON 404. Every route and its policy is declared in [`inventory`].
//!
//! The warehouse is reached lazily: the server starts and answers while ClickHouse is down,
//! a background worker keeps trying (1 s doubling to 30 s, then a probe every 10 s), and
//! read routes open a fresh connection per request on a blocking thread.

mod admin;
pub mod auth;
pub mod authz;
pub mod builder;
mod cleanup;
pub mod definitions;
mod destruction;
pub mod error;
mod headers;
pub mod inventory;
pub mod latest;
mod models;
mod planning;
mod quality;
mod routes;
pub mod scheduler;
pub mod sensors;
pub mod serve;
pub mod snapshot;
mod sources;
pub mod throttle;
pub mod ui;
pub mod warehouse;
pub mod watch;
mod work;

use std::sync::{Arc, Mutex};

use axum::Router;
use serde::Serialize;
use stb_control::ControlStore;

pub use auth::{AuthConfig, AuthMode, Principal, UnknownUserPolicy};
pub use warehouse::{Connect, WarehouseStatus};

/// How the project compiled when the server started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompileStatus {
    /// `ok` or `failing`.
    pub state: &'static str,
    pub compiled_at_ms: u128,
    pub models: usize,
    pub sources: usize,
    pub error: Option<serde_json::Value>,
}

/// What the last compile gave the server: its status, and from the last *successful* one
/// the access policy and model ownership (a failed reload keeps serving those).
#[derive(Debug, Clone)]
pub struct Held {
    pub compile: CompileStatus,
    /// The project's `access.yml`, when it has one.
    pub access: Option<stb_project::access::AccessPolicy>,
    /// Each model's pipeline and whether that pipeline is virtual: the authoritative
    /// ownership authorization derives an action's pipelines from.
    pub model_pipelines: std::collections::BTreeMap<String, (String, bool)>,
    /// `GET /api/definitions`: its version key (the ETag) and body, redacted.
    pub definitions: Option<(String, serde_json::Value)>,
    /// The last successful compile itself, which warehouse reads go through.
    pub compilation: Option<Arc<Compilation>>,
}

/// A project and what it compiled to.
#[derive(Debug)]
pub struct Compilation {
    pub project: stb_project::Project,
    pub compiled: stb_compile::Compiled,
}

/// Compiles the project again from disk, with the server's frozen target and variables.
pub type Recompile = Arc<dyn Fn() -> Held + Send + Sync>;

/// Everything the handlers share.
pub struct AppState {
    pub store: ControlStore,
    pub auth: AuthConfig,
    pub project_name: String,
    pub target_name: String,
    pub database: String,
    pub held: std::sync::RwLock<Arc<Held>>,
    /// `None`: reload is not available (tests).
    pub recompile: Option<Recompile>,
    /// One reload at a time.
    pub reloading: tokio::sync::Mutex<()>,
    /// Set when the server begins to stop: live feeds end so shutdown does not wait on
    /// them.
    pub stopping: std::sync::atomic::AtomicBool,
    pub throttle: Mutex<throttle::Throttle>,
    pub warehouse: Arc<warehouse::Warehouse>,
    pub run_windows: stb_engine::runs::Windows,
    /// Builds started from the API, run in this process.
    pub builds: builder::Builds,
    /// `GET /api/state`'s snapshot.
    pub snapshots: snapshot::Snapshots,
    /// The audit scheduler's health.
    pub scheduler: scheduler::Scheduler,
    /// The sensor dispatcher's health and identity.
    pub sensors: sensors::Sensors,
}

impl AppState {
    /// The last successful compile, or 409 while the project has never compiled.
    ///
    /// # Errors
    /// The project has never compiled.
    pub fn compilation(&self) -> Result<Arc<Compilation>, error::ApiError> {
        self.held()
            .compilation
            .clone()
            .ok_or_else(error::ApiError::compile_failing)
    }

    /// What the server holds now.
    #[must_use]
    pub fn held(&self) -> Arc<Held> {
        self.held
            .read()
            .map(|h| Arc::clone(&h))
            .unwrap_or_else(|poisoned| Arc::clone(&poisoned.into_inner()))
    }
}

/// The whole application: API routes, authentication, headers, JSON 404, the web UI.
pub fn router(state: Arc<AppState>) -> Router {
    routes::api()
        .fallback(ui::serve)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            routes::gate,
        ))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .with_state(state)
}

/// Whether `host` is a loopback address (`localhost`, `127.x`, `::1`).
#[must_use]
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    /// Everything the server does runs in its own process, through the functions the
    /// commands call: no source of it starts a process.
    #[test]
    fn no_handler_starts_a_process() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut read = 0;
        for entry in std::fs::read_dir(&src).expect("the sources").flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            read += 1;
            // Spelt in parts, so this test does not find itself.
            for needle in [
                ["process::", "Command"],
                ["Command", "::new"],
                ["current", "_exe"],
            ] {
                let needle = needle.concat();
                assert!(
                    !text.contains(&needle),
                    "{} uses {needle}",
                    entry.path().display()
                );
            }
        }
        assert!(read > 20, "the sources were read: {read}");
    }
}
