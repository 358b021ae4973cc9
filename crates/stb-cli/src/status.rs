//! `stb status`: the target lock, live runs, and per source and model whether rows are
//! arriving and how fresh the newest row is (see `stb_engine::status`).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use stb_engine::status::{ProjectStatus, RelationStatus};

use crate::output::{Failure, fail, print_json};

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// How far back activity counts (a duration: `120s`, `5m`).
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    window: String,
    #[command(flatten)]
    common: crate::args::TargetArgs,
}

pub(crate) fn run(args: &StatusArgs) -> ExitCode {
    let json = args.common.json;
    let Some(window_seconds) = stb_project::parse_duration(&args.window).filter(|s| *s > 0) else {
        return fail(
            &Failure {
                code: "STB-STATUS-001",
                message: format!("--window '{}' is not a duration", args.window),
                hint: "use a duration such as 120s, 5m or 1h".into(),
            },
            json,
        );
    };
    let (project, compiled) = match args
        .common
        .project
        .compile(json, args.common.connection.database.as_deref())
    {
        Ok(compiled) => compiled,
        Err(code) => return code,
    };
    let (client, database) = match args.common.connection.connect(&project) {
        Ok(connected) => connected,
        Err(failure) => return fail(&failure, json),
    };
    let windows = crate::run_context::windows(&project);
    match stb_engine::status::read(
        &client,
        &database,
        &project,
        &compiled,
        window_seconds,
        windows,
    ) {
        Ok(status) if json => {
            print_json(&status);
            ExitCode::SUCCESS
        }
        Ok(status) => {
            print_text(&status);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}

fn print_text(status: &ProjectStatus) {
    let mut out = std::io::stdout().lock();
    let evidence = match (
        status.capabilities.query_views_log,
        status.capabilities.part_log,
    ) {
        (true, true) => "query views log and part log",
        (true, false) => "query views log",
        (false, true) => "part log",
        (false, false) => "part modification times only (approximate)",
    };
    let _ = writeln!(
        out,
        "Target '{}' at {} (activity over the last {} s, from the {evidence})",
        status.database, status.captured_at, status.window_seconds
    );
    let _ = writeln!(
        out,
        "Lock: {}",
        status
            .lock_holder
            .as_deref()
            .map_or_else(|| "free".to_owned(), |run| format!("held by run {run}"))
    );
    if status.live_runs.is_empty() {
        let _ = writeln!(out, "Live runs: none");
    }
    for run in &status.live_runs {
        let _ = writeln!(
            out,
            "Live run {} ({}, {}): {}",
            stb_engine::runs::short_id(&run.invocation_id),
            run.status,
            run.command.as_deref().unwrap_or("?"),
            run.scope.join(", ")
        );
    }
    let target = &status.target;
    if let (Some(message), Some(mend)) = (&target.message, &target.mend) {
        let _ = writeln!(
            out,
            "TARGET {}: {message}\n  mend it with: {mend}",
            target.state.replace('_', "-").to_uppercase()
        );
    }
    for (title, relations) in [("Sources", &status.sources), ("Models", &status.models)] {
        let _ = writeln!(out, "\n{title}:");
        for relation in relations {
            let _ = writeln!(out, "  {}", line(relation));
        }
    }
}

fn line(relation: &RelationStatus) -> String {
    let name = format!("{} ({})", relation.name, relation.kind);
    if relation.relation.is_some() && !relation.built {
        return format!("{name}: not built");
    }
    let missing: Vec<&str> = relation
        .relations
        .iter()
        .filter(|r| !r.present)
        .map(|r| r.name.as_str())
        .collect();
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(" INCOMPLETE, missing {};", missing.join(", "))
    };
    let rows = match (relation.rows, relation.bytes) {
        (Some(n), Some(bytes)) => format!("{n} rows in {bytes} bytes"),
        (Some(n), None) => format!("{n} rows"),
        (None, _) => "rows unknown".to_owned(),
    };
    let activity = relation.activity.as_ref().map_or_else(
        || "no writes to watch".to_owned(),
        |a| {
            let last = a
                .last_write_at
                .as_deref()
                .map(|t| format!(", last write {t}"))
                .unwrap_or_default();
            let approximate = if a.approximate { " ~approximate" } else { "" };
            format!(
                "{}{approximate} ({} rows written in the window{last})",
                a.state, a.rows_written
            )
        },
    );
    let fresh = &relation.freshness;
    let lag = fresh
        .lag_seconds
        .map(|s| format!(", newest row {s} s old"))
        .unwrap_or_default();
    let expected = match (fresh.warn_after_seconds, fresh.error_after_seconds) {
        (None, None) => String::new(),
        (warn, error) => format!(
            " (warn after {}, error after {})",
            warn.map_or("-".to_owned(), |s| format!("{s} s")),
            error.map_or("-".to_owned(), |s| format!("{s} s"))
        ),
    };
    format!(
        "{name}:{missing} {rows}; {activity}; freshness {}{lag}{expected}",
        fresh.state
    )
}
