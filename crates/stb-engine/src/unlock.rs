//! Breaking a target lock left by a killed command: never by age alone. The lock is broken
//! only when the run that holds it has stopped heartbeating, and the break is recorded in
//! that run's own event stream, so whoever reads the run later sees who ended it.

use stb_warehouse::events::{append_lock_broken, last_event_age_ms};
use stb_warehouse::{Client, TargetLock, lock_holder};

use crate::EngineError;

/// The lock's run still heartbeats.
pub const ALIVE_CODE: &str = "STB-LOCK-003";
/// A killed build's target could not be given back.
pub const GIVE_BACK_CODE: &str = "STB-LOCK-004";

/// A lock broken, and what of its run was still running in the warehouse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub owner: String,
    /// Statements of the run still executing in the warehouse, killed before the break: a
    /// killed client's query can outlive it and would write into what the next build
    /// replaces.
    pub killed_queries: Vec<String>,
    /// The killed build's half-made target, given back as it found it (or finished).
    pub given_back: Option<GivenBack>,
}

/// Breaks `database`'s lock when its run is silent; what was broken, or `None` when
/// nothing held it. `broken_by` says who, for the record; `alive_within_ms` is the signal
/// window ([`crate::runs::Windows::signal_ms`], 45 s unless a test shortens it).
///
/// # Errors
/// The holder still heartbeats (`STB-LOCK-003`), or the warehouse refused a step.
pub fn break_stale_lock(
    client: &Client,
    database: &str,
    broken_by: &str,
    alive_within_ms: i64,
) -> Result<Option<Broken>, EngineError> {
    let Some(owner) = lock_holder(client, database).map_err(|e| EngineError::from(&e))? else {
        return Ok(None);
    };
    let silent = last_event_age_ms(client, database, &owner).map_err(|e| EngineError::from(&e))?;
    // A suspended build ended on record and keeps the lock for a resume: nothing runs.
    if let Some(silent_ms) = silent
        && silent_ms < alive_within_ms
        && suspended_under(client, database, &owner)?.is_none()
    {
        return Err(EngineError::new(
            ALIVE_CODE,
            format!(
                "Run '{owner}' holds the mutation lock on '{database}' and is still running (last signal {} s ago)",
                silent_ms / 1000
            ),
            format!(
                "let it finish, or stop its process; a stopped run's lock can be broken {} s after its last heartbeat",
                alive_within_ms / 1000
            ),
        ));
    }
    let phases = phases_of(client, database, &owner)?;
    let mut killed_queries = Vec::new();
    for invocation in &phases {
        killed_queries.extend(kill_unfinished(client, database, invocation)?);
    }
    // Still under its lock: the dead build's half-made relations are given back first
    // (a mixed build's restore point is its direct phase's).
    let mut given_back = None;
    for invocation in &phases {
        if let Some(done) = give_back(client, database, invocation)? {
            given_back = Some(done);
        }
    }
    TargetLock::of_owner(client, database, &owner)
        .release()
        .map_err(|e| EngineError::from(&e))?;
    append_lock_broken(client, database, &owner, broken_by).map_err(|e| EngineError::from(&e))?;
    Ok(Some(Broken {
        owner,
        killed_queries,
        given_back,
    }))
}

/// The run suspended under `holder`'s lock (the holder, or a later phase of its mixed
/// build), with its `replay_suspended` payload; `None` when none is (or it was resumed).
///
/// # Errors
/// The runs' events could not be read.
pub(crate) fn suspended_under(
    client: &Client,
    database: &str,
    holder: &str,
) -> Result<Option<(String, serde_json::Value)>, EngineError> {
    use stb_build::suspend::{RESUMED_EVENT, SUSPENDED_EVENT};
    for invocation in phases_of(client, database, holder)? {
        let events = stb_warehouse::runs::events_of(client, database, &invocation)
            .map_err(|e| EngineError::from(&e))?;
        if events.iter().any(|e| e.kind == RESUMED_EVENT) {
            continue;
        }
        if let Some(event) = events.iter().rev().find(|e| e.kind == SUSPENDED_EVENT) {
            let payload = serde_json::from_str(&event.payload).unwrap_or_default();
            return Ok(Some((invocation, payload)));
        }
    }
    Ok(None)
}

/// The invocations that held `owner`'s lock: the owner, and the later phases of a mixed
/// build as its first phase recorded them.
pub(crate) fn phases_of(
    client: &Client,
    database: &str,
    owner: &str,
) -> Result<Vec<String>, EngineError> {
    let events = stb_warehouse::runs::events_of(client, database, owner)
        .map_err(|e| EngineError::from(&e))?;
    let mut phases = vec![owner.to_owned()];
    let named = events
        .iter()
        .filter(|e| e.kind == crate::build::PHASES_EVENT)
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(&e.payload).ok())
        .flat_map(|payload| {
            payload["invocations"]
                .as_array()
                .map(|ids| {
                    ids.iter()
                        .filter_map(|id| id.as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        });
    for invocation in named {
        if !phases.contains(&invocation) {
            phases.push(invocation);
        }
    }
    Ok(phases)
}

/// What `stb unlock` did to the target a killed build left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenBack {
    /// True when every replay had completed and the build was finished instead of undone.
    pub finished: bool,
    /// The statements run, by step id.
    pub statements: Vec<String>,
}

/// Undoes (or finishes) the build `invocation` left, from the restore point it recorded
/// before its first change; `None` when it recorded none or was already given back.
///
/// # Errors
/// Its records or the catalog could not be read, or a statement failed (the others are
/// not attempted: run `stb unlock` again once the cause is fixed; every step is safe to
/// repeat).
pub fn give_back(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<Option<GivenBack>, EngineError> {
    use stb_build::suspend::{RESUMED_EVENT, SUSPENDED_EVENT};
    use stb_build::undo::{
        REPLAYS_COMPLETE_EVENT, RESTORE_POINT_EVENT, RestorePoint, TARGET_RESTORED_EVENT,
        WORKFLOW_COMPLETED_EVENT,
    };
    let events = stb_warehouse::runs::events_of(client, database, invocation)
        .map_err(|e| EngineError::from(&e))?;
    let has = |kind: &str| events.iter().any(|e| e.kind == kind);
    let Some(point) = events
        .iter()
        .rev()
        .find(|e| e.kind == RESTORE_POINT_EVENT)
        .and_then(|e| serde_json::from_str::<RestorePoint>(&e.payload).ok())
    else {
        return Ok(None);
    };
    // Given back already, ended on record (unless suspended: it kept what it made), resumed
    // by another run (whose own restore point is the same), or every statement done (a
    // mixed build's virtual phase, whose run ends only with the phase after it): nothing
    // to give back.
    let suspended = has(SUSPENDED_EVENT) && !has(RESUMED_EVENT);
    if has(TARGET_RESTORED_EVENT)
        || (has("run_completed") && !suspended)
        || has(RESUMED_EVENT)
        || has(WORKFLOW_COMPLETED_EVENT)
    {
        return Ok(None);
    }
    let finished = has(REPLAYS_COMPLETE_EVENT);
    let failed = |message: String| {
        EngineError::new(
            GIVE_BACK_CODE,
            format!("the target left by run '{invocation}' could not be given back: {message}"),
            "fix the cause and run `stb unlock` again: every step of a give-back is safe to repeat",
        )
    };
    // Killed after its last statement wrote what makes it complete (a deployment's
    // header) and before its events said so: done, nothing to give back.
    if stb_build::undo::is_complete(client, &point).map_err(&failed)? {
        return Ok(None);
    }
    let statements = stb_build::undo::statements(client, &point, finished).map_err(&failed)?;
    for statement in &statements {
        client
            .execute(&statement.sql, None)
            .map_err(|e| failed(format!("{}: {e}", statement.step_id)))?;
    }
    let ids: Vec<String> = statements.iter().map(|s| s.step_id.clone()).collect();
    stb_warehouse::events::append_event(
        client,
        database,
        invocation,
        TARGET_RESTORED_EVENT,
        &serde_json::json!({"finished": finished, "errors": [], "statements": ids, "by": "stb unlock"}),
    )
    .map_err(|e| EngineError::from(&e))?;
    Ok(Some(GivenBack {
        finished,
        statements: ids,
    }))
}

/// Kills the statements `invocation` started and never finished that the warehouse still
/// runs; their query ids.
fn kill_unfinished(
    client: &Client,
    database: &str,
    invocation: &str,
) -> Result<Vec<String>, EngineError> {
    let error = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    let events = stb_warehouse::runs::events_of(client, database, invocation).map_err(error)?;
    let unfinished: Vec<String> = crate::runs::timeline(&events)
        .into_iter()
        .filter(|s| s.elapsed_ms.is_none())
        .filter_map(|s| s.query_id)
        .collect();
    // A chunked replay's chunks run under ids derived from the one its resume point
    // recorded before the first chunk: a chunk whose start was not on record yet is found
    // by that prefix.
    let bases: Vec<String> = events
        .iter()
        .filter(|e| e.kind == stb_build::suspend::RESUME_POINT_EVENT)
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(&e.payload).ok())
        .filter_map(|p| p["queryBase"].as_str().map(str::to_owned))
        .collect();
    if unfinished.is_empty() && bases.is_empty() {
        return Ok(Vec::new());
    }
    let mut matches: Vec<String> = Vec::new();
    if !unfinished.is_empty() {
        let ids = unfinished
            .iter()
            .map(|id| stb_ddl::string_literal(id))
            .collect::<Vec<_>>()
            .join(", ");
        matches.push(format!("query_id IN ({ids})"));
    }
    matches.extend(
        bases
            .iter()
            .map(|base| format!("startsWith(query_id, {})", stb_ddl::string_literal(base))),
    );
    let filter = matches.join(" OR ");
    let running = client
        .query(&format!(
            "SELECT query_id FROM system.processes WHERE {filter}"
        ))
        .map_err(error)?;
    let running: Vec<String> = (0..running.data.len())
        .filter_map(|r| running.text(r, "query_id"))
        .collect();
    if !running.is_empty() {
        client
            .execute(&format!("KILL QUERY WHERE {filter} SYNC"), None)
            .map_err(error)?;
    }
    Ok(running)
}
