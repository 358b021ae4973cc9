//! `stb build` (direct pipelines): replan from the warehouse as it is now, confirm,
//! take the target lock, then drop, recreate and replay the scope statement by statement,
//! recording every step.

mod confirm;
mod records;
mod report;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use stb_build::execute::{Execution, Observer, Status, planned_statements, run as execute};
use stb_build::records::{write_fingerprints, write_manifest};
use stb_warehouse::events::{HEARTBEAT_INTERVAL, RunEventSink};
use stb_warehouse::statements::{persist_statements, workflow_sha256};
use stb_warehouse::{TargetLock, metadata};

use crate::args::{ConnectionArgs, ProjectArgs, ScopeArgs};
use crate::direct::{Prepared, prepare};
use crate::output::report;
use crate::output::{Failure, fail, print_json};
use confirm::confirm;
use records::{BuildObserver, Ending, Recorder, manifest};
use report::{print_result, summary};
use stb_engine::audits::AuditResult;

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
}

const CODE_APPROVAL: &str = "STB-BUILD-001";
const CODE_CONFIRMATION: &str = "STB-BUILD-002";
const CODE_FAILED: &str = "STB-BUILD-003";
const CODE_AUDIT: &str = "STB-BUILD-004";
const CODE_SHRINK: &str = "STB-BUILD-005";
/// Exit code of an interrupted build (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// The invocation's identity and clocks.
struct Run {
    invocation_id: String,
    started_at_ms: u128,
    clock: Instant,
}

pub(crate) fn run(args: &BuildArgs) -> ExitCode {
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let run = Run {
        invocation_id: std::env::var("STREAMBUILD_RUN_INVOCATION_ID")
            .ok()
            .filter(|id| !id.trim().is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        started_at_ms,
        clock: Instant::now(),
    };
    let machine = args.json || args.events;
    if machine && !args.auto_approve {
        return fail(
            &Failure {
                code: CODE_APPROVAL,
                message: "--json and --events cannot prompt for confirmation".into(),
                hint: "add --auto-approve (and --confirm TOKEN for protected pipelines)".into(),
            },
            args.json,
        );
    }
    // Flags that cannot mean anything are refused before anything is read or written.
    if let Err(failure) = args.scope.check() {
        return fail(&failure, args.json);
    }
    let (_, project) = match args.project.discover(args.json) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let compile_started = Instant::now();
    let compiled = match stb_compile::compile(&project) {
        Ok(compiled) => compiled,
        Err(diagnostics) => return report(diagnostics, args.json),
    };
    let compile_ms = compile_started.elapsed().as_millis();
    let (observation, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    let observability_started = Instant::now();
    // Even a build that is declined or fails to plan leaves its records.
    if let Err(error) = metadata::migrate(&observation, &database) {
        return fail(&Failure::from(&error), args.json);
    }
    let manifest_hash = stb_plan::sql_change::sql_hash(
        compiled
            .files
            .get("manifest.json")
            .map_or("", String::as_str),
    );
    if let Err(error) = write_manifest(
        &observation,
        &database,
        &manifest(&project, &compiled, &run.invocation_id, &manifest_hash),
    ) {
        return fail(&Failure::from(&error), args.json);
    }
    let observability_ms = observability_started.elapsed().as_millis();
    let observation = Arc::new(observation);
    let recorder = Recorder {
        client: Arc::clone(&observation),
        database: database.clone(),
        project: &project,
        run: &run,
    };
    let planning_started = Instant::now();
    let prepared = match prepare(&project, &compiled, &args.connection, &args.scope) {
        Ok(prepared) => prepared,
        Err(failure) => {
            recorder.finish(&Ending::early("failed", Some(&failure.message), 0));
            return fail(&failure, args.json);
        }
    };
    let planning_ms = planning_started.elapsed().as_millis();
    if prepared.planned.nothing_changed {
        if args.json {
            print_json(
                &serde_json::json!({"mode": "direct", "database": database, "status": "nothing_changed", "message": stb_engine::direct::NOTHING_CHANGED}),
            );
        } else {
            let _ = writeln!(
                std::io::stdout().lock(),
                "{}",
                stb_engine::direct::NOTHING_CHANGED
            );
        }
        recorder.finish(&Ending {
            exit_code: 0,
            ..Ending::early("succeeded", None, 0)
        });
        return ExitCode::SUCCESS;
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
        print_events: args.events,
        warned: AtomicBool::new(false),
    };
    let plan = &prepared.planned.plan;
    let executed: Vec<String> = plan
        .entries
        .iter()
        .map(|e| format!("model:{}", e.model))
        .collect();
    let context: Vec<String> = plan
        .prerequisites
        .iter()
        .map(|p| {
            let is_model = prepared.planned.models.iter().any(|m| m.name == p.name);
            format!("{}:{}", if is_model { "model" } else { "source" }, p.name)
        })
        .collect();
    observer.event(
        "run_started",
        None,
        serde_json::json!({
            "command": "build",
            "displayCommand": std::env::var("STREAMBUILD_RUN_DISPLAY_COMMAND").ok(),
            "mode": "direct",
            "toolVersion": env!("CARGO_PKG_VERSION"),
            "totalStatements": prepared.planned.workflow.steps.len(),
            "selectedNodeCount": executed.len(),
            "database": database,
            "projectIdentity": project.name,
            "selectors": args.scope.select,
            "startTime": prepared.planned.start_time.as_ref().map(|s| s.as_str().to_owned()),
            "executedLogicalIds": executed,
            "contextLogicalIds": context,
            "replayWindows": prepared.planned.replay_windows,
            "shrink": serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default(),
            "startupTimings": {
                "compileMs": compile_ms,
                "observabilityMs": observability_ms,
                "planningMs": planning_ms,
                "totalMs": run.clock.elapsed().as_millis(),
            },
        }),
    );
    let heartbeat = sink.heartbeat(HEARTBEAT_INTERVAL);
    if !machine {
        crate::plan_render::print(&prepared.planned, false, args.verbose);
    }
    // The shrink guard first: a refused loss is recorded as refused, with its numbers.
    let verdict = match confirm::accept_shrink(args, &prepared) {
        Ok(true) => confirm(args, &project, &prepared).map_err(|f| (f, "failed")),
        Ok(false) => Ok(false),
        Err(failure) => Err((failure, "refused")),
    };
    match verdict {
        Ok(true) => {
            if !prepared.planned.shrinking().is_empty() {
                observer.event(
                    "shrink_accepted",
                    None,
                    serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default(),
                );
            }
        }
        Ok(false) => {
            drop(heartbeat);
            let _ = writeln!(std::io::stdout().lock(), "Build cancelled.");
            observer.completed("cancelled", 1, None);
            recorder.finish(&Ending::early("cancelled", None, executed.len()));
            return ExitCode::from(1);
        }
        Err((failure, outcome)) => {
            drop(heartbeat);
            let mut summary = "{}".to_owned();
            if outcome == "refused" {
                observer.event(
                    "shrink_refused",
                    None,
                    serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default(),
                );
                summary = serde_json::json!({
                    "status": "refused",
                    "code": CODE_SHRINK,
                    "shrink": serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default(),
                    "replay_windows": prepared.planned.replay_windows,
                })
                .to_string();
            }
            observer.completed(outcome, 1, Some(&failure.message));
            recorder.finish(&Ending {
                summary: &summary,
                ..Ending::early(outcome, Some(&failure.message), executed.len())
            });
            return fail(&failure, args.json);
        }
    }
    let outcome = execute_locked(&prepared, &observer, &run);
    drop(heartbeat);
    match outcome {
        Err(failure) => {
            observer.completed("failed", 1, Some(&failure.message));
            recorder.finish(&Ending::early(
                "failed",
                Some(&failure.message),
                executed.len(),
            ));
            fail(&failure, args.json)
        }
        Ok((workflow_id, execution)) => {
            let audits = if execution.status == Status::Succeeded {
                build_audits(&compiled, &prepared)
            } else {
                Vec::new()
            };
            let ran = Ran {
                workflow_id,
                execution,
                audits,
            };
            finish(args, &project, &prepared, &recorder, &observer, &ran)
        }
    }
}

/// What ran: the workflow, and the audits after it.
struct Ran {
    workflow_id: String,
    execution: Execution,
    audits: Vec<AuditResult>,
}

/// The audit phase: see [`stb_engine::audits::after_build`].
fn build_audits(compiled: &stb_compile::Compiled, prepared: &Prepared) -> Vec<AuditResult> {
    stb_engine::audits::after_build(
        &prepared.client,
        &prepared.planned.workflow.database,
        compiled,
        &prepared.planned.executed_models(),
    )
}

/// Takes the lock, records the statements, runs them, gives the lock back.
fn execute_locked(
    prepared: &Prepared,
    observer: &BuildObserver,
    run: &Run,
) -> Result<(String, Execution), Failure> {
    let client = &prepared.client;
    let database = &prepared.planned.workflow.database;
    let lock = TargetLock::acquire(client, database, &run.invocation_id, true)
        .map_err(|e| Failure::from(&e))?;
    let statements = planned_statements(&prepared.planned.workflow);
    let workflow_id = workflow_sha256(&statements);
    let persisted = persist_statements(client, database, &run.invocation_id, &statements, 1);
    if let Err(error) = persisted {
        let _ = lock.release();
        return Err(Failure::from(&error));
    }
    // From here an interrupt stops the workflow at a statement boundary (or kills the
    // statement in flight) instead of killing the process.
    let interrupt = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupt));
    }
    let execution = execute(
        &prepared.client,
        &prepared.planned.workflow,
        observer,
        &interrupt,
    );
    if let Err(error) = lock.release() {
        let _ = writeln!(
            std::io::stderr().lock(),
            "warning: the target lock was not released ({error}); run `stb unlock` once this run has stopped"
        );
    }
    Ok((workflow_id, execution))
}

/// Records fingerprints, artifacts and the invocation; prints the result.
fn finish(
    args: &BuildArgs,
    project: &stb_project::Project,
    prepared: &Prepared,
    recorder: &Recorder<'_>,
    observer: &BuildObserver,
    ran: &Ran,
) -> ExitCode {
    let (workflow_id, execution) = (ran.workflow_id.as_str(), &ran.execution);
    let workflow = &prepared.planned.workflow;
    let replayed: Vec<&str> = execution.replays.iter().map(|(m, _)| m.as_str()).collect();
    // Success: every entry; otherwise only models whose replay finished.
    let fingerprinted: Vec<&stb_plan::direct::PlanModel> = prepared
        .planned
        .plan
        .entries
        .iter()
        .filter(|entry| {
            execution.status == Status::Succeeded
                || workflow.roots.iter().any(|root| {
                    replayed.contains(&root.model.as_str())
                        && (root.model == entry.model || root.propagated.contains(&entry.model))
                })
        })
        .filter_map(|entry| compiled_model(prepared, &entry.model))
        .collect();
    let mut notes = Vec::new();
    if let Err(error) = write_fingerprints(
        &prepared.client,
        &workflow.database,
        workflow_id,
        &fingerprinted,
    ) {
        notes.push(format!("Direct SQL baseline was not recorded: {error}"));
    }
    if let Err(failure) =
        crate::run_artifacts::write_build(&project.root, workflow, workflow_id, execution)
    {
        notes.push(failure.message);
    }
    let audit_errors: Vec<&str> = ran
        .audits
        .iter()
        .filter(|a| a.is_error())
        .map(|a| a.name())
        .collect();
    if let Err(error) = stb_build::records::write_node_results(
        &prepared.client,
        &workflow.database,
        recorder.invocation_id(),
        &project.target,
        "build",
        &ran.audits
            .iter()
            .map(AuditResult::node_result)
            .collect::<Vec<_>>(),
    ) {
        notes.push(format!("audit results were not recorded: {error}"));
    }
    let summary = summary(prepared, execution, &ran.audits);
    let audit_message = (!audit_errors.is_empty())
        .then(|| format!("build audits failed: {}", audit_errors.join(", ")));
    let (outcome, exit) = match execution.status {
        Status::Succeeded if audit_errors.is_empty() => ("succeeded", 0),
        Status::Succeeded | Status::Failed => ("failed", 1),
        Status::Cancelled => ("cancelled", i32::from(EXIT_INTERRUPTED)),
    };
    let error_message = execution
        .error_message
        .as_deref()
        .or(audit_message.as_deref());
    let materialized = if execution.status == Status::Succeeded {
        "applied"
    } else {
        "failed"
    };
    observer.completed(outcome, exit, error_message);
    let summary_text = summary.to_string();
    recorder.finish(&Ending {
        outcome,
        exit_code: exit,
        materialized: Some(materialized),
        workflow_id: Some(workflow_id),
        error: error_message,
        selected: prepared.planned.plan.entries.len(),
        summary: &summary_text,
    });
    if args.json {
        print_json(&summary);
    } else if !args.events {
        print_result(prepared, execution, &ran.audits, &notes);
    }
    if !notes.is_empty() && args.json {
        for note in &notes {
            let _ = writeln!(std::io::stderr().lock(), "warning: {note}");
        }
    }
    if execution.status == Status::Failed {
        let _ = writeln!(
            std::io::stderr().lock(),
            "error[{CODE_FAILED}]: step {} failed: {}\n  hint: fix the cause and rerun the same build; a rerun rebuilds the whole scope from retained history",
            execution.failed_step.as_deref().unwrap_or("?"),
            execution.error_message.as_deref().unwrap_or("")
        );
    }
    if let Some(message) = &audit_message {
        let _ = writeln!(
            std::io::stderr().lock(),
            "error[{CODE_AUDIT}]: {message}\n  hint: the build itself is applied; fix the data or the model and rebuild, or see `stb audit`"
        );
    }
    match u8::try_from(exit) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(code),
        Err(_) => ExitCode::from(1),
    }
}

fn compiled_model<'p>(
    prepared: &'p Prepared,
    name: &str,
) -> Option<&'p stb_plan::direct::PlanModel> {
    prepared.planned.models.iter().find(|m| m.name == name)
}
