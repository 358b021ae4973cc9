//! `stb janitor`, `stb doctor` and `stb repair active-view`: keeping a target's virtual
//! deployments tidy and its stable views sound (see `stb_engine::deployments`).

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_engine::deployments::{Retention, diagnose, read_state, repair_active_view, reports};
use stb_plan::deployment::DeploymentId;

use crate::output::{Failure, fail, print_json};
use crate::virtual_target::{
    Common, confirmed, connect_virtual, lock_owner, refuse_unapproved_json,
};

#[derive(Debug, Args)]
pub(crate) struct JanitorArgs {
    /// Published deployments stay this many days after their last publication.
    #[arg(long, default_value_t = 7)]
    retention_days: u32,
    /// The most recently published deployments kept as rollback points.
    #[arg(long, default_value_t = 2)]
    minimum_rollback_deployments: usize,
    /// Deployments created less than this many minutes ago are never deleted.
    #[arg(long, default_value_t = 60)]
    minimum_age_minutes: u32,
    /// Drop the deletable deployments' copies (default: only show them).
    #[arg(long)]
    apply: bool,
    /// With --apply: drop without asking (needed with --json).
    #[arg(long)]
    auto_approve: bool,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn janitor(args: &JanitorArgs) -> ExitCode {
    let json = args.common.json;
    if json && args.apply && !args.auto_approve {
        return refuse_unapproved_json();
    }
    let (client, database) = match connect_virtual(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let retention = Retention {
        retention_days: args.retention_days,
        minimum_rollback_deployments: args.minimum_rollback_deployments,
        minimum_age_minutes: args.minimum_age_minutes,
    };
    let judged = match reports::janitor(&client, &database, retention) {
        Ok(judged) => judged,
        Err(error) => return fail(&Failure::from(error), json),
    };
    let (cleanups, rows) = (&judged.candidates, &judged.rows);
    let deletable: Vec<_> = cleanups.iter().filter(|c| c.delete).collect();
    let lost = judged.rows_lost();
    if !json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Janitor for '{database}'");
        for cleanup in cleanups {
            let _ = writeln!(
                out,
                "  {}  {}  ({})",
                cleanup.deployment_id,
                if cleanup.delete { "delete" } else { "keep  " },
                cleanup.reason
            );
            if cleanup.delete {
                for relation in &cleanup.relations {
                    match rows.get(relation) {
                        Some(n) => {
                            let _ = writeln!(out, "      {relation} ({n} rows)");
                        }
                        None => {
                            let _ = writeln!(out, "      {relation}");
                        }
                    }
                }
            }
        }
        let _ = writeln!(
            out,
            "{} deployment(s) deletable, {} relation(s), {lost} row(s) in their tables; metadata rows are kept",
            deletable.len(),
            deletable.iter().map(|c| c.relations.len()).sum::<usize>()
        );
        if !args.apply {
            let _ = writeln!(out, "Dry run: nothing was dropped. --apply drops them.");
        }
    }
    if !args.apply || deletable.is_empty() {
        if json {
            print_json(&judged);
        }
        return ExitCode::SUCCESS;
    }
    if !args.auto_approve && !confirmed("Drop these deployments' relations?") {
        let _ = writeln!(
            std::io::stdout().lock(),
            "Janitor cancelled; nothing was dropped."
        );
        return ExitCode::from(1);
    }
    match reports::apply_janitor(&client, &lock_owner(), judged) {
        Ok(applied) => {
            if json {
                print_json(&applied);
            } else {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "Dropped {} relation(s).",
                    applied.dropped.as_ref().map_or(0, Vec::len)
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}

pub(crate) fn doctor(args: &Common) -> ExitCode {
    let (client, database) = match connect_virtual(args) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let findings = match read_state(&client, &database) {
        Ok(state) => diagnose(&state),
        Err(error) => return fail(&Failure::from(error), args.json),
    };
    let unsound = findings
        .iter()
        .filter(|f| f.state_kind != "active_view_present")
        .count();
    if args.json {
        print_json(
            // `active_views` is the reference's key; `tables` (the same entries) is kept for
            // scripts written against earlier builds of stb.
            &serde_json::json!({"database": database, "active_views": findings, "tables": findings, "problems": unsound}),
        );
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Doctor for '{database}'");
        for finding in &findings {
            let _ = writeln!(
                out,
                "  {:<32} {:<22} active {}  candidates {}",
                finding.table_name,
                finding.state_kind,
                finding.active_deployment_id.as_deref().unwrap_or("-"),
                finding.candidate_deployment_ids.join(", ")
            );
            if let Some(repair) = &finding.repair {
                let _ = writeln!(out, "    repair: {repair}");
            }
        }
        let _ = writeln!(out, "{unsound} problem(s)");
    }
    // A report, not a check: problems are in the output, the exit code says it ran.
    ExitCode::SUCCESS
}

#[derive(Debug, Subcommand)]
pub(crate) enum RepairCommand {
    /// Bind a stable view to a deployment's copy again (after it was dropped or pointed
    /// elsewhere by hand; `stb doctor` names the command).
    ActiveView(ActiveViewArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ActiveViewArgs {
    /// The stable view (`tbl__orders`).
    #[arg(long)]
    table: String,
    /// The deployment whose copy it selects from.
    #[arg(long)]
    deployment_id: String,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn repair(command: &RepairCommand) -> ExitCode {
    let RepairCommand::ActiveView(args) = command;
    let json = args.common.json;
    let id = match DeploymentId::parse(&args.deployment_id) {
        Ok(id) => id,
        Err(error) => {
            let failure = Failure {
                code: stb_plan::options::FLAG_CODE,
                message: error.to_string(),
                hint: "`stb doctor` names the deployments that hold a copy".into(),
            };
            return fail(&failure, json);
        }
    };
    let (client, database) = match connect_virtual(&args.common) {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    match repair_active_view(&client, &database, &lock_owner(), &args.table, &id) {
        Ok(target) => {
            if json {
                print_json(
                    &serde_json::json!({"table_name": args.table, "target_table_name": target}),
                );
            } else {
                let _ = writeln!(std::io::stdout().lock(), "{} -> {target}", args.table);
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}
