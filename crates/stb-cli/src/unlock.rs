//! `stb unlock`: the documented way out of a lock left by a killed command.
//!
//! The lock is never taken over by age. An operator breaks it on purpose, and only when the
//! run that holds it has stopped heartbeating; the break is recorded in that run's own event
//! stream, so whoever reads the run later sees who ended it.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_warehouse::{Client, TargetLock, lock_holder, metadata};

use crate::args::ConnectionArgs;
use crate::args::ProjectArgs;
use crate::output::{Failure, fail, print_json};

/// A run whose last event is younger than this is alive (heartbeats come every 10 s).
const ALIVE_WITHIN_MS: i64 = 45_000;

#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &UnlockArgs) -> ExitCode {
    let project = match args.project.discover(args.json) {
        Ok((_, project)) => project,
        Err(code) => return code,
    };
    let (client, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    match unlock(&client, &database) {
        Ok(None) => {
            if args.json {
                print_json(&serde_json::json!({"database": database, "locked": false}));
            } else {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "No mutation lock on '{database}'; nothing to do"
                );
            }
            ExitCode::SUCCESS
        }
        Ok(Some(owner)) => {
            if args.json {
                print_json(&serde_json::json!({
                    "database": database, "locked": false, "broken_owner": owner
                }));
            } else {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "Broke the mutation lock on '{database}' held by run '{owner}'; the break is recorded in that run's events"
                );
            }
            ExitCode::SUCCESS
        }
        Err(failure) => fail(&failure, args.json),
    }
}

/// Breaks the lock when its run is silent; the owner broken, or `None` when unlocked.
fn unlock(client: &Client, database: &str) -> Result<Option<String>, Failure> {
    let Some(owner) = lock_holder(client, database).map_err(|e| Failure::from(&e))? else {
        return Ok(None);
    };
    if let Some(silent_ms) = last_signal_age_ms(client, database, &owner)?
        && silent_ms < ALIVE_WITHIN_MS
    {
        return Err(Failure {
            code: "STB-LOCK-003",
            message: format!(
                "Run '{owner}' holds the mutation lock on '{database}' and is still running (last signal {} s ago)",
                silent_ms / 1000
            ),
            hint: "let it finish, or stop its process; a stopped run's lock can be broken 45 s after its last heartbeat".to_owned(),
        });
    }
    TargetLock::of_owner(client, database, &owner)
        .release()
        .map_err(|e| Failure::from(&e))?;
    record_break(client, database, &owner)?;
    Ok(Some(owner))
}

/// Milliseconds since the run's last event by the warehouse clock, if it left any.
fn last_signal_age_ms(
    client: &Client,
    database: &str,
    owner: &str,
) -> Result<Option<i64>, Failure> {
    let events = format!("{}._streambuild_run_events", stb_ddl::identifier(database));
    let exists = client
        .table_exists(database, "_streambuild_run_events")
        .map_err(|e| Failure::from(&e))?;
    if !exists {
        return Ok(None);
    }
    let rows = client
        .query(&format!(
            "SELECT count() AS n, dateDiff('millisecond', max(emitted_at), now64(3, 'UTC')) AS age FROM {events} WHERE invocation_id = {}",
            stb_ddl::string_literal(owner)
        ))
        .map_err(|e| Failure::from(&e))?;
    if rows.text(0, "n").as_deref() == Some("0") {
        return Ok(None);
    }
    Ok(rows.text(0, "age").and_then(|age| age.parse().ok()))
}

/// Appends a `lock_broken` event to the broken run's stream.
fn record_break(client: &Client, database: &str, owner: &str) -> Result<(), Failure> {
    metadata::migrate(client, database).map_err(|e| Failure::from(&e))?;
    let events = format!("{}._streambuild_run_events", stb_ddl::identifier(database));
    let by = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned()),
        std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown".to_owned())
    );
    let payload = serde_json::json!({"brokenBy": by, "database": database}).to_string();
    client
        .execute(
            &format!(
                "INSERT INTO {events} (invocation_id, sequence, event_kind, payload_json) SELECT {owner}, (SELECT max(sequence) FROM {events} WHERE invocation_id = {owner}) + 1, 'lock_broken', {payload}",
                owner = stb_ddl::string_literal(owner),
                payload = stb_ddl::string_literal(&payload)
            ),
            None,
        )
        .map_err(|e| Failure::from(&e))?;
    Ok(())
}
