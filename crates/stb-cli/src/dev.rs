//! `stb dev`: compile the project once, open the control store, and serve the JSON API on
//! 127.0.0.1:8000 until Ctrl-C or SIGTERM. The warehouse is reached lazily: the server
//! starts and answers while ClickHouse is down.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Args, ValueEnum};
use stb_server::{AppState, AuthConfig, AuthMode, CompileStatus, UnknownUserPolicy};

use crate::args::{ConnectionArgs, ProjectArgs};
use crate::control::ControlArgs;
use crate::output::{Failure, fail};

/// A setting `stb dev` refuses to start with.
const CONFIG_CODE: &str = "STB-DEV-001";
/// The address could not be bound.
const BIND_CODE: &str = "STB-DEV-002";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Disabled,
    Password,
    #[value(name = "trusted_proxy")]
    TrustedProxy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Policy {
    #[value(name = "auto_provision")]
    AutoProvision,
    Deny,
}

#[derive(Debug, Args)]
pub(crate) struct DevArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    control: ControlArgs,
    /// The address to listen on (loopback by default; anything else is announced loudly).
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    ui_host: String,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000, value_name = "PORT")]
    ui_port: u16,
    /// Recompile when a project file changes (checked every second); the UI refreshes on
    /// its next status poll. Without it, the UI's Reload button recompiles.
    #[arg(long)]
    watch: bool,
    /// How users sign in.
    #[arg(
        long,
        value_enum,
        env = "STREAMBUILD_AUTH_MODE",
        default_value = "disabled"
    )]
    auth_mode: Mode,
    /// Trusted proxy: the header naming the user.
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_USERNAME_HEADER",
        default_value = "X-StreamBuild-User",
        value_name = "NAME"
    )]
    auth_username_header: String,
    /// Trusted proxy: an optional header with the user's display name.
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_DISPLAY_NAME_HEADER",
        value_name = "NAME"
    )]
    auth_display_name_header: Option<String>,
    /// Trusted proxy: an optional header with the user's email.
    #[arg(long, env = "STREAMBUILD_AUTH_EMAIL_HEADER", value_name = "NAME")]
    auth_email_header: Option<String>,
    /// Trusted proxy: what to do with a name the control store does not know.
    #[arg(
        long,
        value_enum,
        env = "STREAMBUILD_AUTH_UNKNOWN_USER_POLICY",
        default_value = "auto_provision"
    )]
    auth_unknown_user_policy: Policy,
    /// Trusted proxy: the role new users get (only viewer is accepted).
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_DEFAULT_ROLE",
        default_value = "viewer",
        value_name = "ROLE"
    )]
    auth_default_role: String,
    /// Password mode: how long a session lasts, in seconds (absolute).
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_SESSION_TTL_SECONDS",
        default_value_t = 43_200,
        value_name = "SECONDS"
    )]
    auth_session_ttl_seconds: u64,
    /// Password mode: cookies without `Secure`, for plain HTTP (loopback only).
    #[arg(long, env = "STREAMBUILD_AUTH_INSECURE_COOKIE", value_parser = truthy, default_value = "false")]
    auth_insecure_cookie: bool,
    /// Trusted proxy: the proxy's sign-out address, for the UI.
    #[arg(long, env = "STREAMBUILD_AUTH_PROXY_LOGOUT_URL", value_name = "URL")]
    auth_proxy_logout_url: Option<String>,
    /// Allow `--auth-mode disabled` on an address other than loopback: every client that
    /// reaches it is an administrator.
    #[arg(long)]
    allow_unauthenticated_network_access: bool,
}

fn truthy(text: &str) -> Result<bool, String> {
    Ok(matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes"
    ))
}

fn refuse(message: impl Into<String>, hint: impl Into<String>) -> ExitCode {
    fail(
        &Failure {
            code: CONFIG_CODE,
            message: message.into(),
            hint: hint.into(),
        },
        false,
    )
}

/// The auth settings, or why the server must not start with them.
fn auth_config(args: &DevArgs) -> Result<AuthConfig, ExitCode> {
    let loopback = stb_server::is_loopback(&args.ui_host);
    let mode = match args.auth_mode {
        Mode::Disabled => AuthMode::Disabled,
        Mode::Password => AuthMode::Password,
        Mode::TrustedProxy => AuthMode::TrustedProxy,
    };
    if args.auth_session_ttl_seconds == 0 {
        return Err(refuse(
            "--auth-session-ttl-seconds must be greater than 0",
            "43200 (12 h) is the default",
        ));
    }
    let policy = match args.auth_unknown_user_policy {
        Policy::AutoProvision => UnknownUserPolicy::AutoProvision,
        Policy::Deny => UnknownUserPolicy::Deny,
    };
    if mode == AuthMode::TrustedProxy
        && policy == UnknownUserPolicy::AutoProvision
        && args.auth_default_role != stb_control::VIEWER
    {
        return Err(refuse(
            format!(
                "--auth-default-role {} is not allowed: auto-provisioned users are viewers",
                args.auth_default_role
            ),
            "grant more with `stb admin grant-role` once the user exists",
        ));
    }
    if mode == AuthMode::Password && args.auth_insecure_cookie && !loopback {
        return Err(refuse(
            "insecure password cookies may only be used on a loopback address.",
            "serve HTTPS in front of stb dev and drop --auth-insecure-cookie, or bind 127.0.0.1",
        ));
    }
    if mode == AuthMode::Disabled && !loopback && !args.allow_unauthenticated_network_access {
        return Err(refuse(
            format!(
                "authentication is disabled and --ui-host {} is not a loopback address: anyone who reaches it would be an administrator",
                args.ui_host
            ),
            "use --auth-mode password or trusted_proxy, bind 127.0.0.1, or pass --allow-unauthenticated-network-access",
        ));
    }
    Ok(AuthConfig {
        mode,
        username_header: args.auth_username_header.to_ascii_lowercase(),
        display_name_header: args
            .auth_display_name_header
            .as_ref()
            .map(|h| h.to_ascii_lowercase()),
        email_header: args
            .auth_email_header
            .as_ref()
            .map(|h| h.to_ascii_lowercase()),
        unknown_user_policy: policy,
        session_ttl_seconds: args.auth_session_ttl_seconds,
        insecure_cookie: args.auth_insecure_cookie,
        proxy_logout_url: args.auth_proxy_logout_url.clone(),
    })
}

pub(crate) fn run(args: &DevArgs) -> ExitCode {
    let auth = match auth_config(args) {
        Ok(auth) => auth,
        Err(code) => return code,
    };
    let mut err = std::io::stderr().lock();
    if auth.mode == AuthMode::Disabled {
        let _ = writeln!(
            err,
            "warning: authentication disabled; all clients have administrator access."
        );
    }
    if !stb_server::is_loopback(&args.ui_host) {
        let _ = writeln!(
            err,
            "warning: listening on {} (not loopback): anyone who can reach this address can reach the API",
            args.ui_host
        );
    }
    drop(err);
    let (_, mut project) = match args.project.discover(false) {
        Ok(found) => found,
        Err(code) => return code,
    };
    crate::args::pin_database(&mut project, args.connection.database.as_deref());
    // What the watch compares edits with: the files as discovery just read them, taken
    // now (not when the watch task first runs, after the banner: an edit made as soon as
    // the banner appeared was already in that first look and never compiled).
    let read = args
        .watch
        .then(|| stb_server::watch::fingerprint(&project.root));
    let started = std::time::Instant::now();
    let held = held_of(&project);
    let compile_ms = started.elapsed().as_millis();
    let database = args
        .connection
        .database
        .clone()
        .or_else(|| project.database.clone())
        .unwrap_or_else(|| "default".to_owned());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return refuse(
                format!("cannot start the server runtime: {error}"),
                "this is a bug; please report it",
            );
        }
    };
    let store_url = args.control.url(&project.root);
    let store = match runtime.block_on(stb_control::ControlStore::open(&store_url)) {
        Ok(store) => store,
        Err(error) => return fail(&Failure::from(error), false),
    };
    let connection = args.connection.clone();
    let connect_project = project.clone();
    let connect: stb_server::Connect = Arc::new(move || {
        connection
            .connect(&connect_project)
            .map(|(client, _)| client)
            .map_err(|failure| failure.message)
    });
    let state = Arc::new(AppState {
        store,
        auth,
        project_name: project.name.clone(),
        target_name: project.target.clone(),
        database: database.clone(),
        held: std::sync::RwLock::new(Arc::new(held)),
        recompile: Some(recompile(args)),
        reloading: tokio::sync::Mutex::new(()),
        stopping: std::sync::atomic::AtomicBool::new(false),
        throttle: Mutex::default(),
        warehouse: Arc::new(stb_server::warehouse::Warehouse::new(connect, &database)),
        run_windows: crate::run_context::windows(&project),
        launcher: launcher(args, &project, &database),
        builds: stb_server::launch::Builds::default(),
        snapshots: stb_server::snapshot::Snapshots::default(),
        scheduler: stb_server::scheduler::Scheduler::default(),
    });
    runtime.block_on(serve(args, state, &project, compile_ms, read))
}

/// What a compile of `project` gives the server.
fn held_of(project: &stb_project::Project) -> stb_server::Held {
    let (compile, definitions, compilation) = match stb_compile::compile(project) {
        Ok(compiled) => (
            CompileStatus {
                state: "ok",
                compiled_at_ms: now_ms(),
                models: compiled.models,
                sources: compiled.plan_sources.len(),
                error: None,
            },
            Some(stb_server::definitions::of(project, &compiled)),
            Some(Arc::new(stb_server::Compilation {
                project: project.clone(),
                compiled,
            })),
        ),
        Err(diagnostics) => (
            CompileStatus {
                state: "failing",
                compiled_at_ms: now_ms(),
                models: 0,
                sources: 0,
                error: Some(serde_json::json!(diagnostics.into_sorted())),
            },
            None,
            None,
        ),
    };
    stb_server::Held {
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

/// Discovers and compiles the project again with the options `stb dev` started with.
fn recompile(args: &DevArgs) -> stb_server::Recompile {
    let options = args.project.options().ok();
    let database = args.connection.database.clone();
    Arc::new(move || {
        let discovered = options
            .as_ref()
            .ok_or_else(stb_diagnostics::Diagnostics::new)
            .and_then(stb_project::discover);
        match discovered {
            Ok(mut project) => {
                crate::args::pin_database(&mut project, database.as_deref());
                held_of(&project)
            }
            Err(diagnostics) => stb_server::Held {
                compile: CompileStatus {
                    state: "failing",
                    compiled_at_ms: now_ms(),
                    models: 0,
                    sources: 0,
                    error: Some(serde_json::json!(diagnostics.into_sorted())),
                },
                access: None,
                model_pipelines: std::collections::BTreeMap::new(),
                definitions: None,
                compilation: None,
            },
        }
    })
}

/// How the server runs `stb` for plans, builds and promotions: this binary, pinned to this
/// project, target and database; connection flags passed as variables.
fn launcher(
    args: &DevArgs,
    project: &stb_project::Project,
    database: &str,
) -> stb_server::launch::Launcher {
    let connection = &args.connection;
    let env = [
        ("STREAMBUILD_CLICKHOUSE_HOST", connection.host.clone()),
        (
            "STREAMBUILD_CLICKHOUSE_PORT",
            connection.port.map(|p| p.to_string()),
        ),
        (
            "STREAMBUILD_CLICKHOUSE_USERNAME",
            connection.username.clone(),
        ),
        (
            "STREAMBUILD_CLICKHOUSE_PASSWORD",
            connection.password.clone(),
        ),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| (name.to_owned(), v)))
    .collect();
    stb_server::launch::Launcher {
        exe: std::env::current_exe().unwrap_or_else(|_| "stb".into()),
        project_dir: project.root.clone(),
        target: project.target.clone(),
        database: database.to_owned(),
        vars: args.project.vars_json().map(str::to_owned),
        env,
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

async fn serve(
    args: &DevArgs,
    state: Arc<AppState>,
    project: &stb_project::Project,
    compile_ms: u128,
    read: Option<u64>,
) -> ExitCode {
    let address = format!("{}:{}", args.ui_host, args.ui_port);
    let listener = match tokio::net::TcpListener::bind(&address).await {
        Ok(listener) => listener,
        Err(error) => {
            return fail(
                &Failure {
                    code: BIND_CODE,
                    message: format!("cannot listen on {address}: {error}"),
                    hint: "pick another --ui-port (0 picks a free one) or stop what uses it".into(),
                },
                false,
            );
        }
    };
    let bound = listener
        .local_addr()
        .map_or(address.clone(), |a| a.to_string());
    let held = state.held();
    let compile = &held.compile;
    let compiled = if compile.state == "ok" {
        format!(
            "ok · {} models · {} sources · {compile_ms} ms",
            compile.models, compile.sources
        )
    } else {
        "failing: the API reports the error at /api/status".to_owned()
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "StreamBuild {} dev server\n  project    {} ({})\n  compile    {compiled}\n  warehouse  {} (connecting in the background)\n  auth       {:?}\n  control    {}\n  ui         http://{bound}/\n  api        http://{bound}/api\n  watch      {}\n  ctrl+c to stop",
        env!("CARGO_PKG_VERSION"),
        project.name,
        project.root.display(),
        state.database,
        state.auth.mode,
        state.store.shown_url(),
        if args.watch {
            "recompiles when a project file changes"
        } else {
            "off (the UI's Reload button recompiles; --watch to follow edits)"
        },
    );
    let _ = out.flush();
    drop(out);
    let watcher = tokio::spawn(Arc::clone(&state.warehouse).watch());
    // `read` is there exactly when --watch is.
    let edits = read.map(|read| {
        tokio::spawn(stb_server::watch::run(
            Arc::clone(&state),
            project.root.clone(),
            read,
        ))
    });
    let snapshots = tokio::spawn(stb_server::snapshot::keep_fresh(Arc::clone(&state)));
    let scheduler = tokio::spawn(stb_server::scheduler::run(Arc::clone(&state)));
    let app = stb_server::router(Arc::clone(&state));
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
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
    state.store.close().await;
    let _ = writeln!(std::io::stdout().lock(), "dev server stopped");
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => refuse(
            format!("the server stopped: {error}"),
            "see the messages above",
        ),
    }
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
