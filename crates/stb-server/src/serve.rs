//! The dev server as one call: [`serve`] takes what `stb dev` parsed, compiles the project,
//! builds the shared state, binds, starts the background tasks (warehouse watcher, edits,
//! the state snapshot, the audit scheduler) and answers until Ctrl-C or SIGTERM. The CLI
//! only parses its flags, opens the control store and prints what it is told.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use stb_control::ControlStore;
use stb_project::{DiscoverOptions, Project};

use crate::auth::{AuthConfig, AuthMode, UnknownUserPolicy};
use crate::{AppState, Compilation, CompileStatus, Connect, Held};

/// A setting the server refuses to start with.
pub const CONFIG_CODE: &str = "STB-DEV-001";
/// The address could not be bound.
pub const BIND_CODE: &str = "STB-DEV-002";

/// Why the server did not start, or stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl ServeError {
    /// The async runtime could not start.
    fn runtime(error: &std::io::Error) -> Self {
        Self::config(
            format!("cannot start the server runtime: {error}"),
            "this is a bug; please report it",
        )
    }

    fn config(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code: CONFIG_CODE,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// Everything the server runs with.
pub struct ServeConfig {
    /// The project as discovered, its database pinned.
    pub project: Project,
    /// How to discover it again on a reload, and the database to pin then.
    pub rediscover: DiscoverOptions,
    pub database_override: Option<String>,
    pub connect: Connect,
    /// Where `connect` reaches, as the banner shows it (no password).
    pub warehouse_address: String,
    /// The control store's URL.
    pub store_url: String,
    pub auth: AuthConfig,
    /// The address to listen on; port 0 picks a free one.
    pub host: String,
    pub port: u16,
    /// Recompile when a project file changes.
    pub watch: bool,
    pub run_windows: stb_engine::runs::Windows,
}

/// What the server says once it listens.
#[derive(Debug, Clone)]
pub struct Started {
    pub address: String,
    pub compile: CompileStatus,
    pub compile_ms: u128,
    pub project_name: String,
    pub project_root: std::path::PathBuf,
    pub database: String,
    /// The ClickHouse the server connects to, without a password.
    pub warehouse_address: String,
    pub auth_mode: AuthMode,
    /// The control store's address with any password hidden.
    pub store: String,
    pub watch: bool,
}

/// Refuses auth settings that would expose the server: a session that never lasts,
/// auto-provisioned users above viewer, insecure cookies or no authentication beyond
/// loopback. What it allows but the user should hear about comes back as warnings.
///
/// # Errors
/// `STB-DEV-001` with what to change.
pub fn check_settings(
    auth: &AuthConfig,
    default_role: &str,
    host: &str,
    allow_unauthenticated_network_access: bool,
) -> Result<Vec<String>, ServeError> {
    let loopback = crate::is_loopback(host);
    if auth.session_ttl_seconds == 0 {
        return Err(ServeError::config(
            "--auth-session-ttl-seconds must be greater than 0",
            "43200 (12 h) is the default",
        ));
    }
    if auth.mode == AuthMode::TrustedProxy
        && auth.unknown_user_policy == UnknownUserPolicy::AutoProvision
        && default_role != stb_control::VIEWER
    {
        return Err(ServeError::config(
            format!(
                "--auth-default-role {default_role} is not allowed: auto-provisioned users are viewers"
            ),
            "grant more with `stb admin grant-role` once the user exists",
        ));
    }
    if auth.mode == AuthMode::Password && auth.insecure_cookie && !loopback {
        return Err(ServeError::config(
            "insecure password cookies may only be used on a loopback address.",
            "serve HTTPS in front of stb dev and drop --auth-insecure-cookie, or bind 127.0.0.1",
        ));
    }
    if auth.mode == AuthMode::Disabled && !loopback && !allow_unauthenticated_network_access {
        return Err(ServeError::config(
            format!(
                "authentication is disabled and --ui-host {host} is not a loopback address: anyone who reaches it would be an administrator"
            ),
            "use --auth-mode password or trusted_proxy, bind 127.0.0.1, or pass --allow-unauthenticated-network-access",
        ));
    }
    let mut warnings = Vec::new();
    if auth.mode == AuthMode::Disabled {
        warnings.push("authentication disabled; all clients have administrator access.".to_owned());
    }
    if !loopback {
        warnings.push(format!(
            "listening on {host} (not loopback): anyone who can reach this address can reach the API"
        ));
    }
    Ok(warnings)
}

impl Started {
    /// The banner `stb dev` prints (`version`: the binary's).
    #[must_use]
    pub fn banner(&self, version: &str) -> String {
        let compiled = if self.compile.state == "ok" {
            format!(
                "ok · {} models · {} sources · {} ms",
                self.compile.models, self.compile.sources, self.compile_ms
            )
        } else {
            "failing: the API reports the error at /api/status".to_owned()
        };
        let watch = if self.watch {
            "recompiles when a project file changes"
        } else {
            "off (the UI's Reload button recompiles; --watch to follow edits)"
        };
        format!(
            "StreamBuild {version} dev server\n  project    {} ({})\n  compile    {compiled}\n  warehouse  {} at {} (connecting in the background)\n  auth       {:?}\n  control    {}\n  ui         http://{}/\n  api        http://{}/api\n  watch      {watch}\n  ctrl+c to stop",
            self.project_name,
            self.project_root.display(),
            self.database,
            self.warehouse_address,
            self.auth_mode,
            self.store,
            self.address,
            self.address,
        )
    }
}

/// The database the server works in: the project's (pinned by `--database`), else
/// `default`.
#[must_use]
pub fn database_of(project: &Project) -> String {
    project
        .database
        .clone()
        .unwrap_or_else(|| "default".to_owned())
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn failing(error: serde_json::Value) -> Held {
    Held {
        compile: CompileStatus {
            state: "failing",
            compiled_at_ms: now_ms(),
            models: 0,
            sources: 0,
            error: Some(error),
        },
        access: None,
        model_pipelines: std::collections::BTreeMap::new(),
        definitions: None,
        compilation: None,
    }
}

/// What a compile of `project` gives the server.
#[must_use]
pub fn compile(project: &Project) -> Held {
    let (compile, definitions, compilation) = match stb_compile::compile(project) {
        Ok(compiled) => (
            CompileStatus {
                state: "ok",
                compiled_at_ms: now_ms(),
                models: compiled.models,
                sources: compiled.plan_sources.len(),
                error: None,
            },
            Some(crate::definitions::of(project, &compiled)),
            Some(Arc::new(Compilation {
                project: project.clone(),
                compiled,
            })),
        ),
        Err(diagnostics) => (
            failing(serde_json::json!(diagnostics.into_sorted())).compile,
            None,
            None,
        ),
    };
    Held {
        compile,
        definitions,
        compilation,
        access: project.access.clone(),
        model_pipelines: project
            .pipelines
            .iter()
            .flat_map(|pipeline| {
                let is_virtual = pipeline.mode == stb_project::project_config::Mode::Virtual;
                pipeline
                    .models
                    .iter()
                    .map(move |m| (m.name.clone(), (pipeline.name.clone(), is_virtual)))
            })
            .collect(),
    }
}

/// Discovers and compiles the project again with the options it started with.
fn recompile(options: DiscoverOptions, database: Option<String>) -> crate::Recompile {
    Arc::new(move || match stb_project::discover(&options) {
        Ok(mut project) => {
            if let Some(database) = &database {
                project.database = Some(database.clone());
            }
            compile(&project)
        }
        Err(diagnostics) => failing(serde_json::json!(diagnostics.into_sorted())),
    })
}

/// Serves on a runtime of its own until Ctrl-C or SIGTERM; `started` is told where once
/// it listens.
///
/// # Errors
/// The runtime or the control store cannot start, the address cannot be bound
/// (`STB-DEV-002`), or the server stopped on an error.
pub fn run(config: ServeConfig, started: impl FnOnce(&Started)) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| ServeError::runtime(&error))?;
    let served = runtime.block_on(async {
        let store = ControlStore::open(&config.store_url)
            .await
            .map_err(|error| ServeError {
                code: error.code(),
                hint: error.hint().into(),
                message: error.message,
            })?;
        serve(config, store, started).await
    });
    // A build was given back before `serve` returned; what may still run on a blocking
    // thread (a sensor's handler, a read the warehouse does not answer) does not keep the
    // process from ending.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
}

/// How long blocking work still running may delay the end of `stb dev` once it stopped.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves until Ctrl-C or SIGTERM with the control store `store`; `started` is told where
/// once it listens.
///
/// # Errors
/// The address cannot be bound (`STB-DEV-002`), or the server stopped on an error.
pub async fn serve(
    config: ServeConfig,
    store: ControlStore,
    started: impl FnOnce(&Started),
) -> Result<(), ServeError> {
    let project = config.project;
    let database = database_of(&project);
    // What the watch compares edits with: the files as discovery read them, taken before
    // the compile (an edit made as soon as the banner appeared is seen).
    let read = config
        .watch
        .then(|| crate::watch::fingerprint(&project.root));
    let compiling = std::time::Instant::now();
    let held = compile(&project);
    let compile_ms = compiling.elapsed().as_millis();
    let address = format!("{}:{}", config.host, config.port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|error| ServeError {
            code: BIND_CODE,
            message: format!("cannot listen on {address}: {error}"),
            hint: "pick another --ui-port (0 picks a free one) or stop what uses it".into(),
        })?;
    let state = Arc::new(AppState {
        store,
        auth: config.auth,
        project_name: project.name.clone(),
        target_name: project.target.clone(),
        database: database.clone(),
        held: std::sync::RwLock::new(Arc::new(held)),
        recompile: Some(recompile(config.rediscover, config.database_override)),
        reloading: tokio::sync::Mutex::new(()),
        stopping: std::sync::atomic::AtomicBool::new(false),
        throttle: Mutex::default(),
        warehouse: Arc::new(crate::warehouse::Warehouse::new(config.connect, &database)),
        run_windows: config.run_windows,
        builds: crate::builder::Builds::default(),
        snapshots: crate::snapshot::Snapshots::default(),
        scheduler: crate::scheduler::Scheduler::default(),
        sensors: crate::sensors::Sensors::default(),
    });
    started(&Started {
        address: listener
            .local_addr()
            .map_or(address.clone(), |a| a.to_string()),
        compile: state.held().compile.clone(),
        compile_ms,
        project_name: project.name.clone(),
        project_root: project.root.clone(),
        database,
        warehouse_address: config.warehouse_address.clone(),
        auth_mode: state.auth.mode,
        store: state.store.shown_url().to_owned(),
        watch: config.watch,
    });
    let watcher = tokio::spawn(Arc::clone(&state.warehouse).watch());
    // `read` is there exactly when the watch is on.
    let edits = read.map(|read| {
        tokio::spawn(crate::watch::run(
            Arc::clone(&state),
            project.root.clone(),
            read,
        ))
    });
    let snapshots = tokio::spawn(crate::snapshot::keep_fresh(Arc::clone(&state)));
    let scheduler = tokio::spawn(crate::scheduler::run(Arc::clone(&state)));
    let sensors = tokio::spawn(crate::sensors::run(Arc::clone(&state)));
    let served = axum::serve(
        listener,
        crate::router(Arc::clone(&state)).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown({
        let state = Arc::clone(&state);
        async move {
            stopped().await;
            state
                .stopping
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    })
    .await;
    watcher.abort();
    if let Some(edits) = edits {
        edits.abort();
    }
    snapshots.abort();
    scheduler.abort();
    sensors.abort();
    crate::sensors::release(&state).await;
    // A build still running is stopped at its next statement boundary and gives the
    // target back before the process ends.
    let builds = Arc::clone(&state);
    let _ = tokio::task::spawn_blocking(move || builds.builds.stop()).await;
    state.store.close().await;
    served.map_err(|error| {
        ServeError::config(
            format!("the server stopped: {error}"),
            "see the messages above",
        )
    })
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
