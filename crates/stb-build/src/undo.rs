//! The I/O around [`stb_plan::restore`]: the restore point a build records before its first
//! change, and the undo (or the finish) a build that stops runs, in process or, for a
//! killed one, from `stb unlock`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stb_plan::restore::{
    Held, Undo, UndoStatement, aside_name, finish_statements, is_aside, undo_statements,
};
use stb_plan::workflow::Workflow;
use stb_warehouse::Client;

/// The run event that carries a build's restore point.
pub const RESTORE_POINT_EVENT: &str = "restore_point";
/// Written once the restore point is durable, with how long reading and recording it took.
pub const RESTORE_POINT_DURABLE_EVENT: &str = "restore_point_durable";
/// Written (and made durable) once every replay has completed: a build that stops after
/// it is finished, not undone (its landings may have delivered rows to the new views only).
pub const REPLAYS_COMPLETE_EVENT: &str = "replays_complete";
/// Written once a stopped build was undone or finished.
pub const TARGET_RESTORED_EVENT: &str = "target_restored";
/// Written (and made durable) once every statement of the workflow succeeded: nothing of
/// it is to be given back, even when the process dies before it records the run's end (a
/// mixed build's virtual phase, whose run ends only with the direct phase after it).
pub const WORKFLOW_COMPLETED_EVENT: &str = "workflow_completed";

/// What a build records before its first change: enough to give the target back without
/// the process that started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestorePoint {
    pub undo: Undo,
    /// What each relation the build touches was at the start (absent: did not exist).
    pub before: BTreeMap<String, Held>,
    /// The landing views to start again when a build that stops is finished instead.
    pub resume: Vec<String>,
    /// [`Workflow::completed_when`]: once it answers 1, the build is done and nothing is
    /// given back. (Absent from restore points recorded before it existed.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_when: Option<String>,
}

impl RestorePoint {
    /// Reads what `workflow` touches, as it is now. Refused while an aside of an earlier
    /// build is still there: that build was neither undone nor finished, and its aside may
    /// hold the only copy of a table's rows.
    ///
    /// # Errors
    /// The catalog could not be read, or an earlier build's aside is present.
    pub fn read(client: &Client, workflow: &Workflow) -> Result<Self, String> {
        Self::read_stamped(client, workflow, &[]).0
    }

    /// [`Self::read`], with the catalog stamp of `stamp_databases` read in the same request
    /// ([`Client::definitions_stamped`]); the stamp is `None` when the request failed.
    pub fn read_stamped(
        client: &Client,
        workflow: &Workflow,
        stamp_databases: &[String],
    ) -> (Result<Self, String>, Option<String>) {
        let undo = workflow.undo.clone();
        // With what it touches, in the same read: the asides an earlier build may have left
        // of any relation this one makes.
        let mut names = undo.relations();
        names.extend(undo.created.iter().map(|r| aside_name(r)));
        let (before, stamp) =
            match client.definitions_stamped(&undo.database, &names, stamp_databases) {
                Ok((definitions, stamp)) => (held_from(definitions), stamp),
                Err(e) => {
                    return (
                        Err(format!("the target's relations could not be read: {e}")),
                        None,
                    );
                }
            };
        if let Some(aside) = before.keys().find(|name| is_aside(name)) {
            return (
                Err(format!(
                    "'{aside}' is still there: an earlier build set it aside and was neither undone nor finished; run `stb unlock` to give the target back as that build found it"
                )),
                stamp,
            );
        }
        let point = Self {
            undo,
            before,
            resume: workflow
                .paused_landings
                .iter()
                .map(|l| l.resume_sql.clone())
                .collect(),
            completed_when: workflow.completed_when.clone(),
        };
        (Ok(point), stamp)
    }
}

/// Whether what the build of `point` makes is complete on record
/// ([`RestorePoint::completed_when`]); false when it has no such record.
///
/// # Errors
/// The record could not be read.
pub fn is_complete(client: &Client, point: &RestorePoint) -> Result<bool, String> {
    let Some(sql) = &point.completed_when else {
        return Ok(false);
    };
    let rows = client
        .query(sql)
        .map_err(|e| format!("whether the build is complete could not be read: {e}"))?;
    Ok(rows
        .text(0, "complete")
        .is_some_and(|v| v == "1" || v == "true"))
}

/// A restore point read ahead of the run, under the target lock, in the request that
/// rechecks the catalog: the run records it instead of reading it again.
#[derive(Debug)]
pub struct ReadAhead {
    pub point: Result<RestorePoint, String>,
}

/// The relations of `undo` as the target holds them now.
///
/// # Errors
/// The catalog could not be read.
pub fn held(client: &Client, undo: &Undo) -> Result<BTreeMap<String, Held>, String> {
    held_of(client, &undo.database, &undo.relations())
}

fn held_of(
    client: &Client,
    database: &str,
    names: &[String],
) -> Result<BTreeMap<String, Held>, String> {
    client
        .definitions(database, names)
        .map(held_from)
        .map_err(|e| format!("the target's relations could not be read: {e}"))
}

fn held_from(definitions: stb_warehouse::Definitions) -> BTreeMap<String, Held> {
    definitions
        .into_iter()
        .map(|(name, (engine, create))| (name, Held { engine, create }))
        .collect()
}

/// What to run now to give the target back as `point` found it: the undo (`finish` false),
/// or the finish of a build whose replays completed (its landings started, asides dropped).
///
/// # Errors
/// The catalog could not be read.
pub fn statements(
    client: &Client,
    point: &RestorePoint,
    finish: bool,
) -> Result<Vec<UndoStatement>, String> {
    let now = held(client, &point.undo)?;
    if !finish {
        return Ok(undo_statements(&point.undo, &point.before, &now));
    }
    let mut statements: Vec<UndoStatement> = point
        .resume
        .iter()
        .enumerate()
        .map(|(index, sql)| UndoStatement {
            step_id: format!("finish_resume_landing_{}", index + 1),
            sql: sql.clone(),
        })
        .collect();
    statements.extend(finish_statements(&point.undo, &now));
    Ok(statements)
}
