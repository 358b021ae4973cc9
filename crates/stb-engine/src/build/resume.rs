//! `stb build --resume RUN`: finishes a build suspended inside a chunked replay (or killed
//! in one) from the chunk where it stopped, as a run of its own. Before anything runs it
//! checks, from the suspended run's records and the warehouse as it is now, that nothing
//! the rest of the build relies on changed: the models (the project compiled now against
//! the definitions the run recorded), the relations it made (their identities), the chunk
//! in flight (how the warehouse's query log says it ended) and the history the remaining
//! chunks read (retention). Otherwise it refuses, says why, and changes nothing; `stb
//! unlock` then gives the target back as the first run found it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_build::execute::{Execution, Observer as _, Status, planned_statements};
use stb_build::suspend::{RESUME_POINT_EVENT, RESUMED_EVENT, Resumption, chunk_state, identities};
use stb_build::undo::{
    REPLAYS_COMPLETE_EVENT, RESTORE_POINT_EVENT, RestorePoint, TARGET_RESTORED_EVENT,
    WORKFLOW_COMPLETED_EVENT,
};
use stb_compile::Compiled;
use stb_plan::direct::PlanModel;
use stb_plan::replay::{BoundaryMode, OFFSET, PARTITION};
use stb_plan::resume::{ResumePoint, check_retained, chunk_query_id, resume_at};
use stb_plan::workflow::Workflow;
use stb_project::Project;
use stb_warehouse::events::{HEARTBEAT_INTERVAL, append_event, last_event_age_ms};
use stb_warehouse::runs::EventRow;
use stb_warehouse::statements::{persist_statements, workflow_sha256};
use stb_warehouse::{Client, TargetLock, lock_holder};

use super::operation::Frontend;
use super::records::Recorder;
use super::{Ended, Finished, Ran, RunIdentity};
use crate::EngineError;
use crate::runs::Windows;

/// The run cannot be resumed (as it is, or any more): nothing was changed.
pub const REFUSED_CODE: &str = "STB-RESUME-001";
/// What the project or the warehouse holds now differs from what the run relied on.
pub const CHANGED_CODE: &str = "STB-RESUME-002";

/// The event that records, with the restore point of a resumable build, the definition of
/// every model it builds: a resume refuses once one differs in the project.
pub const MODELS_EVENT: &str = "resume_models";

/// The [`MODELS_EVENT`] payload of `models`: each one's SQL hash and identity.
#[must_use]
pub fn models_payload<'m>(models: impl Iterator<Item = &'m PlanModel>) -> serde_json::Value {
    let models: serde_json::Map<String, serde_json::Value> = models
        .map(|model| (model.name.clone(), definition(model)))
        .collect();
    serde_json::json!({ "models": models })
}

fn definition(model: &PlanModel) -> serde_json::Value {
    serde_json::json!({
        "sql": stb_plan::sql_change::sql_hash(&model.query),
        "identity": model.identity(),
    })
}

/// What to resume, and where.
pub struct Request<'a> {
    pub project: &'a Project,
    pub compiled: &'a Compiled,
    pub client: Arc<Client>,
    pub database: String,
    /// The resuming run.
    pub run: RunIdentity,
    /// The suspended (or killed) run.
    pub suspended: String,
    pub windows: Windows,
}

/// What was checked and where the resume goes on, before anything runs.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    pub resumed_from: String,
    pub step_id: String,
    pub model: String,
    /// The chunk the resume starts with (the first is 1), of how many.
    pub first_chunk: usize,
    pub chunks: usize,
    /// The chunk that was running when the run stopped, and what became of it
    /// (`finished`, `not_written`, `partly_written`; `recorded`: the run suspended itself
    /// and its own verdict stands).
    pub stopped_in_chunk: usize,
    pub stopped_chunk_state: &'static str,
}

/// How a resume ended.
pub struct Resumed {
    pub checked: Checked,
    pub ran: Ran,
    pub audits: Vec<crate::audits::AuditResult>,
    pub summary: serde_json::Value,
    pub ended: Ended,
}

/// A resume that did not get to run: nothing was changed.
fn refused(message: String, hint: &str) -> EngineError {
    EngineError::new(REFUSED_CODE, message, hint)
}

fn changed(message: String) -> EngineError {
    EngineError::new(
        CHANGED_CODE,
        format!("{message}; nothing was changed"),
        "`stb unlock` gives the target back as the suspended build found it; then build again",
    )
}

/// What the suspended run recorded that a resume needs.
struct Records {
    point: ResumePoint,
    workflow: Workflow,
    restore: RestorePoint,
    models: BTreeMap<String, serde_json::Value>,
    run_started: serde_json::Value,
    /// The highest chunk of the point's replay recorded complete by the run.
    completed: usize,
    /// The run's own verdict when it suspended itself (`replay_suspended`): the chunk it
    /// stopped in and the one to go on with, judged when the query log was fresh.
    verdict: Option<(usize, usize)>,
    ended: bool,
}

fn payload(event: &EventRow) -> serde_json::Value {
    serde_json::from_str(&event.payload).unwrap_or_default()
}

/// Reads the suspended run's records, refusing a run that cannot be resumed.
fn records(client: &Client, database: &str, run: &str) -> Result<Records, EngineError> {
    let events =
        stb_warehouse::runs::events_of(client, database, run).map_err(|e| EngineError::from(&e))?;
    if events.is_empty() {
        return Err(refused(
            format!("there is no run '{run}' in '{database}'"),
            "`stb runs list` shows the runs of this target",
        ));
    }
    let find = |kind: &str| events.iter().find(|e| e.kind == kind);
    if let Some(resumed) = find(RESUMED_EVENT) {
        let by = payload(resumed)["by"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        return Err(refused(
            format!("run '{run}' was resumed already, by run '{by}'"),
            "resume the latest run of the chain instead (`stb runs show` says how it ended)",
        ));
    }
    if find(TARGET_RESTORED_EVENT).is_some() {
        return Err(refused(
            format!("run '{run}' was given back already: the target is as it found it"),
            "build again",
        ));
    }
    if find(WORKFLOW_COMPLETED_EVENT).is_some() || find(REPLAYS_COMPLETE_EVENT).is_some() {
        return Err(refused(
            format!(
                "run '{run}' stopped after its replays, not in one: there is nothing to resume"
            ),
            "`stb unlock` finishes it (its landings are started and the previous copies dropped)",
        ));
    }
    let points: Vec<ResumePoint> = events
        .iter()
        .filter(|e| e.kind == RESUME_POINT_EVENT)
        .filter_map(|e| serde_json::from_str(&e.payload).ok())
        .collect();
    let workflow = points.iter().find_map(|p| p.workflow.clone());
    let (Some(point), Some(workflow)) = (points.last().cloned(), workflow) else {
        return Err(refused(
            format!(
                "run '{run}' recorded no resume point: it did not stop inside a chunked replay it could go on with"
            ),
            "only builds with `[build] replay_chunk_rows` that stop during a chunked replay can be resumed; `stb unlock` gives the target back",
        ));
    };
    let restore = find(RESTORE_POINT_EVENT)
        .and_then(|e| serde_json::from_str::<RestorePoint>(&e.payload).ok())
        .ok_or_else(|| {
            refused(
                format!("run '{run}' recorded no restore point"),
                "`stb unlock` gives the target back",
            )
        })?;
    // Without its models' definitions nothing says the project is still what it built.
    let models = find(MODELS_EVENT)
        .and_then(|e| payload(e)["models"].as_object().cloned())
        .ok_or_else(|| {
            refused(
                format!("run '{run}' recorded no definitions of the models it builds"),
                "`stb unlock` gives the target back",
            )
        })?
        .into_iter()
        .collect();
    let completed = events
        .iter()
        .filter(|e| {
            e.kind == stb_build::execute::CHUNK_COMPLETED_EVENT
                && e.step_id.as_deref() == Some(point.step_id.as_str())
        })
        .filter_map(|e| payload(e)["chunk"].as_u64())
        .filter_map(|n| usize::try_from(n).ok())
        .filter(|n| *n >= point.first_chunk)
        .max()
        .unwrap_or(point.first_chunk.saturating_sub(1));
    let verdict = events
        .iter()
        .rev()
        .find(|e| e.kind == stb_build::suspend::SUSPENDED_EVENT)
        .map(payload)
        .and_then(|at| {
            let number = |key: &str| at[key].as_u64().and_then(|n| usize::try_from(n).ok());
            Some((number("stoppedInChunk")?, number("nextChunk")?))
        });
    Ok(Records {
        verdict,
        run_started: find("run_started").map(payload).unwrap_or_default(),
        ended: find("run_completed").is_some(),
        point,
        workflow,
        restore,
        models,
        completed,
    })
}

/// The models the run built, as the project defines them now; a model whose definition
/// changed (or is gone) refuses the resume.
fn unchanged_models<'c>(
    compiled: &'c Compiled,
    recorded: &BTreeMap<String, serde_json::Value>,
) -> Result<Vec<&'c PlanModel>, EngineError> {
    let index = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    let mut built = Vec::new();
    let mut differ = Vec::new();
    for (name, was) in recorded {
        match index.get(name) {
            Some(model) if definition(model) == *was => built.push(model),
            Some(_) => differ.push(format!("'{name}' changed")),
            None => differ.push(format!("'{name}' is gone")),
        }
    }
    if differ.is_empty() {
        Ok(built)
    } else {
        Err(changed(format!(
            "the project differs from what the suspended build was building: {}",
            differ.join(", ")
        )))
    }
}

/// The driving input's earliest position now: per partition (offsets), or one.
fn earliest(
    client: &Client,
    mode: BoundaryMode,
    relation: &str,
) -> Result<BTreeMap<Option<i128>, String>, EngineError> {
    let sql = if mode == BoundaryMode::Offsets {
        format!(
            "SELECT toString({PARTITION}) AS p, toString(min({OFFSET})) AS lo FROM {relation} GROUP BY p"
        )
    } else {
        format!(
            "SELECT '' AS p, toString(min({})) AS lo FROM {relation} HAVING count() > 0",
            mode.scalar_column()
        )
    };
    let rows = client.query(&sql).map_err(|e| EngineError::from(&e))?;
    Ok((0..rows.data.len())
        .filter_map(|row| {
            let partition = rows.text(row, "p")?;
            let partition = if mode == BoundaryMode::Offsets {
                Some(partition.parse::<i128>().ok()?)
            } else {
                None
            };
            Some((partition, rows.text(row, "lo")?))
        })
        .collect())
}

/// Everything a resume checks before it takes the lock over: where it goes on.
fn check<'a>(
    request: &Request<'a>,
    records: &Records,
    waiting: &dyn Fn(),
) -> Result<(Checked, Vec<&'a PlanModel>, String), EngineError> {
    let (client, database, run) = (
        request.client.as_ref(),
        request.database.as_str(),
        request.suspended.as_str(),
    );
    if !records.ended {
        let silent = last_event_age_ms(client, database, run).map_err(|e| EngineError::from(&e))?;
        if silent.is_some_and(|ms| ms < request.windows.signal_ms) {
            return Err(refused(
                format!(
                    "run '{run}' is still running (it signalled {} s ago)",
                    silent.unwrap_or(0) / 1000
                ),
                "let it finish or stop it (`stb runs cancel`); a build that stops in a chunked replay can then be resumed",
            ));
        }
    }
    // The run holds the lock, or the first phase of its mixed build does.
    let holder = lock_holder(client, database).map_err(|e| EngineError::from(&e))?;
    let phases = match &holder {
        Some(holder) => crate::unlock::phases_of(client, database, holder)?,
        None => Vec::new(),
    };
    let Some(holder) = holder
        .clone()
        .filter(|_| phases.iter().any(|phase| phase == run))
    else {
        return Err(refused(
            format!(
                "run '{run}' does not hold the target lock of '{database}' (held by {}): what it built was given back or taken over",
                holder.map_or_else(|| "nobody".to_owned(), |h| format!("run '{h}'"))
            ),
            "`stb status` shows the target's state; build again",
        ));
    };
    let built = unchanged_models(request.compiled, &records.models)?;
    let point = &records.point;
    let workflow = &records.workflow;
    let root_index = match workflow.steps.get(point.step).map(|s| &s.action) {
        Some(stb_plan::workflow::Action::Replay(root)) if *root < workflow.roots.len() => *root,
        _ => {
            return Err(refused(
                format!("run '{run}''s resume point names no replay step"),
                "`stb unlock` gives the target back",
            ));
        }
    };
    let root = &workflow.roots[root_index];
    let now = identities(
        client,
        database,
        &point.relations.keys().cloned().collect::<Vec<_>>(),
    )
    .map_err(|message| EngineError::new(REFUSED_CODE, message, "try again"))?;
    let replaced: Vec<String> = point
        .relations
        .iter()
        .filter(|(name, uuid)| now.get(*name) != Some(*uuid))
        .map(|(name, _)| format!("'{name}'"))
        .collect();
    if !replaced.is_empty() {
        return Err(changed(format!(
            "relations the suspended build made were dropped or replaced since: {}",
            replaced.join(", ")
        )));
    }
    let (stopped, first, state) = match records.verdict {
        // Suspended by itself: its verdict stands (the query log may have lost the chunk
        // since).
        Some((stopped, next)) => (stopped, next, "recorded"),
        None => {
            let stopped = records.completed + 1;
            if stopped > point.chunks.len() {
                return Err(refused(
                    format!(
                        "run '{run}' finished every chunk of the replay of '{}' and stopped after it, where what it did is not on record",
                        point.model
                    ),
                    "`stb unlock` gives the target back",
                ));
            }
            let state = chunk_state(
                client,
                &chunk_query_id(&point.query_base, stopped),
                Some(waiting),
            )
            .map_err(|message| EngineError::new(REFUSED_CODE, message, "try again"))?;
            let first = resume_at(root, stopped, state).map_err(|why| {
                refused(
                    format!("run '{run}' cannot be resumed exactly: {why}"),
                    "`stb unlock` gives the target back as the build found it; then build again",
                )
            })?;
            let label = match state {
                stb_plan::resume::ChunkState::Finished => "finished",
                stb_plan::resume::ChunkState::NotWritten => "not_written",
                stb_plan::resume::ChunkState::Written(_) => "partly_written",
            };
            (stopped, first, label)
        }
    };
    if first <= point.chunks.len()
        && let Some(Some(capture)) = point.captures.get(root_index)
    {
        let mode = root.template.anchor.mode;
        let earliest = earliest(client, mode, root.template.anchor.read_from())?;
        check_retained(mode, capture, &point.chunks, first, &earliest).map_err(changed)?;
    }
    let checked = Checked {
        resumed_from: run.to_owned(),
        step_id: point.step_id.clone(),
        model: point.model.clone(),
        first_chunk: first,
        chunks: point.chunks.len(),
        stopped_in_chunk: stopped,
        stopped_chunk_state: state,
    };
    Ok((checked, built, holder))
}

/// Resumes run `request.suspended`: checks it can go on exactly, takes over its target
/// lock, records a run of its own (`resumedFrom`), runs the rest of its workflow, and
/// records how it ended. A resume that stops again is suspended again or given back, as a
/// build is.
///
/// # Errors
/// It could not be resumed (the records, a change, the lock): nothing was changed.
pub fn resume(
    request: &Request<'_>,
    frontend: &dyn Frontend,
    cancel: &Arc<AtomicBool>,
) -> Result<Resumed, EngineError> {
    let client = &request.client;
    let database = &request.database;
    let records = records(client, database, &request.suspended)?;
    let warn = frontend.warning_hook();
    let waiting = || {
        warn(&format!(
            "the chunk run {} was in is still running in the warehouse (its process stopped; the warehouse finishes what it was sent): waiting for it to end",
            request.suspended
        ));
    };
    let (checked, built, holder) = check(request, &records, &waiting)?;
    let lock = TargetLock::take_over(client, database, &holder, &request.run.invocation_id)
        .map_err(|e| EngineError::from(&e))?;
    let (sink, observer) =
        super::operation::observer_of((client, database), frontend, &request.run);
    let mut started = records.run_started.clone();
    started["displayCommand"] = request
        .run
        .display_command
        .clone()
        .map_or(serde_json::Value::Null, Into::into);
    started["owner"] = request.run.owner.clone().into();
    started["resumedFrom"] = request.suspended.clone().into();
    started["resume"] = serde_json::to_value(&checked).unwrap_or_default();
    observer.event("run_started", None, started);
    let heartbeat = sink.heartbeat(HEARTBEAT_INTERVAL);
    let workflow = &records.workflow;
    let statements = planned_statements(workflow);
    let workflow_id = workflow_sha256(&statements);
    // This run's own records first (the first run's restore point, its statements): until
    // they are durable the suspended run stays as it was, and keeps the lock.
    // This run's own records first (the models it builds, the first run's restore point,
    // its statements): until they are durable the suspended run stays as it was, and
    // gets the lock back on a failure.
    observer.event(
        MODELS_EVENT,
        None,
        serde_json::json!({ "models": records.models }),
    );
    let prepared =
        stb_build::execute::record_resumed_point(&observer, &records.restore).and_then(|()| {
            persist_statements(client, database, &request.run.invocation_id, &statements, 1)
                .map(|_| ())
                .map_err(|error| error.to_string())
        });
    if let Err(message) = prepared {
        let handed_back =
            TargetLock::take_over(client, database, &request.run.invocation_id, &holder);
        let message = format!(
            "run '{}' could not be resumed: {message}; nothing was changed{}",
            request.suspended,
            if handed_back.is_ok() {
                ""
            } else {
                " (the target lock could not be handed back: `stb unlock` gives the target back)"
            }
        );
        drop(heartbeat);
        observer.completed("failed", 1, Some(&message));
        return Err(EngineError::new(
            REFUSED_CODE,
            message,
            "try again once the warehouse takes writes",
        ));
    }
    // This run holds the lock and can be given back on its own: the suspended run's marks
    // are for its readers (not resumed twice, ended when it was killed); one that cannot
    // be written is a warning.
    if let Err(message) = close_suspended(request, &records, &checked) {
        warn(&format!(
            "run '{}' could not be marked resumed ({message}); this run holds the target lock and goes on",
            request.suspended
        ));
    }
    frontend.executing(cancel);
    let watch = super::watch::watch_cancellation(
        Arc::clone(client),
        database,
        &request.run.invocation_id,
        Arc::clone(cancel),
    );
    let execution = stb_build::execute::resume(
        client,
        workflow,
        &observer,
        cancel,
        Resumption {
            point: records.restore.clone(),
            step: records.point.step,
            chunks: records.point.chunks.clone(),
            first_chunk: checked.first_chunk,
            captures: records.point.captures.clone(),
        },
    );
    drop(watch);
    drop(heartbeat);
    let mut warnings = Vec::new();
    if execution.suspended.is_none()
        && let Err(error) = lock.release()
    {
        warnings.push(format!(
            "the target lock was not released ({error}); run `stb unlock` once this run has stopped"
        ));
    }
    let ran = Ran {
        workflow_id,
        execution,
        warnings,
    };
    let is_deployment = records.run_started["deploymentId"].is_string();
    let audits = if ran.execution.status == Status::Succeeded && !is_deployment {
        let names: Vec<&str> = built.iter().map(|m| m.name.as_str()).collect();
        crate::audits::after_build(client, database, request.compiled, &names)
    } else {
        Vec::new()
    };
    let summary = summary(
        &checked,
        &request.run.invocation_id,
        &ran.execution,
        &audits,
    );
    let recorder = Recorder {
        client: Arc::clone(client),
        database: database.clone(),
        project: request.project,
        run: &request.run,
        deployment: std::sync::OnceLock::new(),
    };
    if let Some(deployment) = records.run_started["deploymentId"].as_str() {
        let _ = recorder.deployment.set(deployment.to_owned());
    }
    let ended = super::record_built(
        client,
        (database, is_deployment),
        &built,
        &recorder,
        &observer,
        &Finished {
            ran: &ran,
            audits: &audits,
            summary: &summary,
        },
    );
    Ok(Resumed {
        checked,
        ran,
        audits,
        summary,
        ended,
    })
}

/// Marks the suspended run resumed by this one (and, when its process was killed, ended):
/// it is not resumed twice, nor given back under this run.
fn close_suspended(
    request: &Request<'_>,
    records: &Records,
    checked: &Checked,
) -> Result<(), String> {
    let (client, database, run) = (
        request.client.as_ref(),
        request.database.as_str(),
        request.suspended.as_str(),
    );
    append_event(
        client,
        database,
        run,
        RESUMED_EVENT,
        &serde_json::json!({"by": request.run.invocation_id}),
    )
    .map_err(|error| error.to_string())?;
    if records.ended {
        return Ok(());
    }
    append_event(
        client,
        database,
        run,
        "run_completed",
        &serde_json::json!({
            "outcome": "failed",
            "exitCode": 1,
            "errorMessage": format!(
                "its process stopped in chunk {} of {} of the replay of '{}'; resumed by run {}",
                checked.stopped_in_chunk, checked.chunks, checked.model, request.run.invocation_id
            ),
        }),
    )
    .map_err(|error| error.to_string())
}

/// The resume's `--json` summary.
#[must_use]
pub fn summary(
    checked: &Checked,
    invocation: &str,
    execution: &Execution,
    audits: &[crate::audits::AuditResult],
) -> serde_json::Value {
    let status = match execution.status {
        Status::Succeeded if audits.iter().any(crate::audits::AuditResult::is_error) => "failed",
        Status::Succeeded => "succeeded",
        Status::Failed => "failed",
        Status::Cancelled => "cancelled",
    };
    serde_json::json!({
        "status": status,
        "invocation_id": invocation,
        "resumedFrom": checked.resumed_from,
        "resume": checked,
        "completed_steps": execution.completed_steps,
        "failed_step": execution.failed_step,
        "error_message": execution.error_message,
        "replays": execution.replays.iter().map(|(model, rows)| serde_json::json!({"model": model, "written_rows": rows})).collect::<Vec<_>>(),
        "suspended": execution.suspended,
        "restored": execution.restored,
        "warnings": execution.warnings,
        "audits": audits.iter().map(|a| serde_json::json!({"name": a.name(), "passed": !a.is_error()})).collect::<Vec<_>>(),
    })
}
