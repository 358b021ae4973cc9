//! `stb build` as one operation: the scope planned for building (routed once: direct,
//! virtual or mixed), the reviewed plan's hash checked, admission, the caller's approval,
//! the workflow under the target lock, the build audits and the records. Whoever calls it
//! (the CLI; the dev server's build) supplies a [`Frontend`]: how progress is shown, how the
//! plan is approved, what is kept beside the records; it gets back an [`Outcome`] to
//! render. Every way a build that opened its records ends is recorded here, so no caller
//! can forget one.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_build::execute::{Observer as _, Status};
use stb_compile::Compiled;
use stb_diagnostics::Diagnostics;
use stb_project::Project;
use stb_warehouse::Client;
use stb_warehouse::events::{HEARTBEAT_INTERVAL, RunEventSink};

use super::records::{BuildObserver, Ending, EventHook, Recorder, WarningHook};
use super::{BUDGET_CODE, Ended, Finished, Ran, RunIdentity, SHRINK_CODE, Timings};
use crate::EngineError;
use crate::plan::{Plan, Prepared, Purpose};
use crate::runs::Windows;
use crate::scope::Scope;

/// What the direct phase of a mixed build records when the virtual phase did not succeed.
pub const SKIPPED: &str = "Direct phase skipped because virtual staging failed.";
/// What a build whose virtual scope matches the active deployment says.
pub const NO_DEPLOYMENT: &str =
    "No changes: the active deployment matches the project; no deployment was built.";

/// What to build, and where.
pub struct Request<'a> {
    pub project: &'a Project,
    pub compiled: &'a Compiled,
    /// The connection the build plans, runs and records through.
    pub client: Arc<Client>,
    pub database: String,
    pub run: RunIdentity,
    pub scope: Scope,
    /// The hash of the plan that was reviewed: any other plan is refused.
    pub plan_hash: Option<String>,
    /// `--allow-large`: replays over the target's budget go on.
    pub allow_large: bool,
    /// The pipelines the dev server authorised, when it started the build: a plan that
    /// grew beyond them is refused.
    pub authorised: Option<Vec<String>>,
    pub windows: Windows,
    /// The compile's and the records' set-up times (planning is measured here).
    pub timings: Timings,
}

/// How the caller's approval went.
pub enum Approval {
    Go,
    /// Asked and declined.
    Declined,
    /// Refused unattended (a loss without `--allow-shrink`): recorded as `refused`.
    Refused(EngineError),
    /// The approval failed (a protected pipeline's token missing): recorded as `failed`.
    Failed(EngineError),
}

/// What the caller does around a build.
pub trait Frontend: Sync {
    /// Each run event as it is recorded (`--events` lines, a progress line).
    fn event_hook(&self) -> Option<EventHook>;
    /// Where warnings the build survives go (events that could not be recorded, records
    /// that could not be written).
    fn warning_hook(&self) -> WarningHook;
    /// The plan, before it is approved.
    fn show(&self, plan: &Plan);
    /// The shrink guard of `prepared` (a mixed plan's direct phase): a loss retained
    /// history cannot restore goes on only when accepted.
    fn accept_shrink(&self, prepared: &Prepared) -> Approval;
    /// The build of `prepared` itself: protected pipelines' tokens, or a question.
    fn confirm(&self, prepared: &Prepared) -> Approval;
    /// The workflow is about to run: from here `cancel` stops it at a statement boundary
    /// (the CLI points Ctrl-C at it; before this, Ctrl-C ends the process).
    fn executing(&self, cancel: &Arc<AtomicBool>);
    /// Another run holds the target lock and this build waits for it.
    fn lock_wait(&self, holder: &str, owner: Option<&str>);
    /// A phase ran: what the caller keeps of it beside the records (the CLI's
    /// `target/run/build/`); `Some` says what could not be kept.
    fn ran(&self, prepared: &Prepared, ran: &Ran) -> Option<String>;
}

/// How a phase that was planned ended.
pub enum PhaseResult {
    Ran {
        ran: Box<Ran>,
        audits: Vec<crate::audits::AuditResult>,
        /// The phase's `--json` summary, as recorded with its invocation.
        summary: serde_json::Value,
        ended: Ended,
        /// What could not be kept or recorded (the result stands).
        notes: Vec<String>,
    },
    /// It did not run: why.
    Failed(EngineError),
    /// A mixed build's direct phase after a virtual phase that did not succeed.
    Skipped,
}

/// One phase of a build that ran: `direct` or `virtual` (the plan's part of that kind).
pub struct PhaseOutcome {
    pub kind: &'static str,
    pub result: PhaseResult,
}

/// How the build ended, for the caller to render. Every outcome is recorded already.
pub enum Outcome {
    /// Stopped before the warehouse changed: refused or failed, with the exit code.
    Stopped { error: EngineError, exit_code: i32 },
    /// The warehouse refused statements of the plan: nothing was changed.
    Invalid(Diagnostics),
    /// Nothing to build (`mode`: `direct` or `virtual environments`).
    NothingChanged {
        mode: &'static str,
        message: &'static str,
    },
    /// The approval was declined.
    Declined,
    /// The workflow ran: its phases in order (a mixed build's virtual phase is left out
    /// when it had no deployment to build).
    Ran {
        plan: Box<Plan>,
        phases: Vec<PhaseOutcome>,
        exit_code: i32,
    },
}

impl Plan {
    /// The part of kind `kind` (`virtual` or `direct`).
    #[must_use]
    pub fn part(&self, kind: &str) -> Option<&Prepared> {
        match (self, kind) {
            (Self::Direct(one), "direct") | (Self::Virtual(one), "virtual") => Some(one),
            (Self::Mixed { staged, .. }, "virtual") => Some(staged),
            (Self::Mixed { direct, .. }, "direct") => Some(direct),
            _ => None,
        }
    }
}

/// Refuses a plan that touches pipelines the dev server did not authorise.
fn check_authorised(
    request: &Request<'_>,
    scope: &crate::admission::Scope,
) -> Result<(), EngineError> {
    let Some(authorised) = &request.authorised else {
        return Ok(());
    };
    let pipeline_of = |model: &str| {
        request
            .compiled
            .plan_models
            .iter()
            .find(|m| m.name == model)
            .map(|m| m.pipeline.clone())
    };
    crate::admission::within_authorised(scope, &pipeline_of, authorised)
}

/// The outcome and exit code of a build that ended before it held the lock.
fn stopped_outcome(error: &EngineError) -> (&'static str, i32) {
    match error.code {
        crate::admission::WAIT_INTERRUPTED_CODE => ("cancelled", super::EXIT_INTERRUPTED),
        crate::admission::OVERLAP_CODE => ("refused", 1),
        _ => ("failed", 1),
    }
}

/// Writes an invocation's end; a failure to write it is the frontend's warning.
fn finish(frontend: &dyn Frontend, recorder: &Recorder<'_>, ending: &Ending<'_>) {
    if let Err(note) = recorder.finish(ending) {
        (frontend.warning_hook())(&note);
    }
}

/// The run's events for `run`, written through their own sink.
fn observer(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    run: &RunIdentity,
) -> (Arc<RunEventSink>, BuildObserver) {
    observer_of((&request.client, &request.database), frontend, run)
}

/// The run's events for `run` in `database`, written through their own sink.
pub(super) fn observer_of(
    (client, database): (&Arc<Client>, &str),
    frontend: &dyn Frontend,
    run: &RunIdentity,
) -> (Arc<RunEventSink>, BuildObserver) {
    let sink = Arc::new(RunEventSink::new(
        Arc::clone(client),
        database,
        &run.invocation_id,
    ));
    let observer = BuildObserver {
        sink: Arc::clone(&sink),
        client: Arc::clone(client),
        database: database.to_owned(),
        invocation_id: run.invocation_id.clone(),
        on_event: frontend.event_hook(),
        on_warning: frontend.warning_hook(),
        warned: AtomicBool::new(false),
    };
    (sink, observer)
}

/// Plans `request.scope` for building and builds it; `cancel` stops it (a wait for the
/// lock, or the workflow at a statement boundary), as `stb runs cancel` does through the
/// run's events.
#[must_use]
pub fn build(request: &Request<'_>, frontend: &dyn Frontend, cancel: &Arc<AtomicBool>) -> Outcome {
    let recorder = Recorder {
        client: Arc::clone(&request.client),
        database: request.database.clone(),
        project: request.project,
        run: &request.run,
        deployment: std::sync::OnceLock::new(),
    };
    let mut timings = request.timings;
    let planning = std::time::Instant::now();
    let plan = match crate::plan::plan(
        request.project,
        request.compiled,
        &request.client,
        &request.database,
        &request.scope,
        Purpose::Build,
        None,
    ) {
        Ok(plan) => plan,
        Err(error) => {
            finish(
                frontend,
                &recorder,
                &Ending::early("failed", Some(&error.message), 0),
            );
            return Outcome::Stopped {
                error,
                exit_code: 1,
            };
        }
    };
    timings.planning_ms = planning.elapsed().as_millis();
    // A mixed build's first invocation is its virtual phase's: recorded with its deployment
    // whatever ends it (a single build records its own once the plan passed its checks).
    if let Plan::Mixed { staged, .. } = &plan
        && let Some(deployment) = &staged.staged
    {
        let _ = recorder.deployment.set(deployment.deployment.to_string());
    }
    if let Some(invalid) = plan.refused() {
        let summary = crate::plan::invalid_summary(&invalid);
        finish(
            frontend,
            &recorder,
            &Ending::early("failed", Some(&summary), 0),
        );
        return Outcome::Invalid(invalid);
    }
    if let Err(error) = crate::plan::check_plan_hash(request.plan_hash.as_deref(), &plan.parts()) {
        finish(
            frontend,
            &recorder,
            &Ending::early("refused", Some(&error.message), 0),
        );
        return Outcome::Stopped {
            error,
            exit_code: 1,
        };
    }
    let ran = match &plan {
        Plan::Direct(one) | Plan::Virtual(one) => {
            single(request, frontend, cancel, timings, &recorder, &plan, one)
        }
        Plan::Mixed { staged, direct } => mixed(
            request,
            frontend,
            cancel,
            timings,
            &recorder,
            &plan,
            (staged, direct),
        ),
    };
    match ran {
        Ok((phases, exit_code)) => Outcome::Ran {
            plan: Box::new(plan),
            phases,
            exit_code,
        },
        Err(outcome) => outcome,
    }
}

/// A direct or a virtual build: one phase, one invocation.
fn single(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    cancel: &Arc<AtomicBool>,
    timings: Timings,
    recorder: &Recorder<'_>,
    plan: &Plan,
    prepared: &Prepared,
) -> Result<(Vec<PhaseOutcome>, i32), Outcome> {
    if let Some(staged) = &prepared.staged {
        let _ = recorder.deployment.set(staged.deployment.to_string());
    }
    let planned = &prepared.planned;
    if planned.nothing_changed {
        let (mode, message) = match prepared.staged {
            Some(_) => ("virtual environments", NO_DEPLOYMENT),
            None => ("direct", crate::direct::NOTHING_CHANGED),
        };
        finish(
            frontend,
            recorder,
            &Ending {
                exit_code: 0,
                ..Ending::early("succeeded", None, 0)
            },
        );
        return Err(Outcome::NothingChanged { mode, message });
    }
    // Before anything is asked or recorded as started: a live run that overlaps this
    // build refuses it (its plan was made against relations that run is changing).
    let scope = super::scope(planned);
    let selected = planned.plan.entries.len();
    if let Err(error) = check_authorised(request, &scope).and_then(|()| {
        crate::admission::admit(
            &request.client,
            &request.database,
            &[&request.run.invocation_id],
            &scope,
            request.windows,
        )
    }) {
        finish(
            frontend,
            recorder,
            &Ending::early("refused", Some(&error.message), selected),
        );
        return Err(Outcome::Stopped {
            error,
            exit_code: 1,
        });
    }
    let (sink, observer) = observer(request, frontend, &request.run);
    observer.event(
        "run_started",
        None,
        super::run_started(
            planned,
            request.project,
            &request.scope.select,
            timings,
            &request.run,
        ),
    );
    let heartbeat = sink.heartbeat(HEARTBEAT_INTERVAL);
    frontend.show(plan);
    let shrink = serde_json::to_value(planned.shrink_summary()).unwrap_or_default();
    // The replay budget, then the shrink guard: a refusal is recorded as refused, with its
    // numbers.
    let over_budget = check_budget(&[prepared], request.allow_large);
    let approval = match over_budget {
        Some(error) => Approval::Refused(error),
        None => approve(frontend, prepared, prepared),
    };
    let refusal = match approval {
        Approval::Go => {
            if !planned.shrinking().is_empty() {
                observer.event("shrink_accepted", None, shrink.clone());
            }
            None
        }
        Approval::Declined => {
            drop(heartbeat);
            observer.completed("cancelled", 1, None);
            finish(
                frontend,
                recorder,
                &Ending::early("cancelled", None, selected),
            );
            return Err(Outcome::Declined);
        }
        Approval::Refused(error) => Some(("refused", error)),
        Approval::Failed(error) => Some(("failed", error)),
    };
    if let Some((outcome, error)) = refusal {
        drop(heartbeat);
        let mut summary = "{}".to_owned();
        if error.code == BUDGET_CODE {
            let refused = budget_refusal(&[prepared]);
            observer.event("budget_refused", None, refused["replay_cost"].clone());
            summary = refused.to_string();
        } else if outcome == "refused" {
            observer.event("shrink_refused", None, shrink.clone());
            summary = serde_json::json!({
                "status": "refused",
                "code": SHRINK_CODE,
                "shrink": shrink,
                "replay_windows": planned.replay_windows,
            })
            .to_string();
        }
        observer.completed(outcome, 1, Some(&error.message));
        finish(
            frontend,
            recorder,
            &Ending {
                summary: &summary,
                ..Ending::early(outcome, Some(&error.message), selected)
            },
        );
        return Err(Outcome::Stopped {
            error,
            exit_code: 1,
        });
    }
    frontend.executing(cancel);
    // `stb runs cancel` asks through the run's own events: the same stop as Ctrl-C.
    let watch = super::watch::watch_cancellation(
        Arc::clone(&request.client),
        &request.database,
        &request.run.invocation_id,
        Arc::clone(cancel),
    );
    let on_wait = |holder: &str, owner: Option<&str>| {
        tell_wait(&observer, holder, owner);
        frontend.lock_wait(holder, owner);
    };
    let wait = crate::admission::LockWait {
        scope,
        windows: request.windows,
        on_wait: &on_wait,
    };
    let recheck = super::Recheck {
        project: request.project,
        sources: &request.compiled.plan_sources,
    };
    let outcome = super::execute_locked(
        &prepared.client,
        planned,
        &observer,
        &request.run,
        &wait,
        &recheck,
        cancel,
    );
    drop(watch);
    drop(heartbeat);
    let ran = match outcome {
        Ok(ran) => ran,
        Err(error) => {
            let (outcome, code) = stopped_outcome(&error);
            observer.completed(outcome, code, Some(&error.message));
            finish(
                frontend,
                recorder,
                &Ending {
                    exit_code: code,
                    ..Ending::early(outcome, Some(&error.message), selected)
                },
            );
            return Err(Outcome::Stopped {
                error,
                exit_code: code,
            });
        }
    };
    let result = record_ran(request, frontend, prepared, ran, recorder, &observer);
    let exit_code = match &result {
        PhaseResult::Ran { ended, .. } => ended.exit_code,
        _ => 1,
    };
    let kind = if prepared.staged.is_some() {
        "virtual"
    } else {
        "direct"
    };
    Ok((vec![PhaseOutcome { kind, result }], exit_code))
}

/// Approves a build: the shrink guard of `shrink` first, then the confirmation of
/// `confirm`.
fn approve(frontend: &dyn Frontend, shrink: &Prepared, confirm: &Prepared) -> Approval {
    match frontend.accept_shrink(shrink) {
        Approval::Go => frontend.confirm(confirm),
        other => other,
    }
}

/// Records (`lock_waiting`) which run this build waits for.
fn tell_wait(observer: &BuildObserver, holder: &str, owner: Option<&str>) {
    observer.event(
        "lock_waiting",
        None,
        serde_json::json!({"holderInvocationId": holder, "holderOwner": owner}),
    );
}

/// One phase of a mixed build: its plan and its invocation's observation.
struct Phase<'p> {
    kind: &'static str,
    prepared: &'p Prepared,
    run: &'p RunIdentity,
    sink: Arc<RunEventSink>,
    observer: BuildObserver,
    recorder: &'p Recorder<'p>,
}

/// A build whose scope holds direct and virtual pipelines: one confirmation, then one
/// target lock held around the virtual phase (a new deployment, staged) and the direct
/// phase (applied in place). A virtual phase that does not succeed skips the direct one;
/// a direct phase that fails leaves the deployment staged. Each phase is its own
/// invocation, with its own events and records.
fn mixed(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    cancel: &Arc<AtomicBool>,
    timings: Timings,
    first_recorder: &Recorder<'_>,
    plan: &Plan,
    (staged, direct): (&Prepared, &Prepared),
) -> Result<(Vec<PhaseOutcome>, i32), Outcome> {
    if let Some(deployment) = &staged.staged {
        let _ = first_recorder
            .deployment
            .set(deployment.deployment.to_string());
    }
    let direct_run = RunIdentity::new(
        None,
        request.run.display_command.clone(),
        request.run.owner.clone(),
    );
    if let Err(error) = super::open(
        &request.client,
        &request.database,
        request.project,
        request.compiled,
        &direct_run,
    ) {
        return Err(Outcome::Stopped {
            error,
            exit_code: 1,
        });
    }
    frontend.show(plan);
    let direct_recorder = Recorder {
        client: Arc::clone(&request.client),
        database: request.database.clone(),
        project: request.project,
        run: &direct_run,
        deployment: std::sync::OnceLock::new(),
    };
    let both = |outcome: &str, error: Option<&str>, summary: &str| {
        for recorder in [first_recorder, &direct_recorder] {
            let ending = Ending {
                summary,
                ..Ending::early(outcome, error, 0)
            };
            finish(frontend, recorder, &ending);
        }
    };
    // Admission before the question: one scope for both phases.
    let build_scope = super::scope(&staged.planned).union(&super::scope(&direct.planned));
    if let Err(error) = check_authorised(request, &build_scope).and_then(|()| {
        crate::admission::admit(
            &request.client,
            &request.database,
            &[&request.run.invocation_id, &direct_run.invocation_id],
            &build_scope,
            request.windows,
        )
    }) {
        both("refused", Some(&error.message), "{}");
        return Err(Outcome::Stopped {
            error,
            exit_code: 1,
        });
    }
    // The replay budget over both phases, then one confirmation: the direct phase's shrink
    // guard and protected pipelines (virtual pipelines drop nothing readers see and cannot
    // be protected).
    if let Some(error) = check_budget(&[staged, direct], request.allow_large) {
        let summary = budget_refusal(&[staged, direct]).to_string();
        both("refused", Some(&error.message), &summary);
        return Err(Outcome::Stopped {
            error,
            exit_code: 1,
        });
    }
    match approve(frontend, direct, direct) {
        Approval::Go => {}
        Approval::Declined => {
            both("cancelled", None, "{}");
            return Err(Outcome::Declined);
        }
        Approval::Refused(error) => {
            both("refused", Some(&error.message), "{}");
            return Err(Outcome::Stopped {
                error,
                exit_code: 1,
            });
        }
        Approval::Failed(error) => {
            both("failed", Some(&error.message), "{}");
            return Err(Outcome::Stopped {
                error,
                exit_code: 1,
            });
        }
    }
    // Nothing differs from the active deployment: the virtual phase builds no deployment.
    let mut parts: Vec<(&'static str, &Prepared, &RunIdentity, &Recorder<'_>)> = Vec::new();
    if staged.planned.nothing_changed {
        finish(
            frontend,
            first_recorder,
            &Ending {
                exit_code: 0,
                ..Ending::early("succeeded", None, 0)
            },
        );
    } else {
        parts.push(("virtual", staged, &request.run, first_recorder));
    }
    parts.push(("direct", direct, &direct_run, &direct_recorder));
    let phases: Vec<Phase<'_>> = parts
        .into_iter()
        .map(|(kind, prepared, run, recorder)| {
            let (sink, observer) = observer(request, frontend, run);
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
    execute_mixed(request, frontend, cancel, timings, &phases, build_scope)
}

fn execute_mixed(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    cancel: &Arc<AtomicBool>,
    timings: Timings,
    phases: &[Phase<'_>],
    build_scope: crate::admission::Scope,
) -> Result<(Vec<PhaseOutcome>, i32), Outcome> {
    for phase in phases {
        phase.observer.event(
            "run_started",
            None,
            super::run_started(
                &phase.prepared.planned,
                request.project,
                &request.scope.select,
                timings,
                phase.run,
            ),
        );
    }
    let heartbeats: Vec<_> = phases
        .iter()
        .map(|p| p.sink.heartbeat(HEARTBEAT_INTERVAL))
        .collect();
    frontend.executing(cancel);
    let order: Vec<super::Phase<'_>> = phases
        .iter()
        .map(|p| {
            (
                &p.prepared.planned,
                &p.observer as &dyn stb_build::execute::Observer,
                p.run,
            )
        })
        .collect();
    // Cancelling either phase's run stops the build where it is.
    let watches: Vec<_> = phases
        .iter()
        .map(|p| {
            super::watch::watch_cancellation(
                Arc::clone(&request.client),
                &request.database,
                &p.run.invocation_id,
                Arc::clone(cancel),
            )
        })
        .collect();
    let on_wait = |holder: &str, owner: Option<&str>| {
        tell_wait(&phases[0].observer, holder, owner);
        frontend.lock_wait(holder, owner);
    };
    let wait = crate::admission::LockWait {
        scope: build_scope,
        windows: request.windows,
        on_wait: &on_wait,
    };
    let recheck = super::Recheck {
        project: request.project,
        sources: &request.compiled.plan_sources,
    };
    let client = Arc::clone(&phases[0].prepared.client);
    let results = super::execute_phases_locked(&client, &order, &wait, &recheck, cancel);
    drop(watches);
    drop(heartbeats);
    let results = match results {
        Ok(results) => results,
        Err(error) => {
            let (outcome, code) = stopped_outcome(&error);
            for phase in phases {
                phase
                    .observer
                    .completed(outcome, code, Some(&error.message));
                finish(
                    frontend,
                    phase.recorder,
                    &Ending {
                        exit_code: code,
                        ..Ending::early(outcome, Some(&error.message), 0)
                    },
                );
            }
            return Err(Outcome::Stopped {
                error,
                exit_code: code,
            });
        }
    };
    let mut exit_code = 0;
    let mut outcomes = Vec::new();
    for (phase, result) in phases.iter().zip(results) {
        let selected = phase.prepared.planned.plan.entries.len();
        let result = match result {
            Some(Ok(ran)) => {
                let result = record_ran(
                    request,
                    frontend,
                    phase.prepared,
                    ran,
                    phase.recorder,
                    &phase.observer,
                );
                if let PhaseResult::Ran { ended, .. } = &result {
                    exit_code = exit_code.max(ended.exit_code);
                }
                result
            }
            Some(Err(error)) => {
                phase.observer.completed("failed", 1, Some(&error.message));
                finish(
                    frontend,
                    phase.recorder,
                    &Ending::early("failed", Some(&error.message), selected),
                );
                exit_code = exit_code.max(1);
                PhaseResult::Failed(error)
            }
            None => {
                phase.observer.completed("cancelled", 1, Some(SKIPPED));
                finish(
                    frontend,
                    phase.recorder,
                    &Ending::early("cancelled", Some(SKIPPED), selected),
                );
                PhaseResult::Skipped
            }
        };
        outcomes.push(PhaseOutcome {
            kind: phase.kind,
            result,
        });
    }
    Ok((outcomes, exit_code))
}

/// After a workflow ran: the build audits (not for a deployment: they would read the
/// stable views, that is, production; `stb deployment audit` checks copies), what the
/// caller keeps of it, the summary and the records.
fn record_ran(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    prepared: &Prepared,
    ran: Ran,
    recorder: &Recorder<'_>,
    observer: &BuildObserver,
) -> PhaseResult {
    let planned = &prepared.planned;
    let audits = if ran.execution.status == Status::Succeeded && planned.deployment.is_none() {
        crate::audits::after_build(
            &prepared.client,
            &planned.workflow.database,
            request.compiled,
            &planned.executed_models(),
        )
    } else {
        Vec::new()
    };
    let mut notes: Vec<String> = frontend.ran(prepared, &ran).into_iter().collect();
    let summary = summary(prepared, &ran.execution, &audits);
    let ended = super::record(
        &prepared.client,
        planned,
        recorder,
        observer,
        &Finished {
            ran: &ran,
            audits: &audits,
            summary: &summary,
        },
    );
    notes.extend(ended.notes.iter().cloned());
    PhaseResult::Ran {
        ran: Box::new(ran),
        audits,
        summary,
        ended,
        notes,
    }
}

/// A phase's `--json` summary.
#[must_use]
pub fn summary(
    prepared: &Prepared,
    execution: &stb_build::execute::Execution,
    audits: &[crate::audits::AuditResult],
) -> serde_json::Value {
    let plan = &prepared.planned.plan;
    let deployment = prepared.planned.deployment.as_ref();
    serde_json::json!({
        "mode": if deployment.is_some() { "virtual environments" } else { "direct" },
        "deployment_id": deployment.map(|d| d.id.as_str()),
        "deployment_created_at": deployment.map(|d| d.id.created_at()),
        "adapter": "clickhouse",
        "database": prepared.planned.workflow.database,
        "status": execution.status,
        "start_time": prepared.planned.start_time.as_ref().map(|s| s.as_str().to_owned()),
        // What holds at the end: nothing, once a stopped build was undone.
        "dropped": plan.teardown.iter().filter(|_| applied(execution)).map(|(_, r)| r).collect::<Vec<_>>(),
        "created": plan.creation.iter().filter(|_| applied(execution)).map(|(_, r)| r).collect::<Vec<_>>(),
        "restored": execution.restored,
        "suspended": execution.suspended,
        "boundary_time": execution.captured_roots.first().and_then(|c| c.captured_at.clone()),
        "boundaries": execution.captured_roots,
        "replays": execution.replays.iter().map(|(model, rows)| serde_json::json!({
            "model": model, "written_rows": rows,
        })).collect::<Vec<_>>(),
        "seeds": execution.seeds.iter().map(|(model, rows)| serde_json::json!({
            "model": model, "written_rows": rows,
        })).collect::<Vec<_>>(),
        "completed_steps": execution.completed_steps.len(),
        "failed_step": execution.failed_step,
        "error_message": execution.error_message,
        "warnings": execution.warnings,
        "replay_windows": prepared.planned.replay_windows,
        "replay_cost": prepared.planned.cost_summary(),
        "replay_costs": prepared.planned.replay_costs,
        "shrink": accepted_shrink(prepared),
        "audits": {
            "results": audits,
            "errors": audits.iter().filter(|a| a.is_error()).count(),
            "warnings": audits.iter().filter(|a| a.is_warning()).count(),
            "error_failure_count": audits.iter().filter(|a| a.is_error()).count(),
            "warning_failure_count": audits.iter().filter(|a| a.is_warning()).count(),
            "over_empty_relations": crate::audits::over_empty_relations(audits),
        },
    })
}

/// True when the build's relations stand at the end: it succeeded, it stopped after
/// every replay and was finished, or it is suspended (partly filled, to be resumed).
fn applied(execution: &stb_build::execute::Execution) -> bool {
    execution.status == Status::Succeeded
        || execution.suspended.is_some()
        || execution
            .restored
            .as_ref()
            .is_some_and(|r| r.finished && r.errors.is_empty())
}

/// The shrink guard's numbers; a build that ran past the guard with a loss accepted it.
fn accepted_shrink(prepared: &Prepared) -> serde_json::Value {
    let mut shrink = serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default();
    if let Some(fields) = shrink.as_object_mut() {
        let accepted = !prepared.planned.shrinking().is_empty();
        fields.insert("accepted".into(), accepted.into());
    }
    shrink
}

/// What a build refused by its replay budget records in its invocation's summary: both
/// the replays together (`replay_cost`, also its `budget_refused` event's payload) and
/// each root's cost, over `parts` (one, or a mixed build's two phases).
fn budget_refusal(parts: &[&Prepared]) -> serde_json::Value {
    let costs: Vec<&stb_plan::cost::ReplayCost> =
        parts.iter().flat_map(|p| &p.planned.replay_costs).collect();
    serde_json::json!({
        "status": "refused",
        "code": BUDGET_CODE,
        "replay_cost": crate::plan::replay_cost(parts),
        "replay_costs": costs,
    })
}

/// The replay budget: `parts`' replays together (a mixed build's two phases) read more
/// than the target's `[build] max_replay_rows` or `max_replay_bytes` allow, and the
/// caller did not accept it (`--allow-large`). The refusal carries the numbers.
#[must_use]
pub fn check_budget(parts: &[&Prepared], allow_large: bool) -> Option<EngineError> {
    if allow_large {
        return None;
    }
    let summary = crate::plan::replay_cost(parts);
    if summary.over_budget.is_empty() {
        return None;
    }
    let costs = parts.iter().flat_map(|p| p.planned.replay_costs.iter());
    let mut lines: Vec<String> = summary
        .over_budget
        .iter()
        .map(|reason| format!("  {reason}"))
        .collect();
    lines.push(format!("  in all: {}", summary.describe()));
    lines.extend(costs.map(|cost| format!("  {}", cost.describe())));
    Some(EngineError::new(
        BUDGET_CODE,
        format!(
            "Refusing to build: the replays read more than the target's budget; nothing was changed\n{}",
            lines.join("\n")
        ),
        "rerun with --allow-large to accept the cost, narrow the replays (--start-time, --select), or raise [build] max_replay_rows / max_replay_bytes",
    ))
}

/// The shrink guard without anyone to ask: a loss retained history cannot restore is
/// refused unless `allow_shrink` accepts it (a deployment drops nothing readers see).
#[must_use]
pub fn unattended_shrink(prepared: &Prepared, allow_shrink: bool) -> Approval {
    if prepared.planned.shrinking().is_empty()
        || allow_shrink
        || prepared.planned.deployment.is_some()
    {
        return Approval::Go;
    }
    let lines = shrink_lines(prepared);
    Approval::Refused(EngineError::new(
        SHRINK_CODE,
        format!(
            "Refusing to rebuild: retained history cannot restore what these models hold now\n{}",
            lines.join("\n")
        ),
        "nothing was dropped; rerun with --allow-shrink to accept the loss (protected pipelines still need --confirm), or restore the history (re-land the source, or choose a later --start-time) first",
    ))
}

/// What `prepared` would lose that retained history cannot restore, a line per model, as
/// the refusal and the question show it.
#[must_use]
pub fn shrink_lines(prepared: &Prepared) -> Vec<String> {
    prepared
        .planned
        .shrinking()
        .iter()
        .map(|w| format!("  {}", w.describe()))
        .collect()
}

/// The protected pipelines `prepared` rebuilds, with their guards.
#[must_use]
pub fn protected<'p>(
    project: &'p Project,
    prepared: &Prepared,
) -> Vec<(&'p str, &'p stb_project::pipelines::Protection)> {
    let executing = prepared.planned.executed_models();
    project
        .pipelines
        .iter()
        .filter(|p| {
            p.models
                .iter()
                .any(|m| executing.contains(&m.name.as_str()))
        })
        .filter_map(|p| p.protection.as_ref().map(|guard| (p.name.as_str(), guard)))
        .collect()
}

/// The confirmation without anyone to ask: every protected pipeline's token must be among
/// `tokens`.
#[must_use]
pub fn unattended_confirm(project: &Project, prepared: &Prepared, tokens: &[String]) -> Approval {
    for (_, guard) in protected(project, prepared) {
        if !tokens.iter().any(|t| t == &guard.confirmation) {
            return Approval::Failed(missing_token(&guard.confirmation));
        }
    }
    Approval::Go
}

/// A protected pipeline's token was not given.
#[must_use]
pub fn missing_token(confirmation: &str) -> EngineError {
    EngineError::new(
        super::CONFIRMATION_CODE,
        format!("Confirmation required: rerun with --confirm {confirmation}"),
        "protected pipelines need their token even with --auto-approve",
    )
}
