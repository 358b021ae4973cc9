//! `stb dev`: parse the flags, call [`stb_server::serve::run`] (127.0.0.1:8000 until Ctrl-C
//! or SIGTERM; the warehouse is reached lazily) and print what it says.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;
use stb_server::serve::ServeConfig;

use crate::args::{ConnectionArgs, ProjectArgs};
use crate::auth_args::AuthArgs;
use crate::control::ControlArgs;
use crate::output::{Failure, fail};

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
    #[command(flatten)]
    auth: AuthArgs,
    /// Allow `--auth-mode disabled` on an address other than loopback: every client that
    /// reaches it is an administrator.
    #[arg(long)]
    allow_unauthenticated_network_access: bool,
}

pub(crate) fn run(args: &DevArgs) -> ExitCode {
    let auth = args.auth.config();
    let (host, open) = (&args.ui_host, args.allow_unauthenticated_network_access);
    match stb_server::serve::check_settings(&auth, args.auth.default_role(), host, open) {
        Ok(warnings) => warnings.iter().for_each(|w| eprintln!("warning: {w}")),
        Err(error) => return fail(&Failure::from(error), false),
    }
    let (rediscover, mut project) = match args.project.discover(false) {
        Ok(found) => found,
        Err(code) => return code,
    };
    crate::args::pin_database(&mut project, args.connection.database.as_deref());
    let config = ServeConfig {
        connect: args.connection.connector(&project),
        warehouse_address: args.connection.shown_address(&project),
        run_windows: crate::run_context::windows(&project),
        store_url: args.control.url(&project.root),
        rediscover,
        database_override: args.connection.database.clone(),
        project,
        auth,
        host: host.clone(),
        port: args.ui_port,
        watch: args.watch,
    };
    let mut listened = false;
    let served = stb_server::serve::run(config, |started| {
        listened = true;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", started.banner(env!("CARGO_PKG_VERSION")));
        let _ = out.flush();
    });
    if listened {
        let _ = writeln!(std::io::stdout().lock(), "dev server stopped");
    }
    served.map_or_else(|e| fail(&Failure::from(e), false), |()| ExitCode::SUCCESS)
}
