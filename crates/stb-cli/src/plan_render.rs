//! How a direct plan reads: the text `stb plan` and `stb build` print, and the JSON of
//! `stb plan --json` and `target/run/plan/plan.json`.

use std::collections::BTreeSet;
use std::io::Write;

use stb_engine::direct::{NOTHING_CHANGED, Planned};
use stb_plan::options::StartTime;

use crate::output::print_json;

/// Diff lines shown per model unless `--verbose`.
const DIFF_LINES: usize = 12;

/// The text lines of the shrink guard (empty when the plan replays nothing).
pub(crate) fn write_replay_windows(planned: &Planned, out: &mut dyn Write) {
    if planned.replay_windows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nReplay windows (now vs what retained history restores)"
    );
    for window in &planned.replay_windows {
        let mark = if window.needs_consent() { "!" } else { " " };
        let _ = writeln!(out, " {mark} {}", window.describe());
    }
    let shrink = planned.shrink_summary();
    if shrink.needs_allow_shrink {
        let _ = writeln!(
            out,
            "\nSHRINK: this rebuild would lose {} rows of {} that retained history cannot restore; `stb build` refuses it unless --allow-shrink is given",
            shrink.lost_rows,
            shrink.models.join(", ")
        );
    }
}

pub(crate) fn print(planned: &Planned, as_json: bool, verbose: bool) {
    if as_json {
        print_json(&json(planned));
        return;
    }
    let mut out = std::io::stdout().lock();
    if planned.nothing_changed {
        let _ = writeln!(out, "{NOTHING_CHANGED}");
        return;
    }
    let _ = writeln!(out, "Direct plan  {}", planned.database);
    let _ = writeln!(out, "\nRebuild paths");
    for root in planned.roots() {
        let _ = writeln!(
            out,
            "  [replay source] {} [{}]",
            root.driving_input,
            root.template.anchor.mode.as_str()
        );
        if root.waits_for.is_empty() {
            let _ = writeln!(out, "  └── [replay root] {}", root.model);
        } else {
            let _ = writeln!(
                out,
                "  └── [replay root] {}  (stage {}: joins {}, rebuilt in this build; its view is created and it replays once {} complete)",
                root.model,
                root.stage,
                root.waits_for.join(", "),
                if root.waits_for.len() == 1 {
                    "that is"
                } else {
                    "they are"
                }
            );
        }
        for model in &root.propagated {
            let _ = writeln!(out, "      └── [rebuild] {model}");
        }
    }
    let under_root: BTreeSet<&str> = planned
        .plan
        .replay_roots
        .iter()
        .flat_map(|r| {
            std::iter::once(r.model.as_str()).chain(r.propagated.iter().map(String::as_str))
        })
        .collect();
    for entry in planned
        .plan
        .entries
        .iter()
        .filter(|e| !under_root.contains(e.model.as_str()))
    {
        let _ = writeln!(out, "  [rebuild] {}", entry.model);
    }
    let _ = writeln!(out, "\nModel decisions");
    for (entry, (_, change)) in planned.plan.entries.iter().zip(&planned.changes) {
        let _ = writeln!(
            out,
            "  {}  {}  (reason: {})",
            entry.model,
            change.status.as_str(),
            entry.reason.as_str()
        );
        let lines: Vec<&str> = change.unified_diff.lines().collect();
        let shown = if verbose {
            lines.len()
        } else {
            lines.len().min(DIFF_LINES)
        };
        for line in &lines[..shown] {
            let _ = writeln!(out, "      {line}");
        }
        if shown < lines.len() {
            let _ = writeln!(
                out,
                "      ... {} more lines (--verbose)",
                lines.len() - shown
            );
        }
    }
    if !planned.recreations.is_empty() {
        let _ = writeln!(out, "\nSource recreations");
        for (source, changes) in &planned.recreations {
            let _ = writeln!(
                out,
                "  kafka__{source} is recreated, its landing table and rows kept: {}",
                changes.join(", ")
            );
        }
    }
    if !planned.repairs.is_empty() {
        let _ = writeln!(out, "\nLanding repairs");
        for (source, missing) in &planned.repairs {
            let _ = writeln!(
                out,
                "  {source}: {} missing, recreated from the declaration (landing table and its rows kept; the consumer group resumes from its committed offsets)",
                missing.join(" and ")
            );
        }
    }
    if let Some(start) = &planned.start_time {
        let _ = writeln!(
            out,
            "\nStart time  {start} UTC (history before it is not rebuilt)"
        );
    }
    write_replay_windows(planned, &mut out);
    if !planned.plan.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for warning in &planned.plan.warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    if let Some(validated) = &planned.validated {
        let _ = writeln!(
            out,
            "\nChecked against the warehouse: {} statements passed ({} ms)",
            validated.checked, validated.elapsed_ms
        );
        for unchecked in &validated.unchecked {
            let _ = writeln!(
                out,
                "  not checked: {}: {}",
                unchecked.model, unchecked.reason
            );
        }
    }
    let relations: usize = planned.plan.creation.len();
    let _ = writeln!(
        out,
        "\n{} models selected, {relations} relations rebuilt, {} replay roots",
        planned.plan.entries.len(),
        planned.plan.replay_roots.len()
    );
}

pub(crate) fn json(planned: &Planned) -> serde_json::Value {
    let kind = |k: &stb_plan::direct::RelationKind| k.as_str();
    let relations = planned.relations_by_model();
    let windows: std::collections::HashMap<&str, _> = planned
        .replay_windows
        .iter()
        .map(|w| (w.model.as_str(), w))
        .collect();
    serde_json::json!({
        "mode": "direct",
        "adapter": "clickhouse",
        "database": planned.database,
        "start_time": planned.start_time.as_ref().map(StartTime::as_str),
        "selection_mode": planned.selection_mode(),
        "entries": planned.plan.entries.iter().zip(&planned.changes).map(|(e, (_, c))| serde_json::json!({
            "model": e.model,
            "reason": e.reason.as_str(),
            "relation_names": relations.get(e.model.as_str()).cloned().unwrap_or_default(),
            "is_replay_root": e.is_replay_root,
            "sql_change": {
                "status": c.status.as_str(),
                "current_hash": c.current_hash,
                "previous_hash": c.previous_hash,
                "unified_diff": c.unified_diff,
            },
        })).collect::<Vec<_>>(),
        "prerequisite_scope": planned.plan.prerequisites.iter().map(|p| serde_json::json!({
            "name": p.name, "present": p.present, "framework_managed": p.framework_managed,
        })).collect::<Vec<_>>(),
        "execution_scope": planned.plan.entries.iter().map(|e| &e.model).collect::<Vec<_>>(),
        "replay_roots": planned.roots().iter().map(|r| serde_json::json!({
            "model": r.model,
            "model_key": {"name": r.model},
            "reason": if r.waits_for.is_empty() { "driving_input_not_rebuilt" } else { "side_input_rebuilt" },
            "stage": r.stage,
            "waits_for": r.waits_for,
            "bounded": r.bounded,
            "driving_input": r.driving_input,
            "driving_input_relation": r.template.anchor.relation,
            "replay_boundary_mode": r.template.anchor.mode.as_str(),
            "start_time_column": r.template.anchor.time_column,
            "skips_keys_already_written": r.template.skip_existing,
            "propagated_models": r.propagated,
            "settings": r.template.settings.iter().map(|(k, v)| serde_json::json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "replay_window": windows.get(r.model.as_str()),
        })).collect::<Vec<_>>(),
        "shrink": serde_json::to_value(planned.shrink_summary()).unwrap_or_default(),
        "teardown": planned.plan.teardown.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
        "creation": planned.plan.creation.iter().map(|(k, n)| serde_json::json!({"kind": kind(k), "relation": n})).collect::<Vec<_>>(),
        "source_recreations": planned.recreations.iter().map(|(source, changes)| serde_json::json!({
            "source": source, "changes": changes,
        })).collect::<Vec<_>>(),
        "landing_repairs": planned.repairs.iter().map(|(source, missing)| serde_json::json!({
            "source": source, "missing": missing,
        })).collect::<Vec<_>>(),
        "warnings": planned.plan.warnings,
        "validation": planned.validated,
        "plan_hash": planned.plan_hash(),
    })
}
