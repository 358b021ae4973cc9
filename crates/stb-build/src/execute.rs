//! Runs a workflow: one statement at a time on one connection, each under its own query
//! id, stopping at the first failure or interruption.
//!
//! A statement runs on a worker thread so an interrupt is noticed while it is in flight:
//! the run stops waiting, asks the warehouse to kill the query by its id (the reference
//! only abandons the request), and reports the run cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use stb_plan::replay::{Capture, OffsetRun, parse_capture, predicate};
use stb_plan::workflow::{Action, Phase, Step, Workflow};
use stb_warehouse::statements::PlannedStatement;
use stb_warehouse::{Client, WarehouseError};

pub use crate::chunked::CHUNK_COMPLETED_EVENT;
use crate::replay_watch::ReplayWatch;
use crate::secrets::{inline_secrets, resolve_secrets, scrub};
pub use crate::suspend::{Resumption, Suspended};
use crate::undo::{
    REPLAYS_COMPLETE_EVENT, RESTORE_POINT_DURABLE_EVENT, RESTORE_POINT_EVENT, ReadAhead,
    RestorePoint, TARGET_RESTORED_EVENT, WORKFLOW_COMPLETED_EVENT,
};

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Succeeded,
    Failed,
    Cancelled,
}

/// What one statement did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatementOutcome {
    pub step_id: String,
    pub error_message: Option<String>,
    pub written_rows: Option<u64>,
    pub returned_rows: Option<u64>,
    pub elapsed_ms: u64,
}

/// How a stopped run gave the target back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Restored {
    /// True when every replay had completed and the build was finished instead of undone.
    pub finished: bool,
    /// The statements it ran, by step id.
    pub statements: Vec<String>,
    /// Those that failed, with the warehouse's message.
    pub errors: Vec<String>,
}

/// Runs of offsets a record or an event lists at most.
pub const RECORDED_RANGES: usize = 1_000;

/// A run of positions a replay covers: `{partition, lower, upper}`, inclusive. Offsets
/// give one per run of present offsets in a partition (numbers); the scalar modes one
/// with `partition: null`, a timestamp as ClickHouse prints it (`2026-07-28
/// 00:00:02.000`), a cursor as its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CoveredRange {
    pub partition: Option<i128>,
    pub lower: serde_json::Value,
    pub upper: serde_json::Value,
}

impl CoveredRange {
    fn of_offsets(run: &OffsetRun) -> Self {
        let number = |n: i128| serde_json::to_value(n).unwrap_or(serde_json::Value::Null);
        Self {
            partition: Some(run.partition),
            lower: number(run.lower),
            upper: number(run.upper),
        }
    }

    /// The first and last replayed values of a scalar capture; a cursor that is a number
    /// is written as one.
    fn of_scalar(mode: stb_plan::replay::BoundaryMode, first: &str, last: &str) -> Self {
        let value = |text: &str| match (mode, text.parse::<i128>()) {
            (stb_plan::replay::BoundaryMode::Cursor, Ok(number)) => {
                serde_json::to_value(number).unwrap_or_else(|_| text.into())
            }
            _ => serde_json::Value::String(text.to_owned()),
        };
        Self {
            partition: None,
            lower: value(first),
            upper: value(last),
        }
    }
}

/// A captured replay boundary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CapturedRoot {
    pub model: String,
    pub driving_input: String,
    pub boundary_mode: &'static str,
    pub captured_at: Option<String>,
    /// Offsets: the runs of present offsets per partition, the first [`RECORDED_RANGES`]
    /// of them (sparse offsets can make millions; `coverage` bounds every partition).
    /// Timestamp and cursor modes: one range with no partition, from the first to the last
    /// replayed value (none when nothing is replayed).
    pub ranges: Vec<CoveredRange>,
    /// How many runs the capture found.
    pub ranges_total: usize,
    /// Scalar modes: the inclusive cutoff (`None`: nothing to replay).
    pub cutoff: Option<String>,
    pub lower: Option<String>,
    /// The predicate the replay bounds its input with.
    pub predicate: String,
    /// What the replay covers, in every mode (per partition for offsets).
    pub coverage: Vec<stb_plan::replay::Coverage>,
}

/// Everything a run did, for records, artifacts and output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Execution {
    pub status: Status,
    pub completed_steps: Vec<String>,
    pub failed_step: Option<String>,
    pub error_message: Option<String>,
    pub statement_outcomes: Vec<StatementOutcome>,
    pub captured_roots: Vec<CapturedRoot>,
    /// Models whose replay finished, with the rows the warehouse says it wrote.
    pub replays: Vec<(String, Option<u64>)>,
    /// Seeded copies whose seed finished, with the rows it copied from the active copy.
    pub seeds: Vec<(String, Option<u64>)>,
    /// Things the operator should know about a run that otherwise went as planned.
    pub warnings: Vec<String>,
    /// A run that stopped: how the target was given back.
    pub restored: Option<Restored>,
    /// A run that stopped inside a chunked replay and kept what it made, to be resumed
    /// (`stb build --resume`): where it stopped.
    pub suspended: Option<Suspended>,
    /// The statements as recorded (secrets redacted), replays rendered once known.
    #[serde(skip)]
    pub statements: Vec<PlannedStatement>,
}

impl Execution {
    /// A run about to start, with nothing done yet: `statements` as recorded.
    #[must_use]
    pub fn starting(statements: Vec<PlannedStatement>) -> Self {
        Self {
            status: Status::Succeeded,
            completed_steps: Vec::new(),
            failed_step: None,
            error_message: None,
            statement_outcomes: Vec::new(),
            captured_roots: Vec::new(),
            replays: Vec::new(),
            seeds: Vec::new(),
            warnings: Vec::new(),
            restored: None,
            suspended: None,
            statements,
        }
    }
}

/// Where the run reports as it goes; the build command writes run events and re-records
/// the statement list when a replay is rendered.
pub trait Observer {
    fn event(&self, kind: &str, step: Option<&Step>, payload: serde_json::Value);
    /// Makes every event so far durable before the run goes on: what an undo needs must
    /// be on record before the first change, whatever happens to this process then.
    ///
    /// # Errors
    /// The events could not be written; the run stops before it changes anything more.
    fn checkpoint(&self) -> Result<(), WarehouseError>;
    /// The statement list changed (a replay was rendered): record it as `revision`.
    ///
    /// # Errors
    /// The records could not be written; the run stops before the statement runs.
    fn statements_changed(
        &self,
        statements: &[PlannedStatement],
        revision: u64,
    ) -> Result<(), WarehouseError>;
    /// The run's id, when it has one on record: what a suspended run's message tells the
    /// operator to resume.
    fn run_id(&self) -> Option<&str> {
        None
    }
}

/// The statements of `workflow` as recorded before the run starts.
#[must_use]
pub fn planned_statements(workflow: &Workflow) -> Vec<PlannedStatement> {
    workflow
        .steps
        .iter()
        .map(|step| PlannedStatement {
            step_id: step.id.clone(),
            phase: step.phase.as_str().to_owned(),
            intent: step.intent().to_owned(),
            sql: workflow.recorded_sql(step).into_owned(),
        })
        .collect()
}

/// The insert recording what `capture` found for `watermark`'s root: the planner says what
/// is recorded, the records' owner writes the statement.
fn boundary_insert(
    database: &str,
    watermark: &stb_plan::watermark::Watermark,
    capture: &Capture,
) -> String {
    use stb_warehouse::deployments::boundaries::{Boundary, BoundaryRow, Relation, insert};
    fn relation(named: &stb_plan::watermark::Named) -> Relation<'_> {
        Relation {
            database: named.database.as_deref(),
            name: named.name.as_str(),
        }
    }
    let rows = watermark
        .rows(capture)
        .into_iter()
        .map(|(partition, lower, cutoff)| BoundaryRow {
            partition,
            lower,
            cutoff,
        })
        .collect();
    insert(
        database,
        &Boundary {
            deployment_id: &watermark.deployment_id,
            root_table: relation(&watermark.root_table),
            anchor: relation(&watermark.anchor),
            boundary_kind: watermark.mode.as_str(),
            value_kind: watermark.value_kind(),
            rows,
            captured_at: capture.captured_at(),
        },
    )
}

/// A replay, seed or watermark statement, rendered from its root's capture.
fn runtime_statement(
    workflow: &Workflow,
    action: &Action,
    captures: &[Option<Capture>],
) -> Result<String, String> {
    let root = match action {
        Action::Watermark(index) => {
            let watermark = &workflow.watermarks[*index];
            return captures[watermark.root]
                .as_ref()
                .map(|capture| boundary_insert(&workflow.database, watermark, capture))
                .ok_or_else(|| "the boundary this step records was not captured".into());
        }
        Action::Replay(root) | Action::Seed(root) => *root,
        _ => return Err("this step is not rendered at runtime".into()),
    };
    let replay = &workflow.roots[root];
    let capture = captures[root].as_ref();
    match action {
        Action::Seed(_) => match (&replay.seed, capture) {
            (Some(seed), Some(capture)) => Ok(seed.render(capture)),
            _ => Err("the seed's replay boundary was not captured".into()),
        },
        _ if !replay.bounded => {
            // Its input was rebuilt from paused landings and nothing else feeds it.
            Ok(replay.template.render("1"))
        }
        _ => capture
            .map(|capture| {
                let bound = predicate(
                    replay.template.anchor.mode,
                    capture,
                    replay.start_time.as_ref(),
                );
                replay.template.render(&bound)
            })
            .ok_or_else(|| "the replay boundary was not captured".into()),
    }
}

/// Puts a statement rendered at runtime (a replay, a seed) in the statement list and
/// records the list again, as the next revision.
fn record_rendered(
    observer: &dyn Observer,
    execution: &mut Execution,
    index: usize,
    rendered: &str,
    revision: &mut u64,
) -> Result<(), String> {
    execution.statements[index].sql = rendered.to_owned();
    *revision += 1;
    observer
        .statements_changed(&execution.statements, *revision)
        .map_err(|error| error.to_string())
}

pub(crate) enum Answer {
    Written(Option<u64>),
    Rows(stb_warehouse::Rows),
}

pub(crate) enum Interrupted {
    Failed(String),
    Cancelled,
}

/// Runs `workflow` to the end, or to the first failure or interrupt.
pub fn run(
    client: &Arc<Client>,
    workflow: &Workflow,
    observer: &dyn Observer,
    interrupt: &AtomicBool,
) -> Execution {
    run_from(client, workflow, observer, interrupt, None)
}

/// [`run`], recording the restore point `ahead` when the caller read it (under the
/// target lock, before anything changed) instead of reading it again.
pub fn run_from(
    client: &Arc<Client>,
    workflow: &Workflow,
    observer: &dyn Observer,
    interrupt: &AtomicBool,
    ahead: Option<ReadAhead>,
) -> Execution {
    run_steps(client, workflow, observer, interrupt, Start::Fresh(ahead))
}

/// Finishes the workflow of a suspended build from where it stopped
/// ([`Resumption`]): the steps before its chunked replay are not run again, and the replay
/// goes on from its first chunk to run. The caller has recorded the suspended run's
/// restore point as this run's ([`record_resumed_point`]) before the suspended run was
/// marked resumed: a resume that fails gives the target back as the first run found it.
pub fn resume(
    client: &Arc<Client>,
    workflow: &Workflow,
    observer: &dyn Observer,
    interrupt: &AtomicBool,
    resumption: Resumption,
) -> Execution {
    run_steps(
        client,
        workflow,
        observer,
        interrupt,
        Start::Resumed(resumption),
    )
}

/// Records `point` (a suspended run's restore point) as this run's, and waits until it is
/// durable.
///
/// # Errors
/// It could not be recorded.
pub fn record_resumed_point(observer: &dyn Observer, point: &RestorePoint) -> Result<(), String> {
    observer.event(
        RESTORE_POINT_EVENT,
        None,
        serde_json::to_value(point).unwrap_or_default(),
    );
    observer
        .checkpoint()
        .map_err(|e| format!("the restore point could not be recorded: {e}"))
}

/// Where a run starts: afresh (with the restore point read ahead, if it was), or
/// resuming a suspended run whose restore point is on record already.
enum Start {
    Fresh(Option<ReadAhead>),
    Resumed(Resumption),
}

fn run_steps(
    client: &Arc<Client>,
    workflow: &Workflow,
    observer: &dyn Observer,
    interrupt: &AtomicBool,
    start: Start,
) -> Execution {
    let (ahead, resumption) = match start {
        Start::Fresh(ahead) => (ahead, None),
        Start::Resumed(resumed) => (None, Some(resumed)),
    };
    let mut execution = Execution::starting(planned_statements(workflow));
    if let Some(cluster) = &workflow.cluster {
        // Shown by `stb plan`, never run: the executor has one connection and no per-shard
        // captures; the engine refuses such builds first, this is the last guard.
        execution.status = Status::Failed;
        execution.error_message = Some(format!(
            "this workflow runs on the cluster '{}', which stb cannot build on yet; none of its statements was run",
            cluster.target.cluster.name
        ));
        return execution;
    }
    let mut captures: Vec<Option<Capture>> = match &resumption {
        Some(resumed) => resumed.captures.clone(),
        None => vec![None; workflow.roots.len()],
    };
    captures.resize(workflow.roots.len(), None);
    let mut revision = 1;
    let mut suspension = crate::suspend::Suspension::new(workflow);
    // Before the first change: what the target holds, durably on record, so a build that
    // stops here or anywhere later (a kill included) can be given back.
    let recorded = match &resumption {
        Some(resumed) => Ok(resumed.point.clone()),
        None => record_restore_point(client, workflow, observer, ahead),
    };
    let point = match recorded {
        Ok(point) => point,
        Err(message) => {
            execution.status = Status::Failed;
            execution.failed_step = Some(
                workflow
                    .steps
                    .first()
                    .map_or_else(String::new, |s| s.id.clone()),
            );
            execution.error_message = Some(format!("{message}; nothing was changed"));
            return execution;
        }
    };
    let mut replays_complete = false;
    for (index, step) in workflow.steps.iter().enumerate() {
        let resumed_here = match &resumption {
            Some(resumed) if index < resumed.step => continue,
            Some(resumed) if index == resumed.step => Some(resumed),
            _ => None,
        };
        if !replays_complete && matches!(step.phase, Phase::Activation | Phase::Cleanup) {
            observer.event(REPLAYS_COMPLETE_EVENT, None, serde_json::json!({}));
            if let Err(error) = observer.checkpoint() {
                execution.status = Status::Failed;
                execution.failed_step = Some(step.id.clone());
                execution.error_message = Some(format!(
                    "the run's records could not be written before activation: {error}"
                ));
                break;
            }
            replays_complete = true;
        }
        if interrupt.load(Ordering::SeqCst) {
            execution.status = Status::Cancelled;
            execution.failed_step = Some(step.id.clone());
            execution.error_message = Some("interrupted before this step".into());
            break;
        }
        let mut chunks: Option<(usize, Vec<stb_plan::replay::chunks::Chunk>)> = None;
        let sql = match &step.action {
            Action::Statement(sql) => sql.clone(),
            Action::Capture(root) => workflow.roots[*root].capture_sql.clone(),
            Action::SettleInserts => stb_plan::workflow::RUNNING_INSERTS_SQL.to_owned(),
            Action::ResetConsumerGroup(_) => workflow.recorded_sql(step).into_owned(),
            Action::Replay(_) | Action::Seed(_) | Action::Watermark(_) => {
                let rendered =
                    runtime_statement(workflow, &step.action, &captures).and_then(|sql| {
                        // A chunked replay records every chunk's statement.
                        let cut = match (&step.action, &captures[..], resumed_here) {
                            // Resumed: the chunks as cut when the replay began.
                            (Action::Replay(root), _, Some(resumed)) => {
                                Some((*root, resumed.chunks.clone()))
                            }
                            (Action::Replay(root), captured, None) => match &captured[*root] {
                                Some(capture) => {
                                    crate::chunked::plan(client, &workflow.roots[*root], capture)?
                                        .map(|pieces| (*root, pieces))
                                }
                                None => None,
                            },
                            _ => None,
                        };
                        let recorded = cut.as_ref().map_or_else(
                            || sql.clone(),
                            |(root, pieces)| {
                                crate::chunked::recorded(&workflow.roots[*root], pieces)
                            },
                        );
                        record_rendered(observer, &mut execution, index, &recorded, &mut revision)
                            .map(|()| (sql, cut))
                    });
                match rendered {
                    Ok((sql, cut)) => {
                        chunks = cut;
                        sql
                    }
                    Err(message) => {
                        execution.status = Status::Failed;
                        execution.failed_step = Some(step.id.clone());
                        execution.error_message = Some(message);
                        break;
                    }
                }
            }
        };
        let query_id = uuid::Uuid::new_v4().to_string();
        let sequence = index + 1;
        let first_chunk = resumed_here.map_or(1, |resumed| resumed.first_chunk);
        if let Some((root, pieces)) = &chunks {
            // Durable before the first chunk runs: what a resume needs, without this
            // process.
            if let Err(message) = suspension.record_point(
                (client, workflow, observer),
                (index, step),
                (*root, pieces, first_chunk),
                &query_id,
                &captures,
            ) {
                execution.status = Status::Failed;
                execution.failed_step = Some(step.id.clone());
                execution.error_message = Some(message);
                break;
            }
        }
        let first_query_id = stb_plan::resume::chunk_query_id(&query_id, first_chunk);
        let mut started_payload = statement_started(
            workflow,
            step,
            sequence,
            &first_query_id,
            captures.as_slice(),
        );
        if let Some((_, pieces)) = &chunks {
            crate::chunked::mark(&mut started_payload, (first_chunk, pieces.len()));
        }
        observer.event("statement_started", Some(step), started_payload);
        let started = Instant::now();
        let is_read = matches!(step.action, Action::Capture(_) | Action::SettleInserts);
        let mut secrets = step
            .recorded
            .as_deref()
            .map(|recorded| inline_secrets(&sql, recorded))
            .unwrap_or_default();
        let mut result = if let Action::ResetConsumerGroup(fresh) = step.action {
            execution
                .warnings
                .extend(reset_fresh_group(&workflow.fresh_groups[fresh]));
            Ok(Answer::Written(None))
        } else {
            let watch = ReplayWatch::of(client, workflow, step, &captures);
            // A chunk's progress also says which chunk of how many; a replay's share
            // written and its ETA are over its whole window.
            let report = |id: &str, now: Progress, chunk: Option<crate::chunked::Place>| {
                let mut payload = serde_json::json!({
                    "statementSequence": sequence,
                    "displayName": step.id,
                    "queryId": id,
                    "readRows": now.read_rows,
                    "totalRowsApprox": now.total_rows_approx,
                    "writtenRows": now.written_rows,
                    "elapsedMs": now.elapsed_ms,
                    "percent": now.percent(),
                });
                if let Some(place) = chunk {
                    crate::chunked::mark(&mut payload, place);
                }
                if let Some(done) = watch.as_ref().and_then(ReplayWatch::reading) {
                    let count = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
                    payload["replayOffsetsDone"] = count(done.done).into();
                    payload["replayOffsetsTotal"] = count(done.total).into();
                    payload["replayPercent"] = done.percent().into();
                    payload["etaMs"] = done.eta_ms(now.elapsed_ms).into();
                }
                observer.event("statement_progress", Some(step), payload);
            };
            let answer = match &chunks {
                Some((root, pieces)) => crate::chunked::run(
                    client,
                    &workflow.roots[*root],
                    (pieces, first_chunk),
                    interrupt,
                    &crate::chunked::Reporting {
                        query_base: &query_id,
                        at: &suspension.chunk_in_flight,
                        started: &|id, place| {
                            let mut payload = statement_started(
                                workflow,
                                step,
                                sequence,
                                id,
                                captures.as_slice(),
                            );
                            crate::chunked::mark(&mut payload, place);
                            observer.event("statement_started", Some(step), payload);
                        },
                        progress: &|id, now, place| report(id, now, Some(place)),
                        completed: &|payload| {
                            observer.event(
                                crate::chunked::CHUNK_COMPLETED_EVENT,
                                Some(step),
                                payload,
                            );
                            observer.checkpoint().map_err(|error| error.to_string())
                        },
                    },
                ),
                None => resolve_secrets(&sql)
                    .map_err(Interrupted::Failed)
                    .and_then(|resolved| {
                        secrets.extend(resolved.secrets);
                        run_one(
                            client,
                            resolved.sql,
                            &query_id,
                            is_read,
                            interrupt,
                            &|now: Progress| report(&query_id, now, None),
                        )
                    }),
            };
            answer.map_err(|stopped| match stopped {
                // The warehouse may quote the statement back: keep its secrets out.
                Interrupted::Failed(message) => Interrupted::Failed(scrub(&message, &secrets)),
                Interrupted::Cancelled => Interrupted::Cancelled,
            })
        };
        if let (Action::SettleInserts, Ok(Answer::Rows(running))) = (&step.action, &result) {
            result = settle(client, running, interrupt).map(|late| {
                if let Some(warning) = late {
                    execution.warnings.push(warning);
                }
                Answer::Written(None)
            });
        }
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut outcome = StatementOutcome {
            step_id: step.id.clone(),
            error_message: None,
            written_rows: None,
            returned_rows: None,
            elapsed_ms,
        };
        let mut stop = None;
        match result {
            Ok(Answer::Written(rows)) => outcome.written_rows = rows,
            Ok(Answer::Rows(rows)) => {
                outcome.returned_rows = Some(rows.data.len() as u64);
                if let Action::Capture(root) = step.action {
                    match read_capture(workflow, root, &rows) {
                        Ok((capture, record)) => {
                            captures[root] = Some(capture);
                            execution.captured_roots.push(record);
                        }
                        Err(message) => stop = Some(Interrupted::Failed(message)),
                    }
                }
            }
            Err(interrupted) => stop = Some(interrupted),
        }
        if let Some(Interrupted::Failed(message)) = &stop {
            outcome.error_message = Some(message.clone());
        }
        observer.event(
            "statement_completed",
            Some(step),
            serde_json::json!({
                "statementSequence": sequence,
                "intent": step.intent(),
                "elapsedMs": elapsed_ms,
                "writtenRows": outcome.written_rows,
                "errorMessage": outcome.error_message,
                "displayName": step.id,
            }),
        );
        execution.statement_outcomes.push(outcome);
        match stop {
            None => {
                let written = execution
                    .statement_outcomes
                    .last()
                    .and_then(|o| o.written_rows);
                match step.action {
                    Action::Replay(root) => execution
                        .replays
                        .push((workflow.roots[root].model.clone(), written)),
                    Action::Seed(root) => execution
                        .seeds
                        .push((workflow.roots[root].model.clone(), written)),
                    _ => {}
                }
                execution.completed_steps.push(step.id.clone());
            }
            Some(Interrupted::Failed(message)) if step.phase == Phase::Cleanup => {
                // The build is complete; only an old copy is left behind.
                execution.warnings.push(format!(
                    "step {} failed ({message}): the previous copy it drops is left; `stb unlock` or a rerun of it drops it",
                    step.id
                ));
            }
            Some(Interrupted::Failed(message)) => {
                execution.status = Status::Failed;
                execution.failed_step = Some(step.id.clone());
                execution.error_message = Some(message);
                break;
            }
            Some(Interrupted::Cancelled) => {
                execution.status = Status::Cancelled;
                execution.failed_step = Some(step.id.clone());
                execution.error_message = Some("interrupted while this step ran".into());
                break;
            }
        }
    }
    if execution.status == Status::Succeeded {
        observer.event(WORKFLOW_COMPLETED_EVENT, None, serde_json::json!({}));
        if let Err(error) = observer.checkpoint() {
            // Only `stb unlock` after a kill reads it; a live run ends on record anyway.
            execution.warnings.push(format!(
                "the workflow's completion could not be recorded yet ({error}); it is written with the run's end"
            ));
        }
    } else if crate::undo::is_complete(client, &point) == Ok(true) {
        // Its last statement reported an error, yet what it makes is complete on record
        // (a deployment's header written before the answer was lost): keep it.
        execution.warnings.push(format!(
            "step {} reported an error ({}), but what the build makes is complete on record: nothing was given back",
            execution.failed_step.take().unwrap_or_default(),
            execution.error_message.take().unwrap_or_default()
        ));
        execution.status = Status::Succeeded;
    } else if replays_complete {
        // Every replay completed: the new relations are whole, so the build is finished
        // (landings started, old copies dropped) rather than undone.
        recover_landings(client, workflow, observer, &mut execution);
        give_back(client, &point, true, observer, &mut execution);
    } else if let Some(suspended) = suspension.suspend(client, workflow, observer, &mut execution) {
        // Stopped inside a chunked replay that can go on exactly: what it made is kept,
        // with the target lock, for `stb build --resume`.
        execution.suspended = Some(suspended);
    } else {
        give_back(client, &point, false, observer, &mut execution);
        recover_landings(client, workflow, observer, &mut execution);
    }
    execution
}

/// Reads (unless the caller read it `ahead`) and records the restore point, and waits
/// until it is durable.
fn record_restore_point(
    client: &Client,
    workflow: &Workflow,
    observer: &dyn Observer,
    ahead: Option<ReadAhead>,
) -> Result<RestorePoint, String> {
    let started = Instant::now();
    let read_ahead = ahead.is_some();
    // A read ahead that failed (the request, or an earlier build's aside) is tried again
    // here: the recheck may have passed without it.
    let point = match ahead.map(|ahead| ahead.point) {
        Some(Ok(point)) => point,
        Some(Err(_)) | None => RestorePoint::read(client, workflow)?,
    };
    let mut payload = serde_json::to_value(&point).unwrap_or_default();
    // A point read ahead cost its share of the recheck's request, counted there.
    payload["readMs"] = u64::try_from(started.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .into();
    payload["readAhead"] = read_ahead.into();
    observer.event(RESTORE_POINT_EVENT, None, payload);
    observer
        .checkpoint()
        .map_err(|e| format!("the restore point could not be recorded: {e}"))?;
    // What keeping the target restorable cost before the first change: the read (when
    // not ahead) and the wait until the record was durable (reported with the next
    // checkpoint).
    observer.event(
        RESTORE_POINT_DURABLE_EVENT,
        None,
        serde_json::json!({
            "elapsedMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }),
    );
    Ok(point)
}

/// Undoes (or, with `finish`, finishes) a build that stopped, statement by statement,
/// each recorded like the workflow's own; what could not be done is added to the error.
fn give_back(
    client: &Client,
    point: &RestorePoint,
    finish: bool,
    observer: &dyn Observer,
    execution: &mut Execution,
) {
    let mut errors = Vec::new();
    match crate::undo::statements(client, point, finish) {
        Ok(statements) => {
            for statement in &statements {
                if let Err(error) = recover_statement(
                    client,
                    observer,
                    execution,
                    statement.step_id.clone(),
                    &statement.sql,
                    &statement.sql,
                ) {
                    errors.push(format!("{}: {error}", statement.step_id));
                }
            }
            execution.restored = Some(Restored {
                finished: finish,
                statements: statements.iter().map(|s| s.step_id.clone()).collect(),
                errors: errors.clone(),
            });
        }
        Err(error) => errors.push(error),
    }
    observer.event(
        TARGET_RESTORED_EVENT,
        None,
        serde_json::json!({"finished": finish, "errors": errors}),
    );
    let note = if errors.is_empty() {
        if finish {
            "note: every replay had completed, so the build was finished: landings resumed, previous copies dropped".to_owned()
        } else {
            "note: the target was given back as the build found it: what the build created was dropped, the previous tables and views are back".to_owned()
        }
    } else {
        format!(
            "note: the target could not be fully given back ({}); run `stb unlock` to try again, `stb status` shows what is missing",
            errors.join("; ")
        )
    };
    let message = execution.error_message.get_or_insert_with(String::new);
    if !message.is_empty() {
        message.push('\n');
    }
    message.push_str(&note);
}

/// Resumes every landing view the run paused and did not resume: a stopped build must
/// never leave ingestion stopped. Failures are added to the error, never replace it.
fn recover_landings(
    client: &Client,
    workflow: &Workflow,
    observer: &dyn Observer,
    execution: &mut Execution,
) {
    let reached = |step: &str| {
        execution.completed_steps.iter().any(|s| s == step)
            || execution.failed_step.as_deref() == Some(step)
    };
    let pending: Vec<_> = workflow
        .paused_landings
        .iter()
        .filter(|l| reached(&l.pause_step) && !execution.completed_steps.contains(&l.activate_step))
        .collect();
    for landing in pending {
        // The Kafka table first: a build can stop inside a settings repair, between its
        // drop and its creation.
        let kafka = recover_statement(
            client,
            observer,
            execution,
            format!("recover_source_kafka__{}", landing.source),
            &landing.kafka_sql,
            &landing.kafka_recorded,
        );
        let view = kafka.and_then(|()| {
            recover_statement(
                client,
                observer,
                execution,
                format!("recover_source_{}", landing.source),
                &landing.resume_sql,
                &landing.resume_sql,
            )
        });
        if let Err(error) = view {
            let note = format!(
                "note: landing of source '{}' could not be resumed ({error}); rerun the build to resume it",
                landing.source
            );
            let message = execution.error_message.get_or_insert_with(String::new);
            if !message.is_empty() {
                message.push('\n');
            }
            message.push_str(&note);
        }
    }
}

/// Runs one recovery statement outside the workflow's own list, recording it like the
/// others; its error (secrets masked) when it fails.
fn recover_statement(
    client: &Client,
    observer: &dyn Observer,
    execution: &mut Execution,
    step_id: String,
    sql: &str,
    recorded: &str,
) -> Result<(), String> {
    let step = Step {
        id: step_id,
        phase: Phase::Activation,
        action: Action::Statement(sql.to_owned()),
        recorded: Some(recorded.to_owned()),
        shard: None,
    };
    let sequence = execution.statements.len() + 1;
    let query_id = uuid::Uuid::new_v4().to_string();
    observer.event(
        "statement_started",
        Some(&step),
        serde_json::json!({"statementSequence": sequence, "intent": "mutation", "queryId": query_id, "displayName": step.id}),
    );
    let started = Instant::now();
    let error = client
        .execute(sql, Some(&query_id))
        .err()
        .map(|e| scrub(&e.to_string(), &inline_secrets(sql, recorded)));
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    observer.event(
        "statement_completed",
        Some(&step),
        serde_json::json!({"statementSequence": sequence, "intent": "mutation", "elapsedMs": elapsed_ms, "errorMessage": error, "displayName": step.id}),
    );
    execution.statements.push(PlannedStatement {
        step_id: step.id.clone(),
        phase: "recovery".into(),
        intent: "mutation".into(),
        sql: recorded.to_owned(),
    });
    execution.statement_outcomes.push(StatementOutcome {
        step_id: step.id.clone(),
        error_message: error.clone(),
        written_rows: None,
        returned_rows: None,
        elapsed_ms,
    });
    match error {
        None => {
            execution.completed_steps.push(step.id);
            Ok(())
        }
        Some(error) => Err(error),
    }
}

fn statement_started(
    workflow: &Workflow,
    step: &Step,
    sequence: usize,
    query_id: &str,
    captures: &[Option<Capture>],
) -> serde_json::Value {
    let mut payload = serde_json::json!({
        "statementSequence": sequence,
        "intent": step.intent(),
        "queryId": query_id,
        "displayName": step.id,
    });
    if let Action::Replay(root) = step.action
        && let Some(Capture::Offsets { runs, .. }) = &captures[root]
    {
        payload["replayOffsetProgress"] = serde_json::json!({
            "database": workflow.database,
            "relation": workflow.roots[root].template.target,
            "partitionColumn": stb_plan::replay::PARTITION,
            "offsetColumn": stb_plan::replay::OFFSET,
            "rangesTotal": runs.len(),
            "ranges": runs.iter().take(RECORDED_RANGES).map(|r| serde_json::json!({
                "partition": r.partition.to_string(),
                "lowerOffset": r.lower.to_string(),
                "upperOffset": r.upper.to_string(),
            })).collect::<Vec<_>>(),
        });
    }
    payload
}

fn read_capture(
    workflow: &Workflow,
    root: usize,
    rows: &stb_warehouse::Rows,
) -> Result<(Capture, CapturedRoot), String> {
    let replay = &workflow.roots[root];
    let anchor = &replay.template.anchor;
    let cell = |row: usize, column: &str| rows.text(row, column);
    let capture = parse_capture(anchor, replay.start_time.as_ref(), rows.data.len(), &cell)
        .map_err(|e| format!("replay boundary of '{}': {e}", replay.model))?;
    let (ranges, ranges_total, cutoff, lower) = match &capture {
        Capture::Offsets { runs, .. } => (
            runs.iter()
                .take(RECORDED_RANGES)
                .map(CoveredRange::of_offsets)
                .collect(),
            runs.len(),
            None,
            None,
        ),
        Capture::Scalar {
            cutoff,
            lower,
            first,
            last,
            ..
        } => {
            let ranges: Vec<CoveredRange> = match (first, last) {
                (Some(first), Some(last)) if cutoff.is_some() => {
                    vec![CoveredRange::of_scalar(anchor.mode, first, last)]
                }
                _ => Vec::new(),
            };
            let total = ranges.len();
            (ranges, total, cutoff.clone(), lower.clone())
        }
    };
    let record = CapturedRoot {
        model: replay.model.clone(),
        driving_input: replay.driving_input.clone(),
        boundary_mode: anchor.mode.as_str(),
        captured_at: capture.captured_at().map(str::to_owned),
        ranges,
        ranges_total,
        cutoff,
        lower,
        predicate: predicate(anchor.mode, &capture, replay.start_time.as_ref()),
        coverage: stb_plan::replay::coverage(anchor, &capture, replay.start_time.as_ref()),
    };
    Ok((capture, record))
}

/// Deletes a fresh landing's consumer group; a warning when that did not work (the build
/// goes on: the landing may then resume from the stale offsets).
fn reset_fresh_group(fresh: &stb_plan::workflow::FreshGroup) -> Option<String> {
    let brokers = stb_kafka::Brokers {
        list: fresh.brokers.clone(),
        settings: fresh.settings.clone(),
    };
    match stb_kafka::reset_group(&brokers, &fresh.group) {
        stb_kafka::GroupReset::Deleted | stb_kafka::GroupReset::NotFound => None,
        stb_kafka::GroupReset::Failed(reason) => Some(format!(
            "Kafka consumer group '{}' of source '{}' was not reset ({}): ingestion may resume from stale offsets; reset the group manually",
            fresh.group,
            fresh.source,
            scrub(&reason, std::slice::from_ref(&fresh.brokers))
        )),
    }
}

/// The longest a build waits for inserts that were running at capture time.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// The settle looks again after 20 ms, then less often the longer the inserts run (at
/// most every 250 ms): a short insert costs the build almost nothing, and a long one
/// (another writer's million rows) does not cost the warehouse fifty queries a second.
const SETTLE_FIRST_POLL: Duration = Duration::from_millis(20);
const SETTLE_LAST_POLL: Duration = Duration::from_millis(250);

/// The running inserts a settle waits for, as literals: all but a run's own event batches,
/// which write only its records, never a driving input.
fn awaited_inserts(running: &stb_warehouse::Rows) -> Vec<String> {
    (0..running.data.len())
        .filter_map(|row| running.text(row, "query_id"))
        .filter(|id| !id.starts_with(stb_warehouse::events::WRITER_QUERY_PREFIX))
        .map(|id| stb_ddl::string_literal(&id))
        .collect()
}

/// Waits until none of the `running` inserts is left in `system.processes`. Past the
/// limit the build goes on with a warning rather than fail on an unrelated slow insert.
fn settle(
    client: &Client,
    running: &stb_warehouse::Rows,
    interrupt: &AtomicBool,
) -> Result<Option<String>, Interrupted> {
    let ids = awaited_inserts(running);
    if ids.is_empty() {
        return Ok(None);
    }
    let check = format!(
        "SELECT count() AS n FROM system.processes WHERE query_id IN ({})",
        ids.join(", ")
    );
    let started = Instant::now();
    let mut pause = SETTLE_FIRST_POLL;
    loop {
        if interrupt.load(Ordering::SeqCst) {
            return Err(Interrupted::Cancelled);
        }
        let rows = client
            .query(&check)
            .map_err(|e| Interrupted::Failed(e.to_string()))?;
        let left = rows.text(0, "n").unwrap_or_default();
        if left == "0" {
            return Ok(None);
        }
        if started.elapsed() > SETTLE_LIMIT {
            return Ok(Some(format!(
                "{left} inserts running when the boundaries were captured were still running after {} s; rows they add to a driving input may be replayed twice",
                SETTLE_LIMIT.as_secs()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 3 / 2).min(SETTLE_LAST_POLL);
    }
}

/// How often a waiting run looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(50);
/// How often a long statement's progress is read from `system.processes`, once it has
/// run that long.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Where a running statement is, as the warehouse reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub read_rows: u64,
    /// The warehouse's estimate of the rows the statement will read (0: unknown).
    pub total_rows_approx: u64,
    pub written_rows: u64,
    pub elapsed_ms: u64,
}

impl Progress {
    /// The share of its input read, when the warehouse estimates one.
    #[must_use]
    pub fn percent(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        let share = (self.read_rows.min(self.total_rows_approx) as f64)
            / (self.total_rows_approx as f64)
            * 100.0;
        (self.total_rows_approx > 0).then_some(share)
    }
}

/// Reads statement `query_id`'s progress; `None` once it is no longer running.
fn read_progress(client: &Client, query_id: &str) -> Option<Progress> {
    let rows = client
        .query(&format!(
            "SELECT toString(read_rows) AS read_rows, toString(total_rows_approx) AS total, \
             toString(written_rows) AS written, toString(toUInt64(elapsed * 1000)) AS elapsed_ms \
             FROM system.processes WHERE query_id = {}",
            stb_ddl::string_literal(query_id)
        ))
        .ok()?;
    let number = |column: &str| rows.text(0, column).and_then(|v| v.parse().ok());
    Some(Progress {
        read_rows: number("read_rows")?,
        total_rows_approx: number("total").unwrap_or(0),
        written_rows: number("written").unwrap_or(0),
        elapsed_ms: number("elapsed_ms").unwrap_or(0),
    })
}

pub(crate) fn run_one(
    client: &Arc<Client>,
    sql: String,
    query_id: &str,
    is_read: bool,
    interrupt: &AtomicBool,
    progress: &dyn Fn(Progress),
) -> Result<Answer, Interrupted> {
    let (done, answer) = mpsc::channel();
    let worker = Arc::clone(client);
    let id = query_id.to_owned();
    std::thread::spawn(move || {
        let result = if is_read {
            worker.query(&sql).map(Answer::Rows)
        } else {
            worker
                .execute(&sql, Some(&id))
                .map(|summary| Answer::Written(summary.written_rows))
        };
        let _ = done.send(result);
    });
    let started = std::time::Instant::now();
    let mut probed = started;
    loop {
        if !is_read && probed.elapsed() >= PROGRESS_EVERY {
            probed = std::time::Instant::now();
            if let Some(now) = read_progress(client, query_id) {
                progress(now);
            }
        }
        match answer.recv_timeout(POLL) {
            Ok(result) => return result.map_err(|e| Interrupted::Failed(e.to_string())),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Interrupted::Failed("the statement's worker stopped".into()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) if interrupt.load(Ordering::SeqCst) => {
                // The warehouse would otherwise finish an abandoned INSERT ... SELECT.
                let _ = client.execute(
                    &format!(
                        "KILL QUERY WHERE query_id = {} SYNC",
                        stb_ddl::string_literal(query_id)
                    ),
                    None,
                );
                return Err(Interrupted::Cancelled);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::awaited_inserts;

    #[test]
    fn a_settle_waits_for_every_insert_but_the_run_s_own_event_batches() {
        let running = stb_warehouse::Rows {
            names: vec!["query_id".into()],
            types: vec!["String".into()],
            data: vec![
                vec![serde_json::Value::from("a-writer-of-orders")],
                vec![serde_json::Value::from(format!(
                    "{}0f1e",
                    stb_warehouse::events::WRITER_QUERY_PREFIX
                ))],
                vec![serde_json::Value::from("it's another")],
            ],
        };
        assert_eq!(
            awaited_inserts(&running),
            ["'a-writer-of-orders'", "'it\\'s another'"]
        );
    }
}
