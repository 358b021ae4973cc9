//! What a finished build prints as text (its `--json` summary is the engine's).

use std::io::Write;

use stb_build::execute::{Execution, Status};
use stb_engine::build::operation::{PhaseOutcome, PhaseResult, SKIPPED};
use stb_engine::build::{AUDIT_CODE, FAILED_CODE};
use stb_engine::plan::{Plan, Prepared};

use super::{BuildArgs, warn};

/// A direct or virtual build that ran: its summary (`--json`), or its report (text), and
/// the errors a failed step or failed build audits leave on stderr.
pub(super) fn single(args: &BuildArgs, prepared: &Prepared, result: &PhaseResult) {
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
        crate::output::eprint_styled(&format!(
            "error[{FAILED_CODE}]: step {} failed: {}\n  hint: fix the cause and rerun the same build; a rerun rebuilds the whole scope from retained history\n",
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
pub(super) fn mixed(args: &BuildArgs, plan: &Plan, phases: &[PhaseOutcome]) {
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

pub(super) fn print_result(
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
        let _ = writeln!(
            out,
            "  The scope may be half rebuilt. Rerun the same build: it drops and recreates the whole scope and replays from retained history."
        );
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
