//! How a build reads: what a finished build prints (its report as text; its `--json`
//! summary is the engine's), and what it shows while it runs (with `--events`, every event
//! as a JSON line on stdout; at a terminal, a live line on stderr for a long statement:
//! rows read of the warehouse's estimate, the share done, for an offsets replay the share
//! of its window written and an ETA, and the time so far).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use stb_build::execute::{Execution, Status};
use std::process::ExitCode;

use stb_engine::build::operation::{Outcome, PhaseOutcome, PhaseResult, SKIPPED};
use stb_engine::build::records::EventHook;
use stb_engine::build::{AUDIT_CODE, FAILED_CODE};
use stb_engine::plan::{Plan, Prepared};

/// What the renderings need of `stb build`'s flags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub(crate) json: bool,
    pub(crate) events: bool,
}

/// Prints a warning the build survives on stderr.
pub(crate) fn warn(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

/// How the build ended, as text or JSON, and its exit code.
pub(crate) fn outcome(args: Output, database: &str, outcome: Outcome) -> ExitCode {
    let exit = |code: i32| u8::try_from(code).map_or(ExitCode::from(1), ExitCode::from);
    match outcome {
        Outcome::Stopped { error, exit_code } => {
            let failed = crate::output::fail(&crate::output::Failure::from(error), args.json);
            u8::try_from(exit_code).map_or(failed, ExitCode::from)
        }
        Outcome::Invalid(invalid) => crate::output::report(invalid, args.json),
        Outcome::NothingChanged { mode, message } => {
            if args.json {
                crate::output::print_json(
                    &serde_json::json!({"mode": mode, "database": database, "status": "nothing_changed", "message": message}),
                );
            } else {
                let _ = writeln!(std::io::stdout().lock(), "{message}");
            }
            ExitCode::SUCCESS
        }
        Outcome::Declined => {
            let _ = writeln!(std::io::stdout().lock(), "Build cancelled.");
            ExitCode::from(1)
        }
        Outcome::Ran {
            plan,
            phases,
            exit_code,
        } => {
            if let Plan::Mixed { .. } = *plan {
                mixed(args, &plan, &phases);
            } else if let [PhaseOutcome { kind, result }] = phases.as_slice()
                && let Some(prepared) = plan.part(kind)
            {
                single(args, prepared, result);
            }
            exit(exit_code)
        }
    }
}

/// A direct or virtual build that ran: its summary (`--json`), or its report (text), and
/// the errors a failed step or failed build audits leave on stderr.
pub(crate) fn single(args: Output, prepared: &Prepared, result: &PhaseResult) {
    let PhaseResult::Ran {
        ran,
        audits,
        summary,
        ended,
        notes,
    } = result
    else {
        return;
    };
    if args.json {
        crate::output::print_json(summary);
    } else if !args.events {
        print_result(prepared, &ran.execution, audits, notes);
    }
    if !notes.is_empty() && (args.json || args.events) {
        for note in notes {
            warn(note);
        }
    }
    let execution = &ran.execution;
    if execution.status == Status::Failed {
        let hint = if execution.suspended.is_some() {
            "fix the cause, then `stb build --resume` the run (the note above names it) to finish from the chunk where it stopped, or `stb unlock` to give the target back"
        } else {
            "fix the cause and rerun the same build; a rerun rebuilds the whole scope from retained history"
        };
        crate::output::eprint_styled(&format!(
            "error[{FAILED_CODE}]: step {} failed: {}\n  hint: {hint}\n",
            execution.failed_step.as_deref().unwrap_or("?"),
            execution.error_message.as_deref().unwrap_or("")
        ));
    }
    if !ended.audit_failures.is_empty() {
        crate::output::eprint_styled(&format!(
            "error[{AUDIT_CODE}]: build audits failed: {}\n  hint: the build itself is applied; fix the data or the model and rebuild, or see `stb audit`\n",
            ended.audit_failures.join(", ")
        ));
    }
}

/// A mixed build that ran: each phase's report in order (text), or both summaries under
/// one document (`--json`).
pub(crate) fn mixed(args: Output, plan: &Plan, phases: &[PhaseOutcome]) {
    let machine = args.json || args.events;
    let mut summaries = serde_json::Map::new();
    summaries.insert(
        "virtual".into(),
        serde_json::json!({"status": "nothing_changed", "message": stb_engine::build::operation::NO_DEPLOYMENT}),
    );
    for phase in phases {
        let Some(prepared) = plan.part(phase.kind) else {
            continue;
        };
        let summary = match &phase.result {
            PhaseResult::Failed(error) => {
                serde_json::json!({"status": "failed", "error": {"code": error.code, "message": error.message}})
            }
            PhaseResult::Skipped => {
                if !machine {
                    let _ = writeln!(std::io::stdout().lock(), "\n{SKIPPED}");
                }
                serde_json::json!({"status": "skipped", "message": SKIPPED})
            }
            PhaseResult::Ran {
                ran,
                audits,
                summary,
                notes,
                ..
            } => {
                if machine {
                    notes.iter().for_each(|note| warn(note));
                } else {
                    let _ = writeln!(
                        std::io::stdout().lock(),
                        "\nPhase {} {}",
                        if phase.kind == "virtual" {
                            "1/2"
                        } else {
                            "2/2"
                        },
                        phase.kind.to_uppercase()
                    );
                    print_result(prepared, &ran.execution, audits, notes);
                }
                let staged = phases
                    .iter()
                    .find(|p| p.kind == "virtual")
                    .and_then(|p| plan.part(p.kind))
                    .and_then(|p| p.planned.deployment.as_ref());
                if phase.kind == "direct"
                    && ran.execution.status != Status::Succeeded
                    && let Some(deployment) = staged
                {
                    warn(&format!(
                        "the direct phase did not succeed; deployment {} remains staged",
                        deployment.id
                    ));
                }
                summary.clone()
            }
        };
        summaries.insert(phase.kind.into(), summary);
    }
    if args.json {
        crate::output::print_json(&serde_json::json!({
            "mode": "mixed",
            "execution_order": ["virtual", "direct"],
            "virtual": summaries.remove("virtual"),
            "direct": summaries.remove("direct"),
        }));
    } else if !phases.iter().any(|p| p.kind == "virtual") {
        let _ = writeln!(
            std::io::stdout().lock(),
            "\nPhase 1/2 VIRTUAL: no changes, the active deployment matches the project; no deployment was built."
        );
    }
}

pub(crate) fn print_result(
    prepared: &Prepared,
    execution: &Execution,
    audits: &[stb_engine::audits::AuditResult],
    notes: &[String],
) {
    let mut out = std::io::stdout().lock();
    let plan = &prepared.planned.plan;
    let deployment = prepared.planned.deployment.as_ref();
    let kind = if deployment.is_some() {
        "Virtual"
    } else {
        "Direct"
    };
    match execution.status {
        Status::Succeeded => {
            let _ = writeln!(out, "\n{kind} Build Complete");
        }
        Status::Failed => {
            let _ = writeln!(out, "\n{kind} Build Failed");
        }
        Status::Cancelled => {
            let _ = writeln!(
                out,
                "\nCancelled  Build interrupted and recorded as cancelled."
            );
        }
    }
    let _ = writeln!(out, "  adapter   clickhouse");
    match deployment {
        Some(deployment) => {
            let _ = writeln!(out, "  mode      virtual environments");
            let _ = writeln!(out, "  deployment  {}", deployment.id);
            let _ = writeln!(out, "  created at  {} UTC", deployment.id.created_at());
        }
        None => {
            let _ = writeln!(out, "  mode      direct");
        }
    }
    let _ = writeln!(out, "  database  {}", prepared.planned.workflow.database);
    if let Some(start) = &prepared.planned.start_time {
        let _ = writeln!(out, "  start     {start} UTC");
    }
    let _ = writeln!(
        out,
        "  replay roots executed  {}/{}",
        execution.replays.len(),
        prepared.planned.workflow.roots.len()
    );
    let _ = writeln!(out, "\nRelations");
    match &execution.restored {
        Some(restored) if !restored.errors.is_empty() => {
            let _ = writeln!(
                out,
                "  NOT fully given back: {} of {} statements failed (see the error); run `stb unlock`",
                restored.errors.len(),
                restored.statements.len()
            );
        }
        _ if execution.suspended.is_some() => {
            let _ = writeln!(
                out,
                "  SUSPENDED: kept as built so far, partly filled, under the target lock (dropped {}, created {})",
                plan.teardown.len(),
                plan.creation.len()
            );
        }
        Some(restored) if !restored.finished => {
            let _ = writeln!(
                out,
                "  given back as the build found them ({} statements); nothing created, nothing dropped",
                restored.statements.len()
            );
        }
        _ => {
            if deployment.is_none() {
                let _ = writeln!(out, "  dropped  {}", plan.teardown.len());
            }
            let _ = writeln!(out, "  created  {}", plan.creation.len());
        }
    }
    if !execution.captured_roots.is_empty() {
        let _ = writeln!(out, "\nReplay boundaries");
        for root in &execution.captured_roots {
            let _ = writeln!(
                out,
                "  {} replays {} where {}",
                root.model, root.driving_input, root.predicate
            );
            for covered in &root.coverage {
                let _ = writeln!(out, "    covers {}", describe_coverage(covered));
            }
        }
    }
    if !execution.replays.is_empty() {
        let _ = writeln!(out, "\nReplay execution");
        for (model, rows) in &execution.replays {
            let rows = rows.map_or_else(|| "unavailable".to_owned(), |r| r.to_string());
            let _ = writeln!(out, "  {model}  warehouse-written rows: {rows}");
        }
    }
    if !execution.seeds.is_empty() {
        let _ = writeln!(out, "\nSeeds (rows before the start, from the active copy)");
        for (model, rows) in &execution.seeds {
            let rows = rows.map_or_else(|| "unavailable".to_owned(), |r| r.to_string());
            let _ = writeln!(out, "  {model}  warehouse-written rows: {rows}");
        }
    }
    let shrinking = prepared.planned.shrinking();
    if !shrinking.is_empty() {
        let _ = writeln!(out, "\nAccepted loss");
        for window in shrinking {
            let _ = writeln!(out, "  {}", window.describe());
        }
    }
    if !audits.is_empty() {
        let _ = writeln!(out, "\nAudits");
        drop(out);
        crate::quality::print_lines(audits);
        out = std::io::stdout().lock();
    }
    if let Some(step) = &execution.failed_step {
        let _ = writeln!(
            out,
            "\nStopped at {step}: {}",
            execution.error_message.as_deref().unwrap_or("")
        );
        if let Some(suspended) = &execution.suspended {
            let _ = writeln!(
                out,
                "  Suspended: the replay of {} goes on from chunk {} of {} with `stb build --resume`; until then what it built is partly filled.",
                suspended.model, suspended.next_chunk, suspended.chunks
            );
        } else {
            let _ = writeln!(
                out,
                "  The scope may be half rebuilt. Rerun the same build: it drops and recreates the whole scope and replays from retained history."
            );
        }
    }
    if let (Some(deployment), Status::Succeeded) = (deployment, execution.status) {
        let _ = writeln!(
            out,
            "\nStaged beside production; readers still see the active deployment.\nNext: stb deployment promote {}",
            deployment.id
        );
    }
    for note in notes.iter().chain(&execution.warnings) {
        let _ = writeln!(out, "\nwarning: {note}");
    }
}

/// `partition 0: _replay_offset 0 to 149 (cutoff 149, inclusive)`.
fn describe_coverage(covered: &stb_plan::replay::Coverage) -> String {
    let scope = covered
        .partition_value
        .as_ref()
        .map_or_else(String::new, |p| format!("partition {p}: "));
    match (&covered.lower_value, &covered.upper_value) {
        (Some(lower), Some(upper)) => format!(
            "{scope}{} {lower} to {upper} (cutoff {}, {})",
            covered.source_position_column_name,
            covered.replay_cutoff_value.as_deref().unwrap_or("none"),
            if covered.cutoff_inclusive {
                "inclusive"
            } else {
                "exclusive"
            }
        ),
        _ => format!("{scope}nothing: the window was empty"),
    }
}

/// The hook for `args`: JSON lines, a progress line, or nothing (`--json`, or no
/// terminal).
pub(crate) fn event_hook(events: bool, json: bool) -> Option<EventHook> {
    if events {
        return Some(Box::new(|line: &serde_json::Value| {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }));
    }
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    // A progress line is open until its statement completes.
    let open = AtomicBool::new(false);
    Some(Box::new(move |line: &serde_json::Value| {
        let mut err = std::io::stderr().lock();
        match line["event"].as_str() {
            Some("statement_progress") => {
                let percent = line["percent"]
                    .as_f64()
                    .map(|p| format!(" ({p:.0}%)"))
                    .unwrap_or_default();
                // A chunked replay's statements are its chunks: say which one runs.
                let chunk = match (line["chunk"].as_u64(), line["chunks"].as_u64()) {
                    (Some(number), Some(of)) => format!(" (chunk {number} of {of})"),
                    _ => String::new(),
                };
                let _ = write!(
                    err,
                    "\r\x1b[K  {}{chunk}: {} of ~{} rows read{percent}{}, {:.0} s",
                    line["displayName"].as_str().unwrap_or("statement"),
                    line["readRows"],
                    line["totalRowsApprox"],
                    replayed(line),
                    line["elapsedMs"].as_f64().unwrap_or(0.0) / 1000.0
                );
                let _ = err.flush();
                open.store(true, Ordering::SeqCst);
            }
            Some("statement_completed") if open.swap(false, Ordering::SeqCst) => {
                let _ = writeln!(err);
            }
            _ => {}
        }
    }))
}

/// `, 38% of the replay window written, ETA 4 s` for an offsets replay's progress.
fn replayed(line: &serde_json::Value) -> String {
    let Some(percent) = line["replayPercent"].as_f64() else {
        return String::new();
    };
    let eta = line["etaMs"]
        .as_f64()
        .map(|ms| format!(", ETA {:.0} s", ms / 1000.0))
        .unwrap_or_default();
    format!(", {percent:.0}% of the replay window written{eta}")
}
