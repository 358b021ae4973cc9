//! Direct builds as a library: open the run's records, run the planned workflow under the
//! target lock, and record how it ended. The caller confirms with its user in between
//! (the CLI asks at a terminal; the dev server will ask through its API) and renders.

pub mod operation;
pub mod records;
pub mod resume;
pub mod watch;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use stb_build::execute::{Execution, Observer, Status, planned_statements, run_from as execute};
use stb_build::undo::{ReadAhead, RestorePoint};
use stb_warehouse::records::{
    ModelDefinition, NodeResult, write_fingerprints, write_manifest, write_node_results,
};
use stb_warehouse::statements::{persist_statements, workflow_sha256};
use stb_warehouse::{Client, metadata};

use crate::EngineError;
use crate::admission::{self, LockWait, Scope};
use crate::audits::AuditResult;
use crate::direct::Planned;
use records::{BuildObserver, Ending, Recorder, manifest};

/// `--json`/`--events` without `--auto-approve`.
pub const APPROVAL_CODE: &str = "STB-BUILD-001";
/// A protected pipeline's token is missing.
pub const CONFIRMATION_CODE: &str = "STB-BUILD-002";
/// A workflow statement failed.
pub const FAILED_CODE: &str = "STB-BUILD-003";
/// An error-severity build audit failed.
pub const AUDIT_CODE: &str = "STB-BUILD-004";
/// The rebuild would lose rows retained history cannot restore.
pub const SHRINK_CODE: &str = "STB-BUILD-005";
/// The deployment id names a complete deployment.
pub const DEPLOYMENT_CODE: &str = "STB-BUILD-006";
/// The replays read more than the target's `[build] max_replay_rows` / `max_replay_bytes`.
pub const BUDGET_CODE: &str = "STB-BUILD-008";
/// The event that says a phase's statements passed their checks again under the lock
/// (`checked`, `elapsedMs`), or that the catalog they read is unchanged since they ran
/// (`unchanged: true`: one query instead of the checks).
pub const RECHECKED_EVENT: &str = "statements_rechecked";
/// The event in a locked run's first phase that names every phase's invocation.
pub const PHASES_EVENT: &str = "lock_phases";
/// Exit code of an interrupted build (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A build invocation's identity and clocks.
#[derive(Debug)]
pub struct RunIdentity {
    pub invocation_id: String,
    /// The command line shown for the run, when the caller has one to show.
    pub display_command: Option<String>,
    /// Who started it (`user@host (pid N)` from the CLI; the signed-in user from the dev
    /// server), named when another build is refused because of it.
    pub owner: Option<String>,
    pub started_at_ms: u128,
    pub clock: Instant,
}

impl RunIdentity {
    /// A new run, with the invocation id a caller chose (`STREAMBUILD_RUN_INVOCATION_ID`
    /// for the CLI) or a fresh one, and the command line to show for it
    /// (`STREAMBUILD_RUN_DISPLAY_COMMAND`), started by `owner`.
    #[must_use]
    pub fn new(
        invocation_id: Option<String>,
        display_command: Option<String>,
        owner: Option<String>,
    ) -> Self {
        Self {
            display_command,
            owner,
            invocation_id: invocation_id
                .filter(|id| !id.trim().is_empty())
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            started_at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            clock: Instant::now(),
        }
    }
}

/// Creates or upgrades the lifecycle tables and records the project's manifest: even a
/// build that is declined or fails to plan leaves its records.
///
/// # Errors
/// The warehouse refused the migration or the manifest row.
pub fn open(
    client: &Client,
    database: &str,
    project: &stb_project::Project,
    compiled: &stb_compile::Compiled,
    run: &RunIdentity,
) -> Result<(), EngineError> {
    metadata::migrate(client, database).map_err(|e| EngineError::from(&e))?;
    let fingerprint = stb_plan::sql_change::sql_hash(
        compiled
            .files
            .get("manifest.json")
            .map_or("", String::as_str),
    );
    write_manifest(
        client,
        database,
        &manifest(project, compiled, &run.invocation_id, &fingerprint),
    )
    .map_err(|e| EngineError::from(&e))
}

/// Startup timings of a build, for its `run_started` event.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    pub compile_ms: u128,
    pub observability_ms: u128,
    pub planning_ms: u128,
}

/// The models a plan builds (`model:<name>`) and what it reads (`model:` or `source:`).
fn logical_ids(planned: &Planned) -> (Vec<String>, Vec<String>) {
    let plan = &planned.plan;
    let executed = plan
        .entries
        .iter()
        .map(|e| format!("model:{}", e.model))
        .collect();
    let models = stb_plan::work::ModelIndex::new(&planned.models);
    let context = plan
        .prerequisites
        .iter()
        .map(|p| {
            let is_model = models.contains(&p.name);
            format!("{}:{}", if is_model { "model" } else { "source" }, p.name)
        })
        .collect();
    (executed, context)
}

/// The `run_started` event's payload.
#[must_use]
pub fn run_started(
    planned: &Planned,
    project: &stb_project::Project,
    selectors: &[String],
    timings: Timings,
    run: &RunIdentity,
) -> serde_json::Value {
    let (executed, context) = logical_ids(planned);
    serde_json::json!({
        "command": "build",
        "displayCommand": run.display_command,
        "owner": run.owner,
        // The reference's values: dashboards over the events group runs by them.
        "mode": if planned.deployment.is_some() { "virtual_environment" } else { "direct" },
        "deploymentId": planned.deployment.as_ref().map(|d| d.id.as_str()),
        "toolVersion": env!("CARGO_PKG_VERSION"),
        "totalStatements": planned.workflow.steps.len(),
        "selectedNodeCount": executed.len(),
        "database": planned.database,
        "projectIdentity": project.name,
        "selectors": selectors,
        "startTime": planned.start_time.as_ref().map(|s| s.as_str().to_owned()),
        "executedLogicalIds": executed,
        "contextLogicalIds": context,
        "replayWindows": planned.replay_windows,
        "shrink": planned.shrink_summary(),
        "startupTimings": {
            "compileMs": timings.compile_ms,
            "observabilityMs": timings.observability_ms,
            "planningMs": timings.planning_ms,
            // Part of planning: checking every statement against the warehouse.
            "validationMs": planned.validated.as_ref().map(|v| v.elapsed_ms),
            "totalMs": run.clock.elapsed().as_millis(),
        },
    })
}

/// What a locked workflow run gave.
pub struct Ran {
    pub workflow_id: String,
    pub execution: Execution,
    /// The lock could not be given back (the build's result stands).
    pub warnings: Vec<String>,
}

/// What `planned` writes and reads, for admission: the same ids its `run_started` records.
#[must_use]
pub fn scope(planned: &Planned) -> Scope {
    let (executed, context) = logical_ids(planned);
    Scope::new(executed, context)
}

/// Takes the target lock (waiting, as [`admission::acquire`] does, while a live run that
/// does not overlap this one holds it), records every planned statement (read back and
/// verified), runs the workflow (`interrupt` stops it at a statement boundary and kills
/// the statement in flight), and gives the lock back.
///
/// # Errors
/// An overlapping run, a stale lock, an interrupted wait, or the statements could not be
/// recorded; nothing ran.
pub fn execute_locked(
    client: &Arc<Client>,
    planned: &Planned,
    observer: &dyn Observer,
    run: &RunIdentity,
    wait: &LockWait<'_>,
    recheck: &Recheck<'_>,
    interrupt: &AtomicBool,
) -> Result<Ran, EngineError> {
    let mut phases = execute_phases_locked(
        client,
        &[(planned, observer, run)],
        wait,
        recheck,
        interrupt,
    )?;
    phases.pop().flatten().unwrap_or_else(|| {
        Err(EngineError::new(
            FAILED_CODE,
            "the workflow did not run",
            "run the build again",
        ))
    })
}

/// One phase of a locked run: its plan, who observes it, and its invocation.
pub type Phase<'a> = (&'a Planned, &'a dyn Observer, &'a RunIdentity);

/// What a build checks again once it holds the target lock, before its first change:
/// while it was confirmed or waited for the lock another run or a person may have changed
/// what its statements read, so every plan's validation runs again there.
pub struct Recheck<'a> {
    pub project: &'a stb_project::Project,
    pub sources: &'a [stb_plan::direct::PlanSource],
}

impl Recheck<'_> {
    /// Every phase's statements, checked against the warehouse as it is now, and the first
    /// phase's restore point, read in the same request as the catalog's stamp (the lock is
    /// held: nothing changes it before that phase runs).
    ///
    /// # Errors
    /// The warehouse refused some (STB-PLAN-006, the first located), or could not be asked.
    fn run(&self, client: &Client, phases: &[Phase<'_>]) -> Result<Option<ReadAhead>, EngineError> {
        let mut refused = stb_diagnostics::Diagnostics::new();
        let mut ahead = None;
        for (index, (planned, observer, _)) in phases.iter().enumerate() {
            // Nothing the checks read has changed since they ran: one query, not the checks.
            let started = std::time::Instant::now();
            let databases =
                crate::validation::stamp_databases(&planned.workflow.database, self.sources);
            let recorded = planned
                .validated
                .as_ref()
                .and_then(|v| v.catalog_stamp.as_deref());
            let now = if index == 0 {
                let (point, stamp) =
                    RestorePoint::read_stamped(client, &planned.workflow, &databases);
                ahead = Some(ReadAhead { point });
                stamp
            } else {
                crate::validation::catalog_stamp(client, &databases)
            };
            if recorded.is_some() && now.as_deref() == recorded {
                observer.event(
                    RECHECKED_EVENT,
                    None,
                    serde_json::json!({
                        "checked": 0,
                        "unchanged": true,
                        "elapsedMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    }),
                );
                continue;
            }
            match crate::validation::validate(
                client,
                self.project,
                self.sources,
                planned,
                crate::validation::Stamp::Read(now),
            ) {
                Ok(validated) => observer.event(
                    RECHECKED_EVENT,
                    None,
                    serde_json::json!({"checked": validated.checked, "elapsedMs": validated.elapsed_ms}),
                ),
                Err(found) => refused.extend(found),
            }
        }
        let sorted = refused.into_sorted();
        let Some(first) = sorted.first() else {
            return Ok(ahead);
        };
        // The warehouse could not be asked at all: that, not a change, is what to say.
        if let Some(unreachable) = sorted
            .iter()
            .find(|d| d.code != crate::validation::INVALID_CODE)
        {
            return Err(EngineError::new(
                unreachable.code,
                format!("{}; nothing was changed", unreachable.message),
                unreachable.hint.clone(),
            ));
        }
        let at = first
            .location
            .as_ref()
            .map(|location| format!("{location}: "))
            .unwrap_or_default();
        Err(EngineError::new(
            crate::validation::INVALID_CODE,
            format!(
                "the warehouse changed while this build waited: {} statement(s) no longer pass its check; nothing was changed. {at}{}",
                sorted.len(),
                first.message
            ),
            "see what changed (stb plan shows every refused statement), fix it and build again",
        ))
    }
}

/// Runs `phases` in order under one target lock (a mixed build: the virtual phase, then
/// the direct one), owned by the first phase's invocation. A phase that does not succeed
/// stops the ones after it (`None`).
///
/// # Errors
/// An overlapping run, a stale lock or an interrupted wait; nothing ran.
pub fn execute_phases_locked(
    client: &Arc<Client>,
    phases: &[Phase<'_>],
    wait: &LockWait<'_>,
    recheck: &Recheck<'_>,
    interrupt: &AtomicBool,
) -> Result<Vec<Option<Result<Ran, EngineError>>>, EngineError> {
    let Some((first, _, owner)) = phases.first() else {
        return Ok(Vec::new());
    };
    let database = &first.workflow.database;
    let own: Vec<&str> = std::iter::once(owner.invocation_id.as_str())
        .chain(phases.iter().map(|(_, _, run)| run.invocation_id.as_str()))
        .collect();
    let lock = admission::acquire(client, database, &own, wait, interrupt)?;
    if phases.len() > 1 {
        // The lock carries the first phase's id only: `stb unlock` finds the other phases
        // of a killed build (their statements to kill, a restore point to give back) here.
        let (_, observer, _) = &phases[0];
        observer.event(
            PHASES_EVENT,
            None,
            serde_json::json!({"invocations": phases.iter().map(|(_, _, run)| run.invocation_id.as_str()).collect::<Vec<_>>()}),
        );
        if let Err(error) = observer.checkpoint() {
            let mut refused = EngineError::from(&error);
            if let Err(kept) = lock.release() {
                refused.hint = format!(
                    "{} (the target lock was not released: {kept}; run `stb unlock`)",
                    refused.hint
                );
            }
            return Err(refused);
        }
    }
    let mut ahead = match recheck.run(client, phases) {
        Ok(ahead) => ahead,
        Err(refused) => {
            if let Err(error) = lock.release() {
                return Err(EngineError {
                    hint: format!(
                        "{} (the target lock was not released: {error}; run `stb unlock`)",
                        refused.hint
                    ),
                    ..refused
                });
            }
            return Err(refused);
        }
    };
    let mut results = Vec::with_capacity(phases.len());
    let mut go_on = true;
    for (planned, observer, run) in phases {
        if !go_on {
            results.push(None);
            continue;
        }
        // The first phase's restore point was read with the recheck; the later ones read
        // theirs once the phases before them have run.
        let result = execute_held(client, planned, *observer, run, interrupt, ahead.take());
        go_on = matches!(&result, Ok(ran) if ran.execution.status == Status::Succeeded);
        results.push(Some(result));
    }
    // A suspended build keeps the lock: what it made is partly filled until it is
    // resumed (which takes the lock over) or given back (`stb unlock`).
    let suspended = results
        .iter()
        .flatten()
        .flatten()
        .any(|ran| ran.execution.suspended.is_some());
    if !suspended && let Err(error) = lock.release() {
        let warning = format!(
            "the target lock was not released ({error}); run `stb unlock` once this run has stopped"
        );
        for ran in results.iter_mut().flatten().flatten() {
            ran.warnings.push(warning.clone());
        }
    }
    Ok(results)
}

/// Records and runs one workflow while the caller holds the target lock.
fn execute_held(
    client: &Arc<Client>,
    planned: &Planned,
    observer: &dyn Observer,
    run: &RunIdentity,
    interrupt: &AtomicBool,
    ahead: Option<ReadAhead>,
) -> Result<Ran, EngineError> {
    let database = &planned.workflow.database;
    let statements = planned_statements(&planned.workflow);
    let workflow_id = workflow_sha256(&statements);
    let started = persist_statements(client, database, &run.invocation_id, &statements, 1)
        .map_err(|e| EngineError::from(&e))
        .and_then(|_| match &planned.deployment {
            Some(deployment) => open_deployment(client, database, deployment),
            None => Ok(()),
        });
    started?;
    if stb_plan::resume::not_resumable(&planned.workflow).is_none() {
        // Durable with the restore point: what a resume checks the project against.
        let models = stb_plan::work::ModelIndex::new(&planned.models);
        observer.event(
            resume::MODELS_EVENT,
            None,
            resume::models_payload(
                planned
                    .plan
                    .entries
                    .iter()
                    .filter_map(|entry| models.get(&entry.model)),
            ),
        );
    }
    let execution = execute(client, &planned.workflow, observer, interrupt, ahead);
    let mut warnings = Vec::new();
    if let Some(note) = adopted_gap(planned, &execution) {
        warnings.push(note);
    }
    Ok(Ran {
        workflow_id,
        execution,
        warnings,
    })
}

/// A direct build undone after it changed something: rows written into an adopted table
/// while its readers' views were gone reached that table but not the tables given back
/// (the undo does not replay). Says which models to rebuild to take them from history.
fn adopted_gap(planned: &Planned, execution: &stb_build::execute::Execution) -> Option<String> {
    let restored = execution.restored.as_ref()?;
    if restored.finished || restored.statements.is_empty() || planned.deployment.is_some() {
        return None;
    }
    let models = stb_plan::work::ModelIndex::new(&planned.models);
    let is_model = |name: &str| models.contains(name);
    let adopted: Vec<(&str, &str)> = planned
        .plan
        .replay_roots
        .iter()
        .filter(|root| !is_model(&root.driving_input))
        .filter(|root| {
            planned
                .plan
                .prerequisites
                .iter()
                .any(|p| p.name == root.driving_input && !p.framework_managed)
        })
        .map(|root| (root.model.as_str(), root.driving_input.as_str()))
        .collect();
    if adopted.is_empty() {
        return None;
    }
    let models: std::collections::BTreeSet<&str> =
        adopted.iter().map(|(model, _)| *model).collect();
    let sources: std::collections::BTreeSet<&str> =
        adopted.iter().map(|(_, source)| *source).collect();
    let join = |names: &std::collections::BTreeSet<&str>, by: &str| {
        names.iter().copied().collect::<Vec<_>>().join(by)
    };
    Some(format!(
        "rows written into adopted source(s) {} while this build had the views of {} down may be in the source but not in the tables given back (an undo does not replay); once the build's cause is fixed, `stb build --select {}` replays them from history",
        join(&sources, ", "),
        join(&models, ", "),
        join(&models, " --select ")
    ))
}

/// Before a deployment's workflow runs (under the lock): a complete deployment is never
/// built again (its copies may be published). (What it records is written by steps of its
/// workflow: see `staged::prepare_build`.)
fn open_deployment(
    client: &Client,
    database: &str,
    deployment: &crate::staged::Deployment,
) -> Result<(), EngineError> {
    // Checked again under the lock: another build may have completed it since the plan.
    crate::staged::refuse_complete(client, database, &deployment.id)
}

/// How a finished build ended, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// `succeeded`, `failed` or `cancelled`.
    pub outcome: &'static str,
    pub exit_code: i32,
    pub error_message: Option<String>,
    /// The error-severity build audits that failed.
    pub audit_failures: Vec<String>,
    /// What could not be recorded (the build's result stands).
    pub notes: Vec<String>,
}

/// What a build that ran leaves to record.
pub struct Finished<'a> {
    pub ran: &'a Ran,
    pub audits: &'a [AuditResult],
    /// The build's summary as its `--json` shows it, kept with the invocation.
    pub summary: &'a serde_json::Value,
}

/// Records how a build that ran ended: fingerprints (every entry on success, the models of
/// completed replay roots otherwise), the audits' node results, `run_completed` and the
/// invocation row.
pub fn record(
    client: &Client,
    planned: &Planned,
    recorder: &Recorder<'_>,
    observer: &BuildObserver,
    finished: &Finished<'_>,
) -> Ended {
    let by_name = stb_plan::work::ModelIndex::new(&planned.models);
    let built: Vec<&stb_plan::direct::PlanModel> = planned
        .plan
        .entries
        .iter()
        .filter_map(|entry| by_name.get(&entry.model))
        .collect();
    record_built(
        client,
        (&planned.workflow.database, planned.deployment.is_some()),
        &built,
        recorder,
        observer,
        finished,
    )
}

/// [`record`] for the models a run built (`built`), in `database`; a deployment's
/// (`is_deployment`) baseline is its object-state rows, not direct fingerprints.
pub fn record_built(
    client: &Client,
    (database, is_deployment): (&str, bool),
    built: &[&stb_plan::direct::PlanModel],
    recorder: &Recorder<'_>,
    observer: &BuildObserver,
    finished: &Finished<'_>,
) -> Ended {
    let Finished {
        ran,
        audits,
        summary,
    } = *finished;
    let (workflow_id, execution) = (ran.workflow_id.as_str(), &ran.execution);
    // A build that stopped was undone (or is suspended): the previous baseline stands. One
    // finished after its replays is complete.
    let complete = execution.status == Status::Succeeded
        || execution
            .restored
            .as_ref()
            .is_some_and(|r| r.finished && r.errors.is_empty());
    let fingerprinted: Vec<ModelDefinition<'_>> = built
        .iter()
        .filter(|_| complete)
        .map(|model| ModelDefinition {
            name: &model.name,
            query: &model.query,
            identity: model.identity(),
        })
        .collect();
    let mut notes = ran.warnings.clone();
    if !is_deployment
        && let Err(error) = write_fingerprints(client, database, workflow_id, &fingerprinted)
    {
        notes.push(format!("Direct SQL baseline was not recorded: {error}"));
    }
    let results: Vec<NodeResult<'_>> = audits.iter().map(AuditResult::node_result).collect();
    if let Err(error) = write_node_results(
        client,
        database,
        recorder.invocation_id(),
        &recorder.project.target,
        "build",
        &results,
    ) {
        notes.push(format!("audit results were not recorded: {error}"));
    }
    let audit_failures: Vec<String> = audits
        .iter()
        .filter(|a| a.is_error())
        .map(|a| a.name().to_owned())
        .collect();
    let audit_message = (!audit_failures.is_empty())
        .then(|| format!("build audits failed: {}", audit_failures.join(", ")));
    let (outcome, exit_code) = match execution.status {
        Status::Succeeded if audit_failures.is_empty() => ("succeeded", 0),
        Status::Succeeded | Status::Failed => ("failed", 1),
        Status::Cancelled => ("cancelled", EXIT_INTERRUPTED),
    };
    let error_message = execution.error_message.clone().or(audit_message);
    let materialized = if execution.status == Status::Succeeded {
        "applied"
    } else {
        "failed"
    };
    observer.completed(outcome, exit_code, error_message.as_deref());
    let summary_text = summary.to_string();
    if let Err(note) = recorder.finish(&Ending {
        outcome,
        exit_code,
        materialized: Some(materialized),
        workflow_id: Some(workflow_id),
        error: error_message.as_deref(),
        selected: built.len(),
        summary: &summary_text,
    }) {
        notes.push(note);
    }
    Ended {
        outcome,
        exit_code,
        error_message,
        audit_failures,
        notes,
    }
}
