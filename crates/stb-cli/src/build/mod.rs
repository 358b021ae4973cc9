//! `stb build`: replan from the warehouse as it is now, confirm, take the target lock, then
//! run the workflow statement by statement, recording every step: for direct pipelines
//! drop, recreate and replay the scope; for virtual ones create a deployment's copies
//! beside production and replay into them.

mod confirm;
mod lock_wait;
mod mixed;
mod progress;
mod report;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use clap::Args;
use stb_build::execute::{Observer, Status};
use stb_engine::build::records::{BuildObserver, Ending, Recorder};
use stb_engine::build::{
    APPROVAL_CODE, AUDIT_CODE, FAILED_CODE, Finished, RunIdentity, SHRINK_CODE, Timings,
};
use stb_warehouse::events::{HEARTBEAT_INTERVAL, RunEventSink};

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::output::{Failure, fail, print_json, report};
use confirm::confirm;
use report::{print_result, summary};
use stb_engine::plan::{Plan, Purpose};

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
    /// Build only the plan that was reviewed: the `plan_hash` `stb plan --json` gave. A
    /// plan that differs now (the project or the warehouse changed) is refused.
    #[arg(long, value_name = "HASH")]
    plan_hash: Option<String>,
}

/// Prints a warning the build survives on stderr.
fn warn(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

pub(crate) fn run(args: &BuildArgs) -> ExitCode {
    let run = RunIdentity::new(
        std::env::var("STREAMBUILD_RUN_INVOCATION_ID").ok(),
        std::env::var("STREAMBUILD_RUN_DISPLAY_COMMAND").ok(),
        Some(crate::run_context::run_owner()),
    );
    let machine = args.json || args.events;
    if machine && !args.auto_approve {
        return fail(
            &Failure {
                code: APPROVAL_CODE,
                message: "--json and --events cannot prompt for confirmation".into(),
                hint: "add --auto-approve (and --confirm TOKEN for protected pipelines)".into(),
            },
            args.json,
        );
    }
    // Flags that cannot mean anything are refused before anything is read or written.
    if let Err(error) = args.scope.scope().check_any() {
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
    let (observation, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    let observability_started = Instant::now();
    if let Err(error) = stb_engine::build::open(&observation, &database, &project, &compiled, &run)
    {
        return fail(&Failure::from(error), args.json);
    }
    timings.observability_ms = observability_started.elapsed().as_millis();
    let observation = Arc::new(observation);
    let recorder = Recorder {
        client: Arc::clone(&observation),
        database: database.clone(),
        project: &project,
        run: &run,
        deployment: std::sync::OnceLock::new(),
    };
    let finish = |ending: &Ending<'_>| {
        if let Err(note) = recorder.finish(ending) {
            warn(&note);
        }
    };
    let planning_started = Instant::now();
    let plan = match args
        .connection
        .plan(&project, &compiled, &args.scope.scope(), Purpose::Build)
    {
        Ok(plan) => plan,
        Err(failure) => {
            finish(&Ending::early("failed", Some(&failure.message), 0));
            return fail(&failure, args.json);
        }
    };
    timings.planning_ms = planning_started.elapsed().as_millis();
    let prepared = match plan {
        Plan::Direct(one) | Plan::Virtual(one) => one,
        // Direct and virtual pipelines together: two phases under one lock.
        Plan::Mixed { staged, direct } => {
            let scope = mixed::Scope {
                observation: Arc::clone(&observation),
                database: database.clone(),
                timings,
            };
            return mixed::run_mixed(args, &project, &compiled, &scope, run, (*staged, *direct));
        }
    };
    if let Err(invalid) = &prepared.validation {
        let summary = stb_engine::plan::invalid_summary(invalid);
        finish(&Ending::early("failed", Some(&summary), 0));
        return report(invalid.clone(), args.json);
    }
    if let Err(error) = stb_engine::plan::check_plan_hash(args.plan_hash.as_deref(), &[&prepared]) {
        let failure = Failure::from(error);
        finish(&Ending::early("refused", Some(&failure.message), 0));
        return fail(&failure, args.json);
    }
    if let Some(staged) = &prepared.staged {
        let _ = recorder.deployment.set(staged.deployment.to_string());
    }
    let planned = &prepared.planned;
    if planned.nothing_changed {
        let (mode, message) = match prepared.staged {
            Some(_) => (
                "virtual environments",
                "No changes: the active deployment matches the project; no deployment was built.",
            ),
            None => ("direct", stb_engine::direct::NOTHING_CHANGED),
        };
        if args.json {
            print_json(
                &serde_json::json!({"mode": mode, "database": database, "status": "nothing_changed", "message": message}),
            );
        } else {
            let _ = writeln!(std::io::stdout().lock(), "{message}");
        }
        finish(&Ending {
            exit_code: 0,
            ..Ending::early("succeeded", None, 0)
        });
        return ExitCode::SUCCESS;
    }
    // Before anything is asked or recorded as started: a live run that overlaps this
    // build refuses it (its plan was made against relations that run is changing).
    let windows = crate::run_context::windows(&project);
    let scope = stb_engine::build::scope(planned);
    if let Err(error) = crate::run_context::check_authorised(&compiled, &scope).and_then(|()| {
        stb_engine::admission::admit(
            &observation,
            &database,
            &[&run.invocation_id],
            &scope,
            windows,
        )
    }) {
        let failure = Failure::from(error);
        finish(&Ending::early(
            "refused",
            Some(&failure.message),
            planned.plan.entries.len(),
        ));
        return fail(&failure, args.json);
    }
    let sink = Arc::new(RunEventSink::new(
        Arc::clone(&observation),
        &database,
        &run.invocation_id,
    ));
    let observer = BuildObserver {
        sink: Arc::clone(&sink),
        client: Arc::clone(&observation),
        database: database.clone(),
        invocation_id: run.invocation_id.clone(),
        on_event: progress::event_hook(args.events, args.json),
        on_warning: Box::new(warn),
        warned: AtomicBool::new(false),
    };
    let selected = planned.plan.entries.len();
    observer.event(
        "run_started",
        None,
        stb_engine::build::run_started(planned, &project, &args.scope.select, timings, &run),
    );
    let heartbeat = sink.heartbeat(HEARTBEAT_INTERVAL);
    if !machine {
        match &prepared.staged {
            Some(staged) => crate::staged_render::print(staged, false, args.verbose),
            None => crate::plan_render::print(planned, false, args.verbose),
        }
    }
    let shrink = serde_json::to_value(planned.shrink_summary()).unwrap_or_default();
    // The shrink guard first: a refused loss is recorded as refused, with its numbers.
    let verdict = match confirm::accept_shrink(args, &prepared) {
        Ok(true) => confirm(args, &project, &prepared).map_err(|f| (f, "failed")),
        Ok(false) => Ok(false),
        Err(failure) => Err((failure, "refused")),
    };
    match verdict {
        Ok(true) => {
            if !planned.shrinking().is_empty() {
                observer.event("shrink_accepted", None, shrink.clone());
            }
        }
        Ok(false) => {
            drop(heartbeat);
            let _ = writeln!(std::io::stdout().lock(), "Build cancelled.");
            observer.completed("cancelled", 1, None);
            finish(&Ending::early("cancelled", None, selected));
            return ExitCode::from(1);
        }
        Err((failure, outcome)) => {
            drop(heartbeat);
            let mut summary = "{}".to_owned();
            if outcome == "refused" {
                observer.event("shrink_refused", None, shrink.clone());
                summary = serde_json::json!({
                    "status": "refused",
                    "code": SHRINK_CODE,
                    "shrink": shrink,
                    "replay_windows": planned.replay_windows,
                })
                .to_string();
            }
            observer.completed(outcome, 1, Some(&failure.message));
            finish(&Ending {
                summary: &summary,
                ..Ending::early(outcome, Some(&failure.message), selected)
            });
            return fail(&failure, args.json);
        }
    }
    // From here an interrupt stops the workflow at a statement boundary (or kills the
    // statement in flight) instead of killing the process.
    let interrupt = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupt));
    }
    // `stb runs cancel` asks through the run's own events: the same stop as Ctrl-C.
    let watch = stb_engine::build::watch::watch_cancellation(
        Arc::clone(&observation),
        &database,
        &run.invocation_id,
        Arc::clone(&interrupt),
    );
    let on_wait = |holder: &str, owner: Option<&str>| lock_wait::tell(&observer, holder, owner);
    let wait = stb_engine::admission::LockWait {
        scope,
        windows,
        on_wait: &on_wait,
    };
    let recheck = stb_engine::build::Recheck {
        project: &project,
        sources: &compiled.plan_sources,
    };
    let outcome = stb_engine::build::execute_locked(
        &prepared.client,
        planned,
        &observer,
        &run,
        &wait,
        &recheck,
        &interrupt,
    );
    drop(watch);
    drop(heartbeat);
    let ran = match outcome {
        Ok(ran) => ran,
        Err(error) => {
            let failure = Failure::from(error);
            let (outcome, code) = lock_wait::outcome(&failure);
            observer.completed(outcome, code, Some(&failure.message));
            finish(&Ending {
                exit_code: code,
                ..Ending::early(outcome, Some(&failure.message), selected)
            });
            let exit = fail(&failure, args.json);
            return u8::try_from(code).map_or(exit, ExitCode::from);
        }
    };
    let Recorded {
        audits,
        summary,
        ended,
        notes,
    } = record_ran(&project, &compiled, &prepared, &ran, &recorder, &observer);
    if args.json {
        print_json(&summary);
    } else if !args.events {
        print_result(&prepared, &ran.execution, &audits, &notes);
    }
    if !notes.is_empty() && (args.json || args.events) {
        for note in &notes {
            warn(note);
        }
    }
    let execution = &ran.execution;
    if execution.status == Status::Failed {
        crate::output::eprint_styled(&format!(
            "error[{FAILED_CODE}]: step {} failed: {}\n  hint: fix the cause and rerun the same build; a rerun rebuilds the whole scope from retained history\n",
            execution.failed_step.as_deref().unwrap_or("?"),
            execution.error_message.as_deref().unwrap_or("")
        ));
    }
    if !ended.audit_failures.is_empty() {
        crate::output::eprint_styled(&format!(
            "error[{AUDIT_CODE}]: build audits failed: {}\n  hint: the build itself is applied; fix the data or the model and rebuild, or see `stb audit`\n",
            ended.audit_failures.join(", ")
        ));
    }
    match u8::try_from(ended.exit_code) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(code),
        Err(_) => ExitCode::from(1),
    }
}

/// What a build that ran left: its audits, its summary, how it was recorded, and notes.
struct Recorded {
    audits: Vec<stb_engine::audits::AuditResult>,
    summary: serde_json::Value,
    ended: stb_engine::build::Ended,
    notes: Vec<String>,
}

/// After a workflow ran: the build audits (not for a deployment: they would read the
/// stable views, that is, production; `stb deployment audit` checks copies), the run
/// artifacts, the summary and the records.
fn record_ran(
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    prepared: &stb_engine::plan::Prepared,
    ran: &stb_engine::build::Ran,
    recorder: &Recorder<'_>,
    observer: &BuildObserver,
) -> Recorded {
    let planned = &prepared.planned;
    let audits = if ran.execution.status == Status::Succeeded && planned.deployment.is_none() {
        stb_engine::audits::after_build(
            &prepared.client,
            &planned.workflow.database,
            compiled,
            &planned.executed_models(),
        )
    } else {
        Vec::new()
    };
    let mut notes = Vec::new();
    if let Err(failure) = crate::run_artifacts::write_build(
        &project.root,
        &planned.workflow,
        &ran.workflow_id,
        &ran.execution,
    ) {
        notes.push(failure.message);
    }
    let summary = summary(prepared, &ran.execution, &audits);
    let ended = stb_engine::build::record(
        &prepared.client,
        planned,
        recorder,
        observer,
        &Finished {
            ran,
            audits: &audits,
            summary: &summary,
        },
    );
    notes.extend(ended.notes.iter().cloned());
    Recorded {
        audits,
        summary,
        ended,
        notes,
    }
}
