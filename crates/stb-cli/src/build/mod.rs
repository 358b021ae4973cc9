//! `stb build`: parse the flags, compile, connect and call
//! [`stb_engine::build::operation::build`] (replan from the warehouse as it is now,
//! confirm, take the target lock, run the workflow statement by statement, record every
//! step), answering its questions at the terminal; then print how it ended.

mod frontend;
mod resume;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use clap::Args;
use stb_engine::build::operation::Request;
use stb_engine::build::{APPROVAL_CODE, RunIdentity, Timings};

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::output::{Failure, fail, report};

#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Build without asking; protected pipelines still need --confirm.
    #[arg(long)]
    auto_approve: bool,
    /// A protected pipeline's confirmation token (repeat for each).
    #[arg(long, value_name = "TOKEN")]
    confirm: Vec<String>,
    /// Print the result as JSON on stdout (needs --auto-approve).
    #[arg(long)]
    json: bool,
    /// Stream run events as JSON lines on stdout instead of text (needs --auto-approve).
    #[arg(long)]
    events: bool,
    /// Show whole SQL diffs in the plan.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Rebuild even when a replay root's retained history holds less than its table (the
    /// plan's "Replay windows" shows what is lost). Protected pipelines still need --confirm.
    #[arg(long)]
    allow_shrink: bool,
    /// Build even when the replays read more than the target's `[build] max_replay_rows`
    /// or `max_replay_bytes` (the plan's "Replay cost" shows what they read).
    #[arg(long)]
    allow_large: bool,
    /// Build only the plan that was reviewed: the `plan_hash` `stb plan --json` gave. A
    /// plan that differs now (the project or the warehouse changed) is refused.
    #[arg(long, value_name = "HASH")]
    plan_hash: Option<String>,
    /// Finish a build that stopped inside a chunked replay (`[build] replay_chunk_rows`):
    /// its run id, as its error or `stb runs list` names it. It goes on from the chunk where
    /// it stopped once the project, its relations and the history it reads are unchanged;
    /// the selection is the run's own.
    #[arg(
        long,
        value_name = "RUN",
        conflicts_with_all = [
            "select",
            "start_time",
            "changed",
            "include_missing_upstream",
            "full_refresh",
            "deployment_id",
            "plan_hash",
        ]
    )]
    resume: Option<String>,
}

pub(crate) fn run(args: &BuildArgs) -> ExitCode {
    let run = RunIdentity::new(
        std::env::var("STREAMBUILD_RUN_INVOCATION_ID").ok(),
        std::env::var("STREAMBUILD_RUN_DISPLAY_COMMAND").ok(),
        Some(crate::run_context::run_owner()),
    );
    if (args.json || args.events) && !args.auto_approve {
        let failure = Failure {
            code: APPROVAL_CODE,
            message: "--json and --events cannot prompt for confirmation".into(),
            hint: "add --auto-approve (and --confirm TOKEN for protected pipelines)".into(),
        };
        return fail(&failure, args.json);
    }
    if let Some(suspended) = &args.resume {
        return resume::run(args, suspended, run);
    }
    // Flags that cannot mean anything are refused before anything is read or written.
    let scope = match args.scope.scope() {
        Ok(scope) => scope,
        Err(failure) => return fail(&failure, args.json),
    };
    if let Err(error) = scope.check_any() {
        return fail(&Failure::from(error), args.json);
    }
    let (_, mut project) = match args.project.discover(args.json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    crate::args::pin_database(&mut project, args.connection.database.as_deref());
    let compile_started = Instant::now();
    let compiled = match stb_compile::compile(&project) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, args.json),
    };
    let mut timings = Timings {
        compile_ms: compile_started.elapsed().as_millis(),
        ..Timings::default()
    };
    let (client, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    let observability_started = Instant::now();
    if let Err(error) = stb_engine::build::open(&client, &database, &project, &compiled, &run) {
        return fail(&Failure::from(error), args.json);
    }
    timings.observability_ms = observability_started.elapsed().as_millis();
    let request = Request {
        project: &project,
        compiled: &compiled,
        client: Arc::new(client),
        database,
        run,
        scope,
        plan_hash: args.plan_hash.clone(),
        allow_large: args.allow_large,
        authorised: crate::run_context::authorised_pipelines(),
        windows: crate::run_context::windows(&project),
        timings,
    };
    let frontend = frontend::Terminal {
        args,
        project: &project,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let outcome = stb_engine::build::operation::build(&request, &frontend, &cancel);
    let output = crate::build_render::Output {
        json: args.json,
        events: args.events,
    };
    crate::build_render::outcome(output, &request.database, outcome)
}
