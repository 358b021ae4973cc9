//! `stb destroy --select pipeline:A …` and `stb reset-target`: interactive only. The plan
//! is printed with what it drops in rows and bytes, reviewed (yes/no), then confirmed by
//! typing each challenge exactly; the engine plans again under the target lock and refuses
//! any difference (see `stb_engine::destruction`). There is no flag to skip any of it.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Args;
use stb_engine::destruction::{
    DESTRUCTION_CODE, DestructionPlan, Dropped, Invocation, Operation, Request, plan, read, run,
};

use crate::args::{ConnectionArgs, ProjectArgs};
use crate::control::{ControlArgs, NOT_ADMIN_CODE, local_admin};
use crate::output::{Failure, ask, fail, print_json};

/// Standard input is not a terminal.
const TERMINAL_CODE: &str = "STB-DESTROY-002";

#[derive(Debug, Args)]
pub(crate) struct DestroyArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    /// The pipelines to destroy: `pipeline:<name>` (repeat for more).
    #[arg(long, short = 's', value_name = "SELECTOR", required = true)]
    select: Vec<String>,
    /// Also drop what older manifests recorded for these pipelines.
    #[arg(long)]
    include_orphans: bool,
    #[command(flatten)]
    control: ControlArgs,
    /// Print the result as JSON on stdout (the questions go to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ResetArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    control: ControlArgs,
    /// Print the result as JSON on stdout (the questions go to stderr).
    #[arg(long)]
    json: bool,
}

pub(crate) fn destroy(args: &DestroyArgs) -> ExitCode {
    if let Some(code) = refuse_without_terminal(args.json) {
        return code;
    }
    let mut pipelines = Vec::new();
    for selector in &args.select {
        match selector.strip_prefix("pipeline:").filter(|n| !n.is_empty()) {
            Some(name) => pipelines.push(name.to_owned()),
            None => {
                let failure = Failure {
                    code: DESTRUCTION_CODE,
                    message: format!("'{selector}' does not name a pipeline"),
                    hint: "destroy works on whole pipelines: --select pipeline:<name>".into(),
                };
                return fail(&failure, args.json);
            }
        }
    }
    destruct(
        &args.project,
        &args.connection,
        &args.control,
        Operation::DestroyPipelines,
        &pipelines,
        args.include_orphans,
        args.json,
    )
}

pub(crate) fn reset(args: &ResetArgs) -> ExitCode {
    if let Some(code) = refuse_without_terminal(args.json) {
        return code;
    }
    destruct(
        &args.project,
        &args.connection,
        &args.control,
        Operation::ResetTarget,
        &[],
        false,
        args.json,
    )
}

/// Checked before anything else: a destruction is confirmed by a person at a terminal.
fn refuse_without_terminal(json: bool) -> Option<ExitCode> {
    if std::io::stdin().is_terminal() {
        return None;
    }
    let failure = Failure {
        code: TERMINAL_CODE,
        message: "destruction is interactive: standard input is not a terminal".into(),
        hint: "run it from a terminal; no flag skips its review and confirmation".into(),
    };
    Some(fail(&failure, json))
}

fn destruct(
    project_args: &ProjectArgs,
    connection: &ConnectionArgs,
    control: &ControlArgs,
    operation: Operation,
    pipelines: &[String],
    include_orphans: bool,
    json: bool,
) -> ExitCode {
    let (project, compiled) = match project_args.compile(json, connection.database.as_deref()) {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    // Only an active admin of the control store may destroy; checked again after the
    // review, so an account disabled meanwhile drops nothing.
    let store_url = control.url(&project.root);
    let admin = match local_admin(&store_url) {
        Ok(admin) => admin,
        Err(failure) => return fail(&failure, json),
    };
    let (client, database) = match connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, json),
    };
    let request = Request {
        operation,
        pipelines,
        include_orphans,
        production: project.production,
        max_table_size_to_drop: project.max_table_size_to_drop,
    };
    let planned =
        || read(&client, &database).and_then(|live| plan(&project, &compiled, &request, &live));
    let reviewed = match planned() {
        Ok(reviewed) => reviewed,
        Err(error) => return fail(&Failure::from(error), json),
    };
    show(&reviewed);
    if reviewed.relations.is_empty() {
        say("Nothing to drop.");
        if json {
            print_json(&serde_json::json!({"plan": reviewed, "result": Dropped::default()}));
        }
        return ExitCode::SUCCESS;
    }
    if !ask("Reviewed: go on to the confirmation? [y/N] ")
        .is_some_and(|a| matches!(a.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
    {
        say("Destruction cancelled.");
        return ExitCode::from(1);
    }
    for challenge in &reviewed.challenges {
        let typed = ask(&format!("Type {challenge} to confirm: ")).unwrap_or_default();
        if typed != *challenge {
            say(&format!(
                "Destruction cancelled: '{typed}' is not '{challenge}'."
            ));
            return ExitCode::from(1);
        }
    }
    match local_admin(&store_url) {
        Ok(still) if still.id == admin.id => {}
        Ok(_) => {
            let failure = Failure {
                code: NOT_ADMIN_CODE,
                message: "the admin account changed during the review; nothing was dropped".into(),
                hint: "run the command again".into(),
            };
            return fail(&failure, json);
        }
        Err(failure) => return fail(&failure, json),
    }
    let client = std::sync::Arc::new(client);
    let invocation_id = uuid::Uuid::new_v4().to_string();
    let invocation = Invocation {
        invocation_id: &invocation_id,
        project: &project,
        started_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
        clock: std::time::Instant::now(),
    };
    let replan =
        || read(&client, &database).and_then(|live| plan(&project, &compiled, &request, &live));
    match run(&client, &reviewed, &replan, &invocation) {
        Ok(dropped) => report(&reviewed, &dropped, json),
        Err(error) => fail(&Failure::from(error), json),
    }
}

/// A line for the person at the terminal (stderr: stdout may be JSON).
fn say(line: &str) {
    crate::output::eprint_styled(&format!("{line}\n"));
}

fn show(plan: &DestructionPlan) {
    let mut out = std::io::stderr().lock();
    let _ = writeln!(
        out,
        "{} of target '{}' (database '{}')",
        match plan.operation {
            Operation::DestroyPipelines => "Destroy pipelines",
            Operation::ResetTarget => "Reset",
        },
        plan.target,
        plan.database
    );
    if !plan.pipelines.is_empty() {
        let _ = writeln!(out, "Pipelines: {}", plan.pipelines.join(", "));
    }
    for doomed in &plan.relations {
        let held = match (doomed.rows, doomed.bytes) {
            (Some(rows), Some(bytes)) => format!("  ({rows} rows, {bytes} bytes)"),
            (Some(rows), None) => format!("  ({rows} rows)"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {}{held}", doomed.statement);
    }
    let _ = writeln!(
        out,
        "Drops {} relations holding {} rows ({} bytes). Kafka offsets, the lifecycle tables and accounts are kept.",
        plan.relations.len(),
        plan.total_rows,
        plan.total_bytes
    );
}

fn report(plan: &DestructionPlan, dropped: &Dropped, json: bool) -> ExitCode {
    for warning in &dropped.warnings {
        say(&format!("warning: {warning}"));
    }
    if json {
        print_json(&serde_json::json!({"plan": plan, "result": dropped}));
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Dropped {} relations.", dropped.dropped.len());
    }
    match &dropped.failed {
        None => ExitCode::SUCCESS,
        Some((relation, message)) => {
            let remaining = dropped.remaining.as_ref().map_or_else(
                || "what remains could not be read".to_owned(),
                |left| format!("still there: {}", left.join(", ")),
            );
            say(&format!(
                "error[{DESTRUCTION_CODE}]: dropping {relation} failed: {message}\n  hint: {remaining}; fix the cause and run the command again"
            ));
            ExitCode::from(1)
        }
    }
}
