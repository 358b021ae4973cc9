//! A build whose scope holds direct and virtual pipelines: both parts planned, one combined
//! plan and one confirmation, then one target lock held around the virtual phase (a new
//! deployment, staged) and the direct phase (applied in place). A virtual phase that does
//! not succeed skips the direct one; a direct phase that fails leaves the deployment staged.
//! Each phase is its own invocation, with its own events and records.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_build::execute::Status;
use stb_engine::build::records::{BuildObserver, Ending, Recorder};
use stb_engine::build::{RunIdentity, Timings};
use stb_warehouse::events::{HEARTBEAT_INTERVAL, RunEventSink};

use super::confirm::{accept_shrink, confirm};
use super::report::print_result;
use super::{BuildArgs, warn};
use crate::output::{Failure, fail, print_json};
use stb_engine::plan::Prepared;

/// What the direct phase records when the virtual phase did not succeed.
const SKIPPED: &str = "Direct phase skipped because virtual staging failed.";

/// One phase's plan and its invocation's observation.
struct Phase<'p> {
    /// `virtual` or `direct`.
    kind: &'static str,
    prepared: Prepared,
    run: &'p RunIdentity,
    sink: Arc<RunEventSink>,
    observer: BuildObserver,
    recorder: Recorder<'p>,
}

/// The parts of the scope and what the caller already did for the first invocation.
pub(super) struct Scope {
    pub(super) observation: Arc<stb_warehouse::Client>,
    pub(super) database: String,
    pub(super) timings: Timings,
}

fn observer(
    args: &BuildArgs,
    scope: &Scope,
    sink: &Arc<RunEventSink>,
    run: &RunIdentity,
) -> BuildObserver {
    BuildObserver {
        sink: Arc::clone(sink),
        client: Arc::clone(&scope.observation),
        database: scope.database.clone(),
        invocation_id: run.invocation_id.clone(),
        on_event: super::progress::event_hook(args.events, args.json),
        on_warning: Box::new(warn),
        warned: AtomicBool::new(false),
    }
}

/// Runs a mixed build; `run` is the invocation the caller opened (the virtual phase's).
pub(super) fn run_mixed(
    args: &BuildArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    scope: &Scope,
    run: RunIdentity,
    (staged, direct): (Prepared, Prepared),
) -> ExitCode {
    let first_recorder = Recorder {
        client: Arc::clone(&scope.observation),
        database: scope.database.clone(),
        project,
        run: &run,
        deployment: std::sync::OnceLock::new(),
    };
    let early = |outcome: &'static str, failure: &Failure, recorder: &Recorder<'_>| {
        if let Err(note) = recorder.finish(&Ending::early(outcome, Some(&failure.message), 0)) {
            warn(&note);
        }
    };
    if let Some(deployment) = &staged.staged {
        let _ = first_recorder
            .deployment
            .set(deployment.deployment.to_string());
    }
    if let Some(invalid) = stb_engine::plan::refused(&[&staged, &direct]) {
        let failure = Failure {
            code: stb_engine::validation::INVALID_CODE,
            message: stb_engine::plan::invalid_summary(&invalid),
            hint: String::new(),
        };
        early("failed", &failure, &first_recorder);
        return crate::output::report(invalid, args.json);
    }
    if let Err(error) =
        stb_engine::plan::check_plan_hash(args.plan_hash.as_deref(), &[&staged, &direct])
    {
        let failure = Failure::from(error);
        early("refused", &failure, &first_recorder);
        return fail(&failure, args.json);
    }
    let direct_run = RunIdentity::new(None, run.display_command.clone(), run.owner.clone());
    if let Err(error) = stb_engine::build::open(
        &scope.observation,
        &scope.database,
        project,
        compiled,
        &direct_run,
    ) {
        return fail(&Failure::from(error), args.json);
    }
    let machine = args.json || args.events;
    if !machine {
        crate::staged_render::print_mixed(staged.staged.as_ref(), &direct.planned, args.verbose);
    }
    let direct_recorder = Recorder {
        client: Arc::clone(&scope.observation),
        database: scope.database.clone(),
        project,
        run: &direct_run,
        deployment: std::sync::OnceLock::new(),
    };
    // Admission before the question: one scope for both phases.
    let build_scope =
        stb_engine::build::scope(&staged.planned).union(&stb_engine::build::scope(&direct.planned));
    if let Err(error) =
        crate::run_context::check_authorised(compiled, &build_scope).and_then(|()| {
            stb_engine::admission::admit(
                &scope.observation,
                &scope.database,
                &[&run.invocation_id, &direct_run.invocation_id],
                &build_scope,
                crate::run_context::windows(project),
            )
        })
    {
        let failure = Failure::from(error);
        early("refused", &failure, &first_recorder);
        early("refused", &failure, &direct_recorder);
        return fail(&failure, args.json);
    }
    // One confirmation: the direct phase's shrink guard and protected pipelines (virtual
    // pipelines drop nothing readers see and cannot be protected).
    let verdict = match accept_shrink(args, &direct) {
        Ok(true) => confirm(args, project, &direct).map_err(|f| (f, "failed")),
        Ok(false) => Ok(false),
        Err(failure) => Err((failure, "refused")),
    };
    match verdict {
        Ok(true) => {}
        Ok(false) => {
            let _ = writeln!(std::io::stdout().lock(), "Build cancelled.");
            for recorder in [&first_recorder, &direct_recorder] {
                if let Err(note) = recorder.finish(&Ending::early("cancelled", None, 0)) {
                    warn(&note);
                }
            }
            return ExitCode::from(1);
        }
        Err((failure, outcome)) => {
            early(outcome, &failure, &first_recorder);
            early(outcome, &failure, &direct_recorder);
            return fail(&failure, args.json);
        }
    }
    // Nothing differs from the active deployment: the virtual phase builds no deployment.
    let mut parts = Vec::new();
    if staged.planned.nothing_changed {
        if let Err(note) = first_recorder.finish(&Ending {
            exit_code: 0,
            ..Ending::early("succeeded", None, 0)
        }) {
            warn(&note);
        }
    } else {
        parts.push(("virtual", staged, &run, first_recorder));
    }
    parts.push(("direct", direct, &direct_run, direct_recorder));
    let phases: Vec<Phase<'_>> = parts
        .into_iter()
        .map(|(kind, prepared, run, recorder)| {
            let sink = Arc::new(RunEventSink::new(
                Arc::clone(&scope.observation),
                &scope.database,
                &run.invocation_id,
            ));
            let observer = observer(args, scope, &sink, run);
            Phase {
                kind,
                prepared,
                run,
                sink,
                observer,
                recorder,
            }
        })
        .collect();
    execute(args, project, compiled, scope, &phases, build_scope)
}

fn execute(
    args: &BuildArgs,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    scope: &Scope,
    phases: &[Phase<'_>],
    build_scope: stb_engine::admission::Scope,
) -> ExitCode {
    use stb_build::execute::Observer as _;
    for phase in phases {
        phase.observer.event(
            "run_started",
            None,
            stb_engine::build::run_started(
                &phase.prepared.planned,
                project,
                &args.scope.select,
                scope.timings,
                phase.run,
            ),
        );
    }
    let heartbeats: Vec<_> = phases
        .iter()
        .map(|p| p.sink.heartbeat(HEARTBEAT_INTERVAL))
        .collect();
    let interrupt = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupt));
    }
    let order: Vec<stb_engine::build::Phase<'_>> = phases
        .iter()
        .map(|p| {
            (
                &p.prepared.planned,
                &p.observer as &dyn stb_build::execute::Observer,
                p.run,
            )
        })
        .collect();
    let client = Arc::clone(&phases[0].prepared.client);
    // Cancelling either phase's run stops the build where it is.
    let watches: Vec<_> = phases
        .iter()
        .map(|p| {
            stb_engine::build::watch::watch_cancellation(
                Arc::clone(&scope.observation),
                &scope.database,
                &p.run.invocation_id,
                Arc::clone(&interrupt),
            )
        })
        .collect();
    let on_wait = |holder: &str, owner: Option<&str>| {
        super::lock_wait::tell(&phases[0].observer, holder, owner);
    };
    let wait = stb_engine::admission::LockWait {
        scope: build_scope,
        windows: crate::run_context::windows(project),
        on_wait: &on_wait,
    };
    let recheck = stb_engine::build::Recheck {
        project,
        sources: &compiled.plan_sources,
    };
    let results =
        stb_engine::build::execute_phases_locked(&client, &order, &wait, &recheck, &interrupt);
    drop(watches);
    drop(heartbeats);
    let results = match results {
        Ok(results) => results,
        Err(error) => {
            let failure = Failure::from(error);
            let (outcome, code) = super::lock_wait::outcome(&failure);
            for phase in phases {
                phase
                    .observer
                    .completed(outcome, code, Some(&failure.message));
                if let Err(note) = phase.recorder.finish(&Ending {
                    exit_code: code,
                    ..Ending::early(outcome, Some(&failure.message), 0)
                }) {
                    warn(&note);
                }
            }
            let exit = fail(&failure, args.json);
            return u8::try_from(code).map_or(exit, ExitCode::from);
        }
    };
    let mut summaries = serde_json::Map::new();
    summaries.insert(
        "virtual".into(),
        serde_json::json!({"status": "nothing_changed", "message": "No changes: the active deployment matches the project; no deployment was built."}),
    );
    let mut exit_code = 0;
    for (phase, result) in phases.iter().zip(results) {
        let planned = &phase.prepared.planned;
        let ran = match result {
            Some(Ok(ran)) => ran,
            Some(Err(error)) => {
                let failure = Failure::from(error);
                phase
                    .observer
                    .completed("failed", 1, Some(&failure.message));
                if let Err(note) = phase.recorder.finish(&Ending::early(
                    "failed",
                    Some(&failure.message),
                    planned.plan.entries.len(),
                )) {
                    warn(&note);
                }
                exit_code = exit_code.max(1);
                summaries.insert(
                    phase.kind.into(),
                    serde_json::json!({"status": "failed", "error": {"code": failure.code, "message": failure.message}}),
                );
                continue;
            }
            None => {
                phase.observer.completed("cancelled", 1, Some(SKIPPED));
                if let Err(note) = phase.recorder.finish(&Ending::early(
                    "cancelled",
                    Some(SKIPPED),
                    planned.plan.entries.len(),
                )) {
                    warn(&note);
                }
                if !args.json && !args.events {
                    let _ = writeln!(std::io::stdout().lock(), "\n{SKIPPED}");
                }
                summaries.insert(
                    phase.kind.into(),
                    serde_json::json!({"status": "skipped", "message": SKIPPED}),
                );
                continue;
            }
        };
        let super::Recorded {
            audits,
            summary: phase_summary,
            ended,
            notes,
        } = super::record_ran(
            project,
            compiled,
            &phase.prepared,
            &ran,
            &phase.recorder,
            &phase.observer,
        );
        if !args.json && !args.events {
            let _ = writeln!(
                std::io::stdout().lock(),
                "\nPhase {} {}",
                if phase.kind == "virtual" {
                    "1/2"
                } else {
                    "2/2"
                },
                phase.kind.to_uppercase()
            );
            print_result(&phase.prepared, &ran.execution, &audits, &notes);
        } else {
            for note in &notes {
                warn(note);
            }
        }
        if phase.kind == "direct"
            && ran.execution.status != Status::Succeeded
            && let Some(deployment) = phases
                .iter()
                .find(|p| p.kind == "virtual")
                .and_then(|p| p.prepared.planned.deployment.as_ref())
        {
            warn(&format!(
                "the direct phase did not succeed; deployment {} remains staged",
                deployment.id
            ));
        }
        exit_code = exit_code.max(ended.exit_code);
        summaries.insert(phase.kind.into(), phase_summary);
    }
    if args.json {
        print_json(&serde_json::json!({
            "mode": "mixed",
            "execution_order": ["virtual", "direct"],
            "virtual": summaries.remove("virtual"),
            "direct": summaries.remove("direct"),
        }));
    } else if !phases.iter().any(|p| p.kind == "virtual") {
        let _ = writeln!(
            std::io::stdout().lock(),
            "\nPhase 1/2 VIRTUAL: no changes, the active deployment matches the project; no deployment was built."
        );
    }
    u8::try_from(exit_code).map_or(ExitCode::from(1), ExitCode::from)
}
