//! Breaking a target lock left by a killed command: never by age alone. The lock is broken
//! only when the run that holds it has stopped heartbeating, and the break is recorded in
//! that run's own event stream, so whoever reads the run later sees who ended it.

use stb_warehouse::events::{append_lock_broken, last_event_age_ms};
use stb_warehouse::{Client, TargetLock, lock_holder};

use crate::EngineError;

/// A run whose last event is younger than this is alive (heartbeats come every 10 s).
pub const ALIVE_WITHIN_MS: i64 = 45_000;
/// The lock's run still heartbeats.
pub const ALIVE_CODE: &str = "STB-LOCK-003";

/// Breaks `database`'s lock when its run is silent; the owner broken, or `None` when
/// nothing held it. `broken_by` says who, for the record.
///
/// # Errors
/// The holder still heartbeats (`STB-LOCK-003`), or the warehouse refused a step.
pub fn break_stale_lock(
    client: &Client,
    database: &str,
    broken_by: &str,
) -> Result<Option<String>, EngineError> {
    let Some(owner) = lock_holder(client, database).map_err(|e| EngineError::from(&e))? else {
        return Ok(None);
    };
    let silent = last_event_age_ms(client, database, &owner).map_err(|e| EngineError::from(&e))?;
    if let Some(silent_ms) = silent
        && silent_ms < ALIVE_WITHIN_MS
    {
        return Err(EngineError::new(
            ALIVE_CODE,
            format!(
                "Run '{owner}' holds the mutation lock on '{database}' and is still running (last signal {} s ago)",
                silent_ms / 1000
            ),
            "let it finish, or stop its process; a stopped run's lock can be broken 45 s after its last heartbeat",
        ));
    }
    TargetLock::of_owner(client, database, &owner)
        .release()
        .map_err(|e| EngineError::from(&e))?;
    append_lock_broken(client, database, &owner, broken_by).map_err(|e| EngineError::from(&e))?;
    Ok(Some(owner))
}
