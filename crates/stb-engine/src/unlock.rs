//! Breaking a target lock left by a killed command: never by age alone. The lock is broken
//! only when the run that holds it has stopped heartbeating, and the break is recorded in
//! that run's own event stream, so whoever reads the run later sees who ended it.

use stb_warehouse::events::{append_lock_broken, last_event_age_ms};
use stb_warehouse::{Client, TargetLock, lock_holder};

use crate::EngineError;

/// The lock's run still heartbeats.
pub const ALIVE_CODE: &str = "STB-LOCK-003";

/// A lock broken, and what of its run was still running in the warehouse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub owner: String,
    /// Statements of the run still executing in the warehouse, killed before the break: a
    /// killed client's query can outlive it and would write into what the next build
    /// replaces.
    pub killed_queries: Vec<String>,
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
    if let Some(silent_ms) = silent
        && silent_ms < alive_within_ms
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
    let killed_queries = kill_unfinished(client, database, &owner)?;
    TargetLock::of_owner(client, database, &owner)
        .release()
        .map_err(|e| EngineError::from(&e))?;
    append_lock_broken(client, database, &owner, broken_by).map_err(|e| EngineError::from(&e))?;
    Ok(Some(Broken {
        owner,
        killed_queries,
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
    if unfinished.is_empty() {
        return Ok(Vec::new());
    }
    let ids = unfinished
        .iter()
        .map(|id| stb_ddl::string_literal(id))
        .collect::<Vec<_>>()
        .join(", ");
    let running = client
        .query(&format!(
            "SELECT query_id FROM system.processes WHERE query_id IN ({ids})"
        ))
        .map_err(error)?;
    let running: Vec<String> = (0..running.data.len())
        .filter_map(|r| running.text(r, "query_id"))
        .collect();
    if !running.is_empty() {
        client
            .execute(&format!("KILL QUERY WHERE query_id IN ({ids}) SYNC"), None)
            .map_err(error)?;
    }
    Ok(running)
}
