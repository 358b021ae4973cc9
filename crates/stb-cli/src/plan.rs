//! `stb plan`: for direct pipelines, what a build would drop, recreate and replay, and how
//! each model's SQL changed since its last build; for virtual pipelines, what a new
//! deployment would stage beside production. Read-only against ClickHouse.

use std::process::ExitCode;

use clap::Args;

use stb_engine::plan::{Document, Plan, Purpose};

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::output::{fail, report};

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
    let scope = match args.scope.scope() {
        Ok(scope) => scope,
        Err(failure) => return fail(&failure, args.json),
    };
    let (project, compiled) = match args.project.compile_for(
        args.json,
        args.connection.database.as_deref(),
        stb_compile::Output::PlanOnly,
    ) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    let plan = match args
        .connection
        .plan(&project, &compiled, &scope, Purpose::Show)
    {
        Ok(plan) => plan,
        Err(failure) => return fail(&failure, args.json),
    };
    if let Some(invalid) = plan.refused() {
        return report(invalid, args.json);
    }
    let document = plan.document();
    // target/run/plan/ holds the plan's JSON and its build's steps (a mixed plan's two
    // phases are each their own build's and are not written).
    let written = match (&plan, &document) {
        (Plan::Direct(one) | Plan::Virtual(one), Document::Direct(json)) => {
            crate::run_artifacts::write_plan(&project.root, &one.planned, json)
        }
        (Plan::Virtual(one), Document::Virtual(json)) => {
            crate::run_artifacts::write_plan(&project.root, &one.planned, json)
        }
        _ => Ok(()),
    };
    if let Err(failure) = written {
        return fail(&failure, args.json);
    }
    // The document just written is what `--json` prints: printed as it is, not made again
    // beside it (at 10,000 models each is tens of megabytes).
    if args.json {
        crate::output::print_json(&document);
        return ExitCode::SUCCESS;
    }
    drop(document);
    match &plan {
        Plan::Direct(one) => crate::plan_render::print(&one.planned, false, args.verbose),
        Plan::Virtual(one) => match &one.staged {
            Some(staged) => crate::staged_render::print(staged, false, args.verbose),
            None => crate::plan_render::print(&one.planned, false, args.verbose),
        },
        Plan::Mixed { staged, direct } => {
            crate::staged_render::print_mixed(
                staged.staged.as_ref(),
                &direct.planned,
                args.verbose,
            );
        }
    }
    ExitCode::SUCCESS
}
