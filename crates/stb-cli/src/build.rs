//! `stb build` (direct pipelines): replan from the warehouse as it is now, confirm,
//! take the target lock, then drop, recreate and replay the scope statement by statement,
//! recording every step.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use stb_build::execute::{Execution, Observer, Status, planned_statements, run as execute};
use stb_build::records::{
    Invocation, Manifest, OwnedResource, write_fingerprints, write_invocation, write_manifest,
};
use stb_plan::workflow::Step;
use stb_warehouse::events::{HEARTBEAT_INTERVAL, RunEventSink};
use stb_warehouse::statements::{PlannedStatement, persist_statements, workflow_sha256};
use stb_warehouse::{Client, TargetLock, WarehouseError, metadata};

use crate::discover::{ProjectArgs, report};
use crate::output::{Failure, fail, print_json};
use crate::plan::{Prepared, ScopeArgs, prepare};
use crate::warehouse::ConnectionArgs;

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
}

const CODE_APPROVAL: &str = "STB-BUILD-001";
const CODE_CONFIRMATION: &str = "STB-BUILD-002";
const CODE_FAILED: &str = "STB-BUILD-003";
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
    if prepared.output.nothing_changed {
        if args.json {
            print_json(
                &serde_json::json!({"mode": "direct", "database": database, "status": "nothing_changed", "message": crate::plan::NOTHING_CHANGED}),
            );
        } else {
            let _ = writeln!(std::io::stdout().lock(), "{}", crate::plan::NOTHING_CHANGED);
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
    let plan = &prepared.output.plan;
    let executed: Vec<String> = plan
        .entries
        .iter()
        .map(|e| format!("model:{}", e.model))
        .collect();
    let context: Vec<String> = plan
        .prerequisites
        .iter()
        .map(|p| {
            let is_model = prepared.models.iter().any(|m| m.name == p.name);
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
            "totalStatements": prepared.workflow.steps.len(),
            "selectedNodeCount": executed.len(),
            "database": database,
            "projectIdentity": project.name,
            "selectors": args.scope.select,
            "startTime": prepared.output.start_time.as_ref().map(|s| s.as_str().to_owned()),
            "executedLogicalIds": executed,
            "contextLogicalIds": context,
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
        prepared.output.print(false, args.verbose);
    }
    match confirm(args, &project, &prepared) {
        Ok(true) => {}
        Ok(false) => {
            drop(heartbeat);
            let _ = writeln!(std::io::stdout().lock(), "Build cancelled.");
            observer.completed("cancelled", 1, None);
            recorder.finish(&Ending::early("cancelled", None, executed.len()));
            return ExitCode::from(1);
        }
        Err(failure) => {
            drop(heartbeat);
            observer.completed("failed", 1, Some(&failure.message));
            recorder.finish(&Ending::early(
                "failed",
                Some(&failure.message),
                executed.len(),
            ));
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
        Ok((workflow_id, execution)) => finish(
            args,
            &project,
            &prepared,
            &recorder,
            &observer,
            &workflow_id,
            &execution,
        ),
    }
}

/// The project's manifest row: its pipelines and every relation it owns.
fn manifest<'p>(
    project: &'p stb_project::Project,
    compiled: &'p stb_compile::Compiled,
    invocation_id: &'p str,
    fingerprint: &'p str,
) -> Manifest<'p> {
    let mut resources: Vec<OwnedResource<'p>> = compiled
        .plan_models
        .iter()
        .flat_map(|model| {
            model
                .relations
                .iter()
                .map(move |(kind, relation)| OwnedResource {
                    pipeline: &model.pipeline,
                    logical_type: "model",
                    logical_name: &model.name,
                    role: kind.as_str(),
                    relation,
                })
        })
        .collect();
    for source in &compiled.plan_sources {
        if let Some(landing) = &source.landing {
            for (role, relation) in [
                ("kafka_table", landing.kafka_table.as_str()),
                ("landing_table", landing.raw_table.as_str()),
                ("landing_view", landing.view.as_str()),
            ] {
                resources.push(OwnedResource {
                    pipeline: "",
                    logical_type: "source",
                    logical_name: &source.name,
                    role,
                    relation,
                });
            }
        }
    }
    Manifest {
        invocation_id,
        project_identity: &project.name,
        target_name: &project.target,
        fingerprint,
        pipelines: project.pipelines.iter().map(|p| p.name.as_str()).collect(),
        resources,
    }
}

/// Takes the lock, records the statements, runs them, gives the lock back.
fn execute_locked(
    prepared: &Prepared,
    observer: &BuildObserver,
    run: &Run,
) -> Result<(String, Execution), Failure> {
    let client = &prepared.client;
    let database = &prepared.workflow.database;
    let lock =
        TargetLock::acquire(client, database, &run.invocation_id, true).map_err(|e| Failure {
            code: e.code(),
            message: e.to_string(),
            hint: e.hint().to_owned(),
        })?;
    let statements = planned_statements(&prepared.workflow);
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
    let execution = execute(&prepared.client, &prepared.workflow, observer, &interrupt);
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
    workflow_id: &str,
    execution: &Execution,
) -> ExitCode {
    let workflow = &prepared.workflow;
    let replayed: Vec<&str> = execution.replays.iter().map(|(m, _)| m.as_str()).collect();
    // Success: every entry; otherwise only models whose replay finished.
    let fingerprinted: Vec<&stb_plan::direct::PlanModel> = prepared
        .output
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
    let summary = summary(prepared, execution);
    let (outcome, exit) = match execution.status {
        Status::Succeeded => ("succeeded", 0),
        Status::Failed => ("failed", 1),
        Status::Cancelled => ("cancelled", i32::from(EXIT_INTERRUPTED)),
    };
    let materialized = if execution.status == Status::Succeeded {
        "applied"
    } else {
        "failed"
    };
    observer.completed(outcome, exit, execution.error_message.as_deref());
    let summary_text = summary.to_string();
    recorder.finish(&Ending {
        outcome,
        exit_code: exit,
        materialized: Some(materialized),
        workflow_id: Some(workflow_id),
        error: execution.error_message.as_deref(),
        selected: prepared.output.plan.entries.len(),
        summary: &summary_text,
    });
    if args.json {
        print_json(&summary);
    } else if !args.events {
        print_result(prepared, execution, &notes);
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
    match execution.status {
        Status::Succeeded => ExitCode::SUCCESS,
        Status::Failed => ExitCode::from(1),
        Status::Cancelled => ExitCode::from(EXIT_INTERRUPTED),
    }
}

fn compiled_model<'p>(
    prepared: &'p Prepared,
    name: &str,
) -> Option<&'p stb_plan::direct::PlanModel> {
    prepared.models.iter().find(|m| m.name == name)
}

fn summary(prepared: &Prepared, execution: &Execution) -> serde_json::Value {
    let plan = &prepared.output.plan;
    serde_json::json!({
        "mode": "direct",
        "adapter": "clickhouse",
        "database": prepared.workflow.database,
        "status": execution.status,
        "start_time": prepared.output.start_time.as_ref().map(|s| s.as_str().to_owned()),
        "dropped": plan.teardown.iter().map(|(_, r)| r).collect::<Vec<_>>(),
        "created": plan.creation.iter().map(|(_, r)| r).collect::<Vec<_>>(),
        "boundary_time": execution.captured_roots.first().and_then(|c| c.captured_at.clone()),
        "boundaries": execution.captured_roots,
        "replays": execution.replays.iter().map(|(model, rows)| serde_json::json!({
            "model": model, "written_rows": rows,
        })).collect::<Vec<_>>(),
        "completed_steps": execution.completed_steps.len(),
        "failed_step": execution.failed_step,
        "error_message": execution.error_message,
        "warnings": execution.warnings,
    })
}

fn print_result(prepared: &Prepared, execution: &Execution, notes: &[String]) {
    let mut out = std::io::stdout().lock();
    let plan = &prepared.output.plan;
    match execution.status {
        Status::Succeeded => {
            let _ = writeln!(out, "\nDirect Build Complete");
        }
        Status::Failed => {
            let _ = writeln!(out, "\nDirect Build Failed");
        }
        Status::Cancelled => {
            let _ = writeln!(
                out,
                "\nCancelled  Build interrupted and recorded as cancelled."
            );
        }
    }
    let _ = writeln!(out, "  adapter   clickhouse");
    let _ = writeln!(out, "  mode      direct");
    let _ = writeln!(out, "  database  {}", prepared.workflow.database);
    if let Some(start) = &prepared.output.start_time {
        let _ = writeln!(out, "  start     {start} UTC");
    }
    let _ = writeln!(
        out,
        "  replay roots executed  {}/{}",
        execution.replays.len(),
        prepared.workflow.roots.len()
    );
    let _ = writeln!(out, "\nRelations");
    let _ = writeln!(out, "  dropped  {}", plan.teardown.len());
    let _ = writeln!(out, "  created  {}", plan.creation.len());
    if !execution.captured_roots.is_empty() {
        let _ = writeln!(out, "\nReplay boundaries");
        for root in &execution.captured_roots {
            let _ = writeln!(
                out,
                "  {} replays {} where {}",
                root.model, root.driving_input, root.predicate
            );
        }
    }
    if !execution.replays.is_empty() {
        let _ = writeln!(out, "\nReplay execution");
        for (model, rows) in &execution.replays {
            let rows = rows.map_or_else(|| "unavailable".to_owned(), |r| r.to_string());
            let _ = writeln!(out, "  {model}  warehouse-written rows: {rows}");
        }
    }
    if let Some(step) = &execution.failed_step {
        let _ = writeln!(
            out,
            "\nStopped at {step}: {}",
            execution.error_message.as_deref().unwrap_or("")
        );
        let _ = writeln!(
            out,
            "  The scope may be half rebuilt. Rerun the same build: it drops and recreates the whole scope and replays from retained history."
        );
    }
    for note in notes.iter().chain(&execution.warnings) {
        let _ = writeln!(out, "\nwarning: {note}");
    }
}

/// Asks for what the build needs: each protected pipeline's token, else a yes/no.
fn confirm(
    args: &BuildArgs,
    project: &stb_project::Project,
    prepared: &Prepared,
) -> Result<bool, Failure> {
    let executing: Vec<&str> = prepared
        .output
        .plan
        .entries
        .iter()
        .map(|e| e.model.as_str())
        .collect();
    let protected: Vec<(&str, &stb_project::pipelines::Protection)> = project
        .pipelines
        .iter()
        .filter(|p| {
            p.models
                .iter()
                .any(|m| executing.contains(&m.name.as_str()))
        })
        .filter_map(|p| p.protection.as_ref().map(|guard| (p.name.as_str(), guard)))
        .collect();
    let unattended = args.auto_approve || args.json || args.events;
    let stdin = std::io::stdin();
    let answer = |prompt: &str| -> String {
        let _ = write!(std::io::stderr().lock(), "{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = stdin.lock().read_line(&mut line);
        line.trim().to_owned()
    };
    for (name, guard) in &protected {
        let _ = writeln!(
            std::io::stderr().lock(),
            "PROTECTED PIPELINE: {name}\n{}",
            guard.warning
        );
        if args.confirm.iter().any(|t| t == &guard.confirmation) {
            continue;
        }
        if unattended {
            return Err(Failure {
                code: CODE_CONFIRMATION,
                message: format!(
                    "Confirmation required: rerun with --confirm {}",
                    guard.confirmation
                ),
                hint: "protected pipelines need their token even with --auto-approve".into(),
            });
        }
        if answer(&format!("Type {} to confirm: ", guard.confirmation)) != guard.confirmation {
            return Ok(false);
        }
    }
    if !protected.is_empty() || args.auto_approve {
        return Ok(true);
    }
    let reply = answer("Proceed with build? [y/N] ").to_ascii_lowercase();
    Ok(reply == "y" || reply == "yes")
}

/// Writes the run's events (and prints them with `--events`); persistence failures warn
/// once and never stop the build.
struct BuildObserver {
    sink: Arc<RunEventSink>,
    client: Arc<Client>,
    database: String,
    invocation_id: String,
    print_events: bool,
    warned: AtomicBool,
}

impl BuildObserver {
    fn completed(&self, outcome: &str, exit_code: i32, error: Option<&str>) {
        self.event(
            "run_completed",
            None,
            serde_json::json!({"outcome": outcome, "exitCode": exit_code, "errorMessage": error}),
        );
    }
}

impl Observer for BuildObserver {
    fn event(&self, kind: &str, step: Option<&Step>, payload: serde_json::Value) {
        let step_id = step.map(|s| s.id.as_str());
        let phase = step.map(|s| s.phase.as_str());
        let sequence = match self.sink.emit(kind, step_id, phase, &payload) {
            Ok(sequence) => Some(sequence),
            Err(_) => {
                if !self.warned.swap(true, Ordering::SeqCst) {
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "warning: run observation failed; continuing execution and retrying"
                    );
                }
                None
            }
        };
        if self.print_events {
            let mut line = serde_json::json!({
                "event": kind,
                "invocationId": self.invocation_id,
                "sequence": sequence,
                "stepId": step_id,
                "phase": phase,
            });
            if let (Some(target), serde_json::Value::Object(fields)) =
                (line.as_object_mut(), payload)
            {
                target.extend(fields);
            }
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    }

    fn statements_changed(
        &self,
        statements: &[PlannedStatement],
        revision: u64,
    ) -> Result<(), WarehouseError> {
        persist_statements(
            &self.client,
            &self.database,
            &self.invocation_id,
            statements,
            revision,
        )
        .map(|_| ())
    }
}

/// Writes the terminal invocation row; a failure is reported, never fatal.
struct Recorder<'a> {
    client: Arc<Client>,
    database: String,
    project: &'a stb_project::Project,
    run: &'a Run,
}

/// How an invocation ended.
struct Ending<'a> {
    outcome: &'a str,
    exit_code: i32,
    materialized: Option<&'a str>,
    workflow_id: Option<&'a str>,
    error: Option<&'a str>,
    selected: usize,
    summary: &'a str,
}

impl<'a> Ending<'a> {
    /// Ended before the warehouse's relations were touched.
    fn early(outcome: &'a str, error: Option<&'a str>, selected: usize) -> Self {
        Self {
            outcome,
            exit_code: 1,
            materialized: None,
            workflow_id: None,
            error,
            selected,
            summary: "{}",
        }
    }
}

impl Recorder<'_> {
    fn finish(&self, ending: &Ending<'_>) {
        let Ending {
            outcome,
            exit_code,
            materialized,
            workflow_id,
            error,
            selected,
            summary,
        } = *ending;
        let result = write_invocation(
            &self.client,
            &self.database,
            &Invocation {
                invocation_id: &self.run.invocation_id,
                project_identity: &self.project.name,
                target_identity: &self.project.target,
                command: "build",
                mode: Some("direct"),
                outcome,
                exit_code,
                materialized_outcome: materialized,
                workflow_id,
                selected_node_count: selected,
                started_at_ms: self.run.started_at_ms,
                duration_ms: self.run.clock.elapsed().as_millis(),
                error_message: error,
                summary_json: summary,
            },
        );
        if let Err(error) = result {
            let _ = writeln!(
                std::io::stderr().lock(),
                "warning: the invocation was not recorded: {error}"
            );
        }
    }
}
