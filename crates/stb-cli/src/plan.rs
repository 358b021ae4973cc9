//! `stb plan` (direct pipelines): what a build would drop, recreate and replay, and how each
//! model's SQL changed since its last build. Read-only against ClickHouse.

use std::process::ExitCode;

use clap::Args;

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::output::fail;

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Show whole SQL diffs.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &PlanArgs) -> ExitCode {
    let (project, compiled) = match args.project.compile(args.json) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    let prepared = match crate::direct::prepare(&project, &compiled, &args.connection, &args.scope)
    {
        Ok(prepared) => prepared,
        Err(failure) => return fail(&failure, args.json),
    };
    if let Err(failure) = crate::run_artifacts::write_plan(&project.root, &prepared.planned) {
        return fail(&failure, args.json);
    }
    crate::plan_render::print(&prepared.planned, args.json, args.verbose);
    ExitCode::SUCCESS
}
