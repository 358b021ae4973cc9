//! `stb plan`: for direct pipelines, what a build would drop, recreate and replay, and how
//! each model's SQL changed since its last build; for virtual pipelines, what a new
//! deployment would stage beside production. Read-only against ClickHouse.

use std::process::ExitCode;

use clap::Args;

use stb_engine::staged::Route;

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::direct::{Prepared, Purpose};
use crate::output::{Failure, fail, report};

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
    let (project, compiled) = match args.project.compile_for(
        args.json,
        args.connection.database.as_deref(),
        stb_compile::Output::PlanOnly,
    ) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    match stb_engine::staged::route(&project, &compiled, &args.scope.select, args.scope.changed) {
        Ok(Route::Direct) => {}
        Ok(Route::Virtual(_)) => return plan_virtual(args, &project, &compiled),
        Ok(Route::Mixed {
            direct_models,
            virtual_models,
            ..
        }) => return plan_mixed(args, &project, &compiled, &direct_models, &virtual_models),
        Err(error) => return fail(&Failure::from(error), args.json),
    }
    let prepared = match crate::direct::prepare(
        &project,
        &compiled,
        &args.connection,
        &args.scope,
        Purpose::Show,
    ) {
        Ok(prepared) => prepared,
        Err(failure) => return fail(&failure, args.json),
    };
    if let Err(invalid) = &prepared.validation {
        return report(invalid.clone(), args.json);
    }
    let json = crate::plan_render::json(&prepared.planned);
    if let Err(failure) = crate::run_artifacts::write_plan(&project.root, &prepared.planned, &json)
    {
        return fail(&failure, args.json);
    }
    // The value just written is what `--json` prints: printed as it is, not made again
    // beside it (at 10,000 models each is tens of megabytes).
    if args.json {
        crate::output::print_json(&json);
    } else {
        drop(json);
        crate::plan_render::print(&prepared.planned, false, args.verbose);
    }
    ExitCode::SUCCESS
}

/// A virtual plan: reads the deployed state and shows what a new deployment would stage,
/// measured as its build would be (the shrink guard against the active copies).
fn plan_virtual(
    args: &PlanArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> ExitCode {
    match crate::direct::prepare(
        project,
        compiled,
        &args.connection,
        &args.scope,
        Purpose::Show,
    ) {
        Ok(Prepared {
            validation: Err(invalid),
            ..
        }) => report(invalid, args.json),
        Ok(prepared) => match &prepared.staged {
            Some(staged) => {
                // target/run/plan/ holds the deployment's JSON and its build's steps.
                let document = crate::staged_render::json(staged)
                    .with_plan_hash(crate::direct::plan_hash(&[&prepared]));
                if let Err(failure) =
                    crate::run_artifacts::write_plan(&project.root, &prepared.planned, &document)
                {
                    return fail(&failure, args.json);
                }
                if args.json {
                    crate::output::print_json(&document);
                } else {
                    crate::staged_render::print(staged, args.json, args.verbose);
                }
                ExitCode::SUCCESS
            }
            None => {
                crate::plan_render::print(&prepared.planned, args.json, args.verbose);
                ExitCode::SUCCESS
            }
        },
        Err(failure) => fail(&failure, args.json),
    }
}

/// A scope holding both kinds: the virtual phase (staged first) and the direct phase, each
/// planned as its own build would plan it.
fn plan_mixed(
    args: &PlanArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    direct_models: &std::collections::BTreeSet<String>,
    virtual_models: &std::collections::BTreeSet<String>,
) -> ExitCode {
    let prepare = |models, virtual_part| {
        crate::direct::prepare(
            project,
            compiled,
            &args.connection,
            &args.scope.part(models, virtual_part),
            Purpose::Show,
        )
    };
    let (staged, direct) = match (prepare(virtual_models, true), prepare(direct_models, false)) {
        (Ok(staged), Ok(direct)) => (staged, direct),
        (Err(failure), _) | (_, Err(failure)) => return fail(&failure, args.json),
    };
    if let Some(invalid) = crate::direct::refused(&[&staged, &direct]) {
        return report(invalid, args.json);
    }
    let Some(deployment) = &staged.staged else {
        let failure = Failure {
            code: stb_engine::direct::VIRTUAL_CODE,
            message: "the virtual phase of this mixed scope planned no deployment".into(),
            hint: "plan each kind on its own (--select pipeline:<name>)".into(),
        };
        return fail(&failure, args.json);
    };
    if args.json {
        /// Members in key order, as the JSON value it was sorted them.
        #[derive(serde::Serialize)]
        struct Mixed<'a> {
            direct: serde_json::Value,
            execution_order: [&'static str; 2],
            mode: &'static str,
            plan_hash: String,
            #[serde(rename = "virtual")]
            staged: crate::staged_render::VirtualJson<'a>,
        }
        crate::output::print_json(&Mixed {
            direct: crate::plan_render::json(&direct.planned),
            execution_order: ["virtual", "direct"],
            mode: "mixed",
            plan_hash: crate::direct::plan_hash(&[&staged, &direct]),
            staged: crate::staged_render::json(deployment),
        });
        return ExitCode::SUCCESS;
    }
    crate::staged_render::print_mixed(Some(deployment), &direct.planned, args.verbose);
    ExitCode::SUCCESS
}
