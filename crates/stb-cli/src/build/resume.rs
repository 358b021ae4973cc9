//! `stb build --resume RUN`: compile, connect and call
//! [`stb_engine::build::resume::resume`], which checks the suspended run can go on
//! exactly and finishes it; then print how it ended.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stb_build::execute::Status;
use stb_engine::build::RunIdentity;
use stb_engine::build::resume::{Request, Resumed};

use super::BuildArgs;
use crate::output::{Failure, fail};

pub(super) fn run(args: &BuildArgs, suspended: &str, run: RunIdentity) -> ExitCode {
    let (project, compiled) = match args
        .project
        .compile(args.json, args.connection.database.as_deref())
    {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    let (client, database) = match args.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, args.json),
    };
    if !args.auto_approve
        && !super::frontend::yes(&super::frontend::ask(&format!(
            "Resume run {suspended} from the chunk where it stopped? [y/N] "
        )))
    {
        let _ = writeln!(std::io::stdout().lock(), "Resume cancelled.");
        return ExitCode::from(1);
    }
    if let Err(error) = stb_engine::build::open(&client, &database, &project, &compiled, &run) {
        return fail(&Failure::from(error), args.json);
    }
    let request = Request {
        project: &project,
        compiled: &compiled,
        client: Arc::new(client),
        database,
        run,
        suspended: suspended.to_owned(),
        windows: crate::run_context::windows(&project),
    };
    let frontend = super::frontend::Terminal {
        args,
        project: &project,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    match stb_engine::build::resume::resume(&request, &frontend, &cancel) {
        Ok(resumed) => render(args, &resumed),
        Err(error) => fail(&Failure::from(error), args.json),
    }
}

fn render(args: &BuildArgs, resumed: &Resumed) -> ExitCode {
    let execution = &resumed.ran.execution;
    if args.json {
        crate::output::print_json(&resumed.summary);
    } else if !args.events {
        let checked = &resumed.checked;
        let mut out = std::io::stdout().lock();
        let headline = match execution.status {
            Status::Succeeded => "Resumed Build Complete",
            Status::Failed => "Resumed Build Failed",
            Status::Cancelled => "Resumed Build Cancelled",
        };
        let _ = writeln!(out, "\n{headline}");
        let _ = writeln!(out, "  resumed   {}", checked.resumed_from);
        let _ = writeln!(
            out,
            "  replay    {} from chunk {} of {} (chunk {} was {} when it stopped)",
            checked.model,
            checked.first_chunk,
            checked.chunks,
            checked.stopped_in_chunk,
            checked.stopped_chunk_state.replace('_', " ")
        );
        for (model, rows) in &execution.replays {
            let rows = rows.map_or_else(|| "unavailable".to_owned(), |r| r.to_string());
            let _ = writeln!(out, "  {model}  warehouse-written rows (this run): {rows}");
        }
        if let Some(message) = &execution.error_message {
            let _ = writeln!(out, "\nStopped: {message}");
        }
        drop(out);
        if !resumed.audits.is_empty() {
            crate::quality::print_lines(&resumed.audits);
        }
    }
    for note in resumed.ended.notes.iter().chain(&execution.warnings) {
        crate::build_render::warn(note);
    }
    u8::try_from(resumed.ended.exit_code).map_or(ExitCode::from(1), ExitCode::from)
}
