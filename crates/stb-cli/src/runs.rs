//! `stb runs list | show <run>`: recent runs with their derived status, and one run's
//! timeline (see `stb_engine::runs`).

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_engine::runs::{RunSummary, cancel, list, resolve_invocation, short_id, show};

use crate::args::TargetArgs as Common;
use crate::output::{Failure, fail, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// Recent runs, newest first: status, command, duration, scope, rows written.
    List(ListArgs),
    /// One run: its status and the timeline of its statements.
    Show(ShowArgs),
    /// Stop a running build: it kills its statement in flight, stops at that boundary and
    /// records itself cancelled (asks first).
    Cancel(CancelArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The run's id, or its first characters (`stb runs list` shows them).
    invocation_id: String,
    /// Cancel without asking (needed with --json).
    #[arg(long)]
    auto_approve: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// How many runs to show.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The run's id, or its first characters (`stb runs list` shows them).
    invocation_id: String,
    #[command(flatten)]
    common: Common,
}

pub(crate) fn run(command: &RunsCommand) -> ExitCode {
    let common = match command {
        RunsCommand::List(args) => &args.common,
        RunsCommand::Show(args) => &args.common,
        RunsCommand::Cancel(args) => &args.common,
    };
    if let RunsCommand::Cancel(args) = command
        && common.json
        && !args.auto_approve
    {
        return fail(
            &Failure {
                code: stb_engine::build::APPROVAL_CODE,
                message: "--json cannot prompt for confirmation".into(),
                hint: "add --auto-approve".into(),
            },
            true,
        );
    }
    let project = match common.project.discover(common.json) {
        Ok((_, project)) => project,
        Err(code) => return code,
    };
    let (client, database) = match common.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, common.json),
    };
    let windows = crate::run_context::windows(&project);
    // `show` and `cancel` take a short id (a prefix, as the list prints it) as well.
    let given = match command {
        RunsCommand::Show(args) => Some(&args.invocation_id),
        RunsCommand::Cancel(args) => Some(&args.invocation_id),
        RunsCommand::List(_) => None,
    };
    let invocation = match given.map(|id| resolve_invocation(&client, &database, id)) {
        Some(Ok(id)) => id,
        Some(Err(error)) => return fail(&Failure::from(error), common.json),
        None => String::new(),
    };
    match command {
        RunsCommand::List(args) => match list(&client, &database, args.limit, windows) {
            Ok(runs) if common.json => {
                print_json(&serde_json::json!({"database": database, "runs": runs}));
                ExitCode::SUCCESS
            }
            Ok(runs) => {
                print_list(&database, &runs);
                ExitCode::SUCCESS
            }
            Err(error) => fail(&Failure::from(error), common.json),
        },
        RunsCommand::Show(_) => match show(&client, &database, &invocation, windows) {
            Ok(detail) if common.json => {
                print_json(&serde_json::json!({
                    "database": database,
                    "run": detail.run,
                    "statements": detail.statements,
                    "events": detail.events,
                }));
                ExitCode::SUCCESS
            }
            Ok(detail) => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "Run {}", detail.run.invocation_id);
                print_run(&mut out, &detail.run);
                let _ = writeln!(out, "\nStatements");
                for statement in &detail.statements {
                    let elapsed = statement
                        .elapsed_ms
                        .map_or_else(|| "running".to_owned(), |ms| format!("{ms} ms"));
                    let rows = statement
                        .written_rows
                        .map(|r| format!(", {r} rows written"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  {:>3}  {:<48} {elapsed}{rows}",
                        statement.sequence, statement.display_name
                    );
                    if let Some(error) = &statement.error_message {
                        let _ = writeln!(out, "       error: {error}");
                    }
                }
                ExitCode::SUCCESS
            }
            Err(error) => fail(&Failure::from(error), common.json),
        },
        RunsCommand::Cancel(args) => {
            if !args.auto_approve
                && !crate::virtual_target::confirmed(&format!("Cancel run {invocation}?"))
            {
                let _ = writeln!(std::io::stdout().lock(), "Nothing was cancelled.");
                return ExitCode::from(1);
            }
            match cancel(
                &client,
                &database,
                &invocation,
                windows,
                std::time::Duration::from_secs(15),
            ) {
                Ok(done) if common.json => {
                    print_json(&serde_json::json!({"database": database, "cancellation": done}));
                    exit_of(&done)
                }
                Ok(done) => {
                    let mut out = std::io::stdout().lock();
                    match &done.error_message {
                        None => {
                            let _ = writeln!(out, "Run {} cancelled.", done.invocation_id);
                        }
                        Some(message) => {
                            let _ = writeln!(out, "Cancellation failed: {message}");
                        }
                    }
                    exit_of(&done)
                }
                Err(error) => fail(&Failure::from(error), common.json),
            }
        }
    }
}

fn exit_of(done: &stb_engine::runs::Cancellation) -> ExitCode {
    if done.status == "cancelled" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_list(database: &str, runs: &[RunSummary]) {
    let mut out = std::io::stdout().lock();
    if runs.is_empty() {
        let _ = writeln!(out, "No runs in '{database}'.");
        return;
    }
    let _ = writeln!(out, "Runs in '{database}' (newest first)");
    for run in runs {
        print_run(&mut out, run);
    }
}

fn print_run(out: &mut std::io::StdoutLock<'_>, run: &RunSummary) {
    let duration = run
        .duration_ms
        .map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
        .unwrap_or_default();
    let silence = run
        .silent_seconds
        .filter(|_| run.status != "running")
        .map(|s| format!(" (no signal for {s} s)"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  {}  {:<16}{silence}  {}  started {}  {duration}",
        short_id(&run.invocation_id),
        run.status,
        run.command.as_deref().unwrap_or("?"),
        run.started_at.as_deref().unwrap_or("?"),
    );
    let statements = run.total_statements.map_or_else(
        || run.completed_statements.to_string(),
        |total| format!("{}/{total}", run.completed_statements),
    );
    let scope = if run.scope.is_empty() {
        String::new()
    } else {
        format!("  scope: {}", run.scope.join(", "))
    };
    let _ = writeln!(
        out,
        "      statements {statements}, {} rows written{scope}",
        run.written_rows
    );
    if run.status == "presumed_failed" {
        let _ = writeln!(
            out,
            "      the process may recover; rerunning the build is safe once it is presumed failed"
        );
    }
    if let Some(error) = &run.error_message {
        let _ = writeln!(out, "      error: {error}");
    }
}
