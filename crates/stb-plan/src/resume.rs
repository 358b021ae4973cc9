//! Suspended builds: a build that stops inside a chunked replay can keep what it made and
//! hold the target lock, and `stb build --resume RUN` finishes it from the chunk where it
//! stopped. This module says which workflows may be suspended, what a run records before
//! each chunked replay to be resumable without its process, where a resumed replay starts
//! and whether the history it still needs is retained. The executor does the reading.
//!
//! Exactly once across a suspension rests on three facts: every chunk's statement runs
//! under a query id known before it starts (so the warehouse's query log says how it
//! ended, even after a kill of the process that sent it); a chunk is recorded complete only
//! once its statement returned; and a chunk that stopped having written some of its rows
//! is run again only where its root leaves out keys it holds already and no model below
//! it was fed by the cascade (otherwise the resume refuses and the build is given back).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::replay::chunks::{Chunk, ChunkSpan};
use crate::replay::{BoundaryMode, Capture, partition_bounds};
use crate::workflow::{Action, RootReplay, Workflow};

/// Why a build of `workflow` that stops in a chunked replay is given back rather than
/// suspended; `None` when it can be suspended.
#[must_use]
pub fn not_resumable(workflow: &Workflow) -> Option<String> {
    if workflow.cluster.is_some() {
        return Some("it runs on a cluster".into());
    }
    if let Some(landing) = workflow.paused_landings.first() {
        return Some(format!(
            "it pauses the landing of source '{}', and ingestion cannot wait for a resume",
            landing.source
        ));
    }
    let Some(first) = workflow
        .steps
        .iter()
        .position(|step| chunked_root(workflow, &step.action).is_some())
    else {
        return Some("none of its replays is cut into chunks".into());
    };
    workflow.steps[first..]
        .iter()
        .find(|step| {
            step.recorded.is_some() || matches!(step.action, Action::ResetConsumerGroup(_))
        })
        .map(|step| {
            format!(
                "its step '{}' runs with credentials, which are never recorded",
                step.id
            )
        })
}

/// The root a step replays in chunks (`[build] replay_chunk_rows`, a bounded window).
#[must_use]
pub fn chunked_root<'w>(workflow: &'w Workflow, action: &Action) -> Option<&'w RootReplay> {
    match action {
        Action::Replay(root) => workflow
            .roots
            .get(*root)
            .filter(|root| root.bounded && root.chunk_rows.is_some()),
        _ => None,
    }
}

/// The query id chunk `number` (the first is 1) of a replay runs under: the first under
/// the step's own id (`base`), the others under `base-<number>`. Known before any of them
/// runs, so a resume finds each chunk in the query log without its process.
#[must_use]
pub fn chunk_query_id(base: &str, number: usize) -> String {
    if number <= 1 {
        base.to_owned()
    } else {
        format!("{base}-{number}")
    }
}

/// What a run records (durably) before the first chunk of a chunked replay runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumePoint {
    /// The replay's step, by its index in the workflow.
    pub step: usize,
    pub step_id: String,
    pub model: String,
    /// See [`chunk_query_id`].
    pub query_base: String,
    /// The first chunk this run replays (1, unless the run resumes another).
    pub first_chunk: usize,
    /// The replay's chunks, as cut when it began (a time or cursor window is cut where the
    /// warehouse said then; read again later it would be cut elsewhere).
    pub chunks: Vec<Chunk>,
    /// Every root's capture so far, by root index.
    pub captures: Vec<Option<Capture>>,
    /// The replay's target (and every table its cascade writes) by name, with the
    /// identity (uuid) it had: a resume refuses when one was dropped or replaced.
    pub relations: BTreeMap<String, String>,
    /// The workflow ([`recorded_workflow`]): in a run's first resume point only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Workflow>,
}

/// The workflow as a resume point holds it: a step that carries credentials holds its
/// recorded text instead ([`not_resumable`] keeps every such step before the first
/// chunked replay, which a resume never runs again).
#[must_use]
pub fn recorded_workflow(workflow: &Workflow) -> Workflow {
    let mut recorded = workflow.clone();
    for step in &mut recorded.steps {
        if let Some(text) = &step.recorded {
            step.action = Action::Statement(text.clone());
        }
    }
    recorded
}

/// What became of the chunk a build was running when it stopped, as the warehouse's query
/// log tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkState {
    /// Its statement completed: every row of it is written.
    Finished,
    /// It stopped before writing a row (or never reached the warehouse).
    NotWritten,
    /// It stopped after writing some rows (how many, when the log says), or the log
    /// cannot tell.
    Written(Option<u64>),
}

/// The chunk (the first is 1) a resumed replay of `root` starts with, chunk `number` having
/// been left in `state`; why it cannot be resumed exactly otherwise.
///
/// # Errors
/// The chunk wrote rows that cannot be told apart from the rest: its root keeps no
/// lineage key to leave them out, or models below it received them through the cascade.
pub fn resume_at(root: &RootReplay, number: usize, state: ChunkState) -> Result<usize, String> {
    match state {
        ChunkState::Finished => Ok(number + 1),
        ChunkState::NotWritten => Ok(number),
        ChunkState::Written(_)
            if root.template.skip_existing.is_some() && root.propagated.is_empty() =>
        {
            Ok(number)
        }
        ChunkState::Written(rows) => {
            let written = rows.map_or_else(
                || "an unknown number of rows".to_owned(),
                |rows| format!("{rows} rows"),
            );
            let why = if root.template.skip_existing.is_none() {
                format!(
                    "its table keeps no lineage key ({} boundary) to leave them out of a second run",
                    root.template.anchor.mode.as_str()
                )
            } else {
                format!(
                    "models below it ({}) received them too",
                    root.propagated.join(", ")
                )
            };
            Err(format!(
                "chunk {number} of the replay of '{}' stopped after it wrote {written}, and {why}",
                root.model
            ))
        }
    }
}

/// True when position `a` comes before `b`: offsets and cursors as integers, times as
/// ClickHouse prints them (at a fixed width: `2026-11-01 00:00:00.000`).
fn earlier(mode: BoundaryMode, a: &str, b: &str) -> bool {
    let numeric = matches!(mode, BoundaryMode::Offsets | BoundaryMode::Cursor);
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(a), Ok(b)) if numeric => a < b,
        _ => a < b,
    }
}

/// Checks that the driving input still holds what chunks `from..` (the first is 1) of a
/// replay read: `earliest` is its lowest position now, per partition in offsets mode
/// (`None` for the scalar modes). A position the chunks need below it was dropped by
/// retention since the capture: resuming would leave its rows out.
///
/// # Errors
/// What is gone, by partition and position.
pub fn check_retained(
    mode: BoundaryMode,
    capture: &Capture,
    chunks: &[Chunk],
    from: usize,
    earliest: &BTreeMap<Option<i128>, String>,
) -> Result<(), String> {
    let remaining = chunks.get(from.saturating_sub(1)..).unwrap_or_default();
    let mut needed: BTreeMap<Option<i128>, String> = BTreeMap::new();
    let mut need = |partition: Option<i128>, position: String| {
        let slot = needed.entry(partition).or_insert_with(|| position.clone());
        if earlier(mode, &position, slot) {
            *slot = position;
        }
    };
    match capture {
        Capture::Offsets { runs, .. } => {
            let floors = partition_bounds(runs);
            for chunk in remaining {
                if let ChunkSpan::Offsets { ranges } = &chunk.span {
                    for range in ranges {
                        let floor = range.lower.or_else(|| {
                            floors
                                .iter()
                                .find(|(p, _, _)| *p == range.partition)
                                .map(|(_, lower, _)| *lower)
                        });
                        if let Some(floor) = floor {
                            need(Some(range.partition), floor.to_string());
                        }
                    }
                }
            }
        }
        Capture::Scalar { first, .. } => {
            if let Some(chunk) = remaining.first() {
                let from = match &chunk.span {
                    ChunkSpan::Scalar {
                        from: Some(from), ..
                    } => Some(from.clone()),
                    _ => first.clone(),
                };
                if let Some(from) = from {
                    need(None, from);
                }
            }
        }
    }
    let lost: Vec<String> = needed
        .iter()
        .filter_map(|(partition, position)| match earliest.get(partition) {
            Some(now) if !earlier(mode, position, now) => None,
            now => Some(match (partition, now) {
                (Some(p), Some(now)) => {
                    format!("partition {p} now starts at offset {now}, the replay needs {position}")
                }
                (Some(p), None) => format!("partition {p} holds no rows any more"),
                (None, Some(now)) => {
                    format!("the input now starts at {now}, the replay needs {position}")
                }
                (None, None) => "the input holds no rows any more".to_owned(),
            }),
        })
        .collect();
    if lost.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "retention dropped rows the rest of the replay needs: {}",
            lost.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests;
