//! A build that stops inside a chunked replay is suspended rather than given back when it
//! can go on exactly ([`stb_plan::resume`]): before each chunked replay it records a resume
//! point (durably, before the first chunk), and when it stops it asks the warehouse's query
//! log how the chunk in flight ended. `stb build --resume RUN` finishes it; `stb unlock`
//! gives the target back as the build found it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use stb_plan::replay::Capture;
use stb_plan::replay::chunks::Chunk;
use stb_plan::resume::{
    ChunkState, ResumePoint, chunk_query_id, not_resumable, recorded_workflow, resume_at,
};
use stb_plan::workflow::{Step, Workflow};
use stb_warehouse::Client;

use crate::execute::{Execution, Observer, Status};
use crate::undo::RestorePoint;

/// The event that carries a [`ResumePoint`].
pub const RESUME_POINT_EVENT: &str = "resume_point";
/// Written (and made durable) when a build is suspended: where its replay goes on.
pub const SUSPENDED_EVENT: &str = "replay_suspended";
/// Written into a suspended run's events when another run resumes it (`by`).
pub const RESUMED_EVENT: &str = "run_resumed";

/// Where a suspended build stopped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspended {
    pub step_id: String,
    pub model: String,
    /// The chunk a resume starts with (the first is 1).
    pub next_chunk: usize,
    pub chunks: usize,
    /// The chunk that was running when the build stopped, and its query id.
    pub stopped_in_chunk: usize,
    pub query_id: String,
}

/// What a resumed run starts from: the suspended run's restore point and resume point.
#[derive(Debug, Clone)]
pub struct Resumption {
    pub point: RestorePoint,
    /// The chunked replay's step, by index.
    pub step: usize,
    pub chunks: Vec<Chunk>,
    /// The chunk to run first (the first is 1).
    pub first_chunk: usize,
    pub captures: Vec<Option<Capture>>,
}

/// The chunked replay a run is in.
struct Current {
    step: usize,
    step_id: String,
    root: usize,
    query_base: String,
    chunks: usize,
    /// The first chunk this run replays (the first is 1).
    first_chunk: usize,
}

/// What a run keeps to be suspended: whether its workflow can be, and where it is.
pub(crate) struct Suspension {
    why_not: Option<String>,
    workflow_recorded: bool,
    current: Option<Current>,
    /// The chunk that runs (or last ran) in the current chunked replay.
    pub(crate) chunk_in_flight: Cell<usize>,
}

impl Suspension {
    pub(crate) fn new(workflow: &Workflow) -> Self {
        Self {
            why_not: not_resumable(workflow),
            workflow_recorded: false,
            current: None,
            chunk_in_flight: Cell::new(0),
        }
    }

    /// Records the resume point of the chunked replay `step` is about to run, and waits
    /// until it is durable (nothing when the workflow cannot be suspended).
    ///
    /// # Errors
    /// The relations' identities could not be read, or the point could not be recorded:
    /// the replay does not start.
    pub(crate) fn record_point(
        &mut self,
        (client, workflow, observer): (&Client, &Workflow, &dyn Observer),
        (index, step): (usize, &Step),
        (root, chunks, first_chunk): (usize, &[Chunk], usize),
        query_base: &str,
        captures: &[Option<Capture>],
    ) -> Result<(), String> {
        // No chunk of this replay has started in this run yet.
        self.chunk_in_flight.set(0);
        let current = Current {
            step: index,
            step_id: step.id.clone(),
            root,
            query_base: query_base.to_owned(),
            chunks: chunks.len(),
            first_chunk,
        };
        if self.why_not.is_some() {
            self.current = Some(current);
            return Ok(());
        }
        let relations = identities(client, &workflow.database, &workflow.undo.created)?;
        let point = ResumePoint {
            step: index,
            step_id: step.id.clone(),
            model: workflow.roots[root].model.clone(),
            query_base: query_base.to_owned(),
            first_chunk,
            chunks: chunks.to_vec(),
            captures: captures.to_vec(),
            relations,
            workflow: (!self.workflow_recorded).then(|| recorded_workflow(workflow)),
        };
        let payload = serde_json::to_value(&point)
            .map_err(|error| format!("the resume point could not be written: {error}"))?;
        observer.event(RESUME_POINT_EVENT, Some(step), payload);
        observer
            .checkpoint()
            .map_err(|error| format!("the resume point could not be recorded: {error}"))?;
        // Only a replay whose point is on record can be suspended.
        self.current = Some(current);
        self.workflow_recorded = true;
        Ok(())
    }

    /// Suspends a run that stopped inside its current chunked replay when the replay can
    /// go on exactly; says why not in the run's error otherwise (it is then given back).
    pub(crate) fn suspend(
        &self,
        client: &Client,
        workflow: &Workflow,
        observer: &dyn Observer,
        execution: &mut Execution,
    ) -> Option<Suspended> {
        let current = self.current.as_ref()?;
        let stopped = self.chunk_in_flight.get();
        if execution.status == Status::Succeeded
            || execution.failed_step.as_deref() != Some(current.step_id.as_str())
        {
            return None;
        }
        let decided = match &self.why_not {
            Some(why) => Err(why.clone()),
            // Stopped before this run started a chunk of the replay: it goes on where
            // this run would have begun.
            None if stopped == 0 => Ok(current.first_chunk),
            None => {
                let query_id = chunk_query_id(&current.query_base, stopped);
                // A chunk whose client gave up on it may still run in the warehouse: it is
                // stopped here, so the suspension never waits on it.
                let _ = client.execute(
                    &format!(
                        "KILL QUERY WHERE query_id = {} SYNC",
                        stb_ddl::string_literal(&query_id)
                    ),
                    None,
                );
                chunk_state(client, &query_id, None)
                    .and_then(|state| resume_at(&workflow.roots[current.root], stopped, state))
            }
        };
        let next = match decided {
            Ok(next) => next,
            Err(why) => {
                add_note(
                    execution,
                    &format!("note: the build was not suspended for a resume: {why}"),
                );
                return None;
            }
        };
        let suspended = Suspended {
            step_id: current.step_id.clone(),
            model: workflow.roots[current.root].model.clone(),
            next_chunk: next,
            chunks: current.chunks,
            stopped_in_chunk: stopped.max(current.first_chunk),
            query_id: chunk_query_id(&current.query_base, stopped.max(current.first_chunk)),
        };
        let step = &workflow.steps[current.step];
        observer.event(
            SUSPENDED_EVENT,
            Some(step),
            serde_json::to_value(&suspended).unwrap_or_default(),
        );
        if let Err(error) = observer.checkpoint() {
            add_note(
                execution,
                &format!(
                    "note: the build was not suspended for a resume: its suspension could not be recorded ({error})"
                ),
            );
            return None;
        }
        let run = observer.run_id().unwrap_or("<run id>");
        add_note(
            execution,
            &format!(
                "note: the build is suspended at chunk {next} of {} of the replay of '{}': what it built so far is kept, partly filled, and it holds the target lock; `stb build --resume {run}` finishes it, `stb unlock` gives the target back as the build found it",
                suspended.chunks, suspended.model
            ),
        );
        Some(suspended)
    }
}

fn add_note(execution: &mut Execution, note: &str) {
    let message = execution.error_message.get_or_insert_with(String::new);
    if !message.is_empty() {
        message.push('\n');
    }
    message.push_str(note);
}

/// The identity (uuid) of each of `names` in `database` that exists.
///
/// # Errors
/// The catalog could not be read.
pub fn identities(
    client: &Client,
    database: &str,
    names: &[String],
) -> Result<BTreeMap<String, String>, String> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let listed: Vec<String> = names.iter().map(|n| stb_ddl::string_literal(n)).collect();
    let rows = client
        .query(&format!(
            "SELECT name, toString(uuid) AS uuid FROM system.tables WHERE database = {} AND name IN ({})",
            stb_ddl::string_literal(database),
            listed.join(", ")
        ))
        .map_err(|error| format!("the identities of the build's relations could not be read: {error}"))?;
    Ok((0..rows.data.len())
        .filter_map(|row| Some((rows.text(row, "name")?, rows.text(row, "uuid")?)))
        .collect())
}

/// How often a resume looks again at a chunk its killed process left running.
const STILL_RUNNING_POLL: Duration = Duration::from_millis(200);

/// How the chunk statement `query_id` ended, as the warehouse's query log tells it. A
/// chunk still running (its process was killed; the warehouse goes on with an `INSERT ...
/// SELECT`) is waited for, and told about through `waiting` once.
///
/// # Errors
/// The warehouse could not be asked.
pub fn chunk_state(
    client: &Client,
    query_id: &str,
    waiting: Option<&dyn Fn()>,
) -> Result<ChunkState, String> {
    let id = stb_ddl::string_literal(query_id);
    let asked = |error: stb_warehouse::WarehouseError| {
        format!("how chunk statement {query_id} ended could not be read: {error}")
    };
    let mut told = false;
    loop {
        let running = client
            .query(&format!(
                "SELECT count() AS n FROM system.processes WHERE query_id = {id}"
            ))
            .map_err(asked)?;
        if running.text(0, "n").as_deref() == Some("0") {
            break;
        }
        if let (Some(waiting), false) = (waiting, told) {
            waiting();
            told = true;
        }
        std::thread::sleep(STILL_RUNNING_POLL);
    }
    client.execute("SYSTEM FLUSH LOGS", None).map_err(asked)?;
    let rows = client
        .query(&format!(
            "SELECT toString(type) AS type, toString(written_rows) AS written \
             FROM system.query_log WHERE query_id = {id} AND type != 'QueryStart' \
             ORDER BY event_time_microseconds DESC LIMIT 1"
        ))
        .map_err(asked)?;
    if rows.data.is_empty() {
        // No end on record: it may never have reached the warehouse, or the log may not
        // keep it (sampled, filtered by type or duration, expired): nothing can be told.
        return Ok(ChunkState::Written(None));
    }
    let written: Option<u64> = rows.text(0, "written").and_then(|n| n.parse().ok());
    Ok(match rows.text(0, "type").as_deref() {
        Some("QueryFinish") => ChunkState::Finished,
        Some("ExceptionBeforeStart") => ChunkState::NotWritten,
        _ if written == Some(0) => ChunkState::NotWritten,
        _ => ChunkState::Written(written),
    })
}
