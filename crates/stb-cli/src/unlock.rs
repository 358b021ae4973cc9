//! `stb unlock`: the documented way out of a lock left by a killed command (see
//! `stb_engine::unlock`: broken only when its run stopped heartbeating, and recorded).

use std::io::Write;
use std::process::ExitCode;

pub(crate) use crate::args::TargetArgs as UnlockArgs;
use crate::output::{Failure, fail, print_json};

pub(crate) fn run(args: &UnlockArgs) -> ExitCode {
    let project = match args.project.discover(args.json) {
        Ok((_, project)) => project,
        Err(code) => return code,
    };
    let (client, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    let broken_by = crate::run_context::local_user();
    let alive_within_ms = crate::run_context::windows(&project).signal_ms;
    match stb_engine::unlock::break_stale_lock(&client, &database, &broken_by, alive_within_ms) {
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
        Ok(Some(broken)) => {
            if args.json {
                print_json(&serde_json::json!({
                    "database": database, "locked": false, "broken_owner": broken.owner,
                    "killed_queries": broken.killed_queries,
                    "given_back": broken.given_back.as_ref().map(|g| serde_json::json!({
                        "finished": g.finished, "statements": g.statements,
                    })),
                }));
            } else {
                let mut out = std::io::stdout().lock();
                if !broken.killed_queries.is_empty() {
                    let _ = writeln!(
                        out,
                        "Killed {} statement(s) of run '{}' still running in the warehouse",
                        broken.killed_queries.len(),
                        broken.owner
                    );
                }
                match &broken.given_back {
                    Some(given) if given.finished => {
                        let _ = writeln!(
                            out,
                            "Run '{}' had completed every replay: its build was finished ({} statements: landings resumed, previous copies dropped)",
                            broken.owner,
                            given.statements.len()
                        );
                    }
                    Some(given) => {
                        let _ = writeln!(
                            out,
                            "Gave the target back as run '{}' found it ({} statements: what it created dropped, previous tables and views back)",
                            broken.owner,
                            given.statements.len()
                        );
                    }
                    None => {}
                }
                let _ = writeln!(
                    out,
                    "Broke the mutation lock on '{database}' held by run '{}'; the break is recorded in that run's events",
                    broken.owner
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), args.json),
    }
}
