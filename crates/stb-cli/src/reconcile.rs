//! `stb reconcile`: adopt the live objects as the baseline without rebuilding (see
//! `stb_engine::reconcile`). A dry run unless `--apply`; it writes metadata only.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_engine::reconcile::{Reconciliation, apply, assess, in_scope, read};
use stb_project::project_config::Mode;

use crate::args::{ConnectionArgs, ProjectArgs};
use crate::output::{Failure, fail, print_json};

#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    /// Models to adopt: `name`, `pipeline:name`, `+name` (with its upstream). Default: all.
    #[arg(long, short = 's', value_name = "SELECTOR")]
    select: Vec<String>,
    /// Record the eligible models as built from the project (default: only show them).
    #[arg(long)]
    apply: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &ReconcileArgs) -> ExitCode {
    let (project, compiled) = match args
        .project
        .compile(args.json, args.connection.database.as_deref())
    {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    match reconcile(args, &project, &compiled) {
        Ok((verdict, record_id)) => {
            print(args, &verdict, record_id.as_deref());
            ExitCode::SUCCESS
        }
        Err(failure) => fail(&failure, args.json),
    }
}

fn reconcile(
    args: &ReconcileArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
) -> Result<(Reconciliation, Option<String>), Failure> {
    let selected = crate::quality::selected_models(
        compiled,
        &args.select,
        stb_graph::parse_audit_selector,
        "reconcile",
    )?;
    let (client, database) = args.connection.connect(project)?;
    let live = read(&client, &database)?;
    let virtual_models: std::collections::BTreeSet<&str> = project
        .pipelines
        .iter()
        .filter(|p| p.mode == Mode::Virtual)
        .flat_map(|p| p.models.iter().map(|m| m.name.as_str()))
        .collect();
    let verdict = assess(
        compiled,
        &in_scope(compiled, selected.as_ref()),
        &|name| virtual_models.contains(name),
        &live,
    );
    let record_id = if args.apply && !verdict.eligible.is_empty() {
        let owner = uuid::Uuid::new_v4().to_string();
        Some(apply(&client, &database, &owner, compiled, &verdict)?)
    } else {
        None
    };
    Ok((verdict, record_id))
}

fn print(args: &ReconcileArgs, verdict: &Reconciliation, record_id: Option<&str>) {
    if args.json {
        print_json(&serde_json::json!({
            "applied": record_id.is_some(),
            "record_id": record_id,
            "eligible": verdict.eligible,
            "rejected": verdict.rejected,
        }));
        return;
    }
    let mut out = std::io::stdout().lock();
    if verdict.eligible.is_empty() {
        let _ = writeln!(out, "Nothing to reconcile.");
    } else {
        let _ = writeln!(out, "Eligible (the live objects match the project):");
        for eligible in &verdict.eligible {
            let deployment = eligible
                .deployment_id
                .as_deref()
                .map(|id| format!(", deployment {id}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}  {} <- {} ({}{deployment})",
                eligible.model, eligible.table, eligible.materialized_view, eligible.mode
            );
        }
    }
    if !verdict.rejected.is_empty() {
        let _ = writeln!(out, "Rejected:");
        for rejected in &verdict.rejected {
            let _ = writeln!(out, "  {}", rejected.model);
            for reason in &rejected.reasons {
                let _ = writeln!(out, "    - {reason}");
            }
        }
    }
    match record_id {
        Some(id) => {
            let _ = writeln!(
                out,
                "Recorded as {id}: the next plan takes these models as built from the project."
            );
        }
        None if !verdict.eligible.is_empty() => {
            let _ = writeln!(
                out,
                "Dry run: nothing recorded. Run with --apply to record."
            );
        }
        None => {}
    }
}
