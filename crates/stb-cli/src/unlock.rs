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
    let broken_by = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned()),
        std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown".to_owned())
    );
    match stb_engine::unlock::break_stale_lock(&client, &database, &broken_by) {
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
        Err(error) => fail(&Failure::from(error), args.json),
    }
}
