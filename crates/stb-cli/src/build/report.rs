//! What a finished build prints: the text report and the `--json` summary.

use std::io::Write;

use stb_build::execute::{Execution, Status};

use stb_engine::plan::Prepared;

pub(super) fn summary(
    prepared: &Prepared,
    execution: &Execution,
    audits: &[stb_engine::audits::AuditResult],
) -> serde_json::Value {
    let plan = &prepared.planned.plan;
    let deployment = prepared.planned.deployment.as_ref();
    serde_json::json!({
        "mode": if deployment.is_some() { "virtual environments" } else { "direct" },
        "deployment_id": deployment.map(|d| d.id.as_str()),
        "deployment_created_at": deployment.map(|d| d.id.created_at()),
        "adapter": "clickhouse",
        "database": prepared.planned.workflow.database,
        "status": execution.status,
        "start_time": prepared.planned.start_time.as_ref().map(|s| s.as_str().to_owned()),
        // What holds at the end: nothing, once a stopped build was undone.
        "dropped": plan.teardown.iter().filter(|_| applied(execution)).map(|(_, r)| r).collect::<Vec<_>>(),
        "created": plan.creation.iter().filter(|_| applied(execution)).map(|(_, r)| r).collect::<Vec<_>>(),
        "restored": execution.restored,
        "boundary_time": execution.captured_roots.first().and_then(|c| c.captured_at.clone()),
        "boundaries": execution.captured_roots,
        "replays": execution.replays.iter().map(|(model, rows)| serde_json::json!({
            "model": model, "written_rows": rows,
        })).collect::<Vec<_>>(),
        "seeds": execution.seeds.iter().map(|(model, rows)| serde_json::json!({
            "model": model, "written_rows": rows,
        })).collect::<Vec<_>>(),
        "completed_steps": execution.completed_steps.len(),
        "failed_step": execution.failed_step,
        "error_message": execution.error_message,
        "warnings": execution.warnings,
        "replay_windows": prepared.planned.replay_windows,
        "shrink": accepted_shrink(prepared),
        "audits": {
            "results": audits,
            "errors": audits.iter().filter(|a| a.is_error()).count(),
            "warnings": audits.iter().filter(|a| a.is_warning()).count(),
            "error_failure_count": audits.iter().filter(|a| a.is_error()).count(),
            "warning_failure_count": audits.iter().filter(|a| a.is_warning()).count(),
            "over_empty_relations": stb_engine::audits::over_empty_relations(audits),
        },
    })
}

/// True when the build's relations stand at the end: it succeeded, or it stopped after
/// every replay and was finished.
fn applied(execution: &Execution) -> bool {
    execution.status == Status::Succeeded
        || execution
            .restored
            .as_ref()
            .is_some_and(|r| r.finished && r.errors.is_empty())
}

/// The shrink guard's numbers; a build that ran past the guard with a loss accepted it.
fn accepted_shrink(prepared: &Prepared) -> serde_json::Value {
    let mut shrink = serde_json::to_value(prepared.planned.shrink_summary()).unwrap_or_default();
    if let Some(fields) = shrink.as_object_mut() {
        let accepted = !prepared.planned.shrinking().is_empty();
        fields.insert("accepted".into(), accepted.into());
    }
    shrink
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
