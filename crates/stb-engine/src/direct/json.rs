//! A direct plan as JSON: `stb plan --json`, `target/run/plan/plan.json` and the dev
//! server's `/api/plan` all print this value.

use stb_plan::options::StartTime;

use super::Planned;

/// The plan's JSON document (its maps sorted by key, as a `serde_json::Value`'s are).
#[must_use]
pub fn json(planned: &Planned) -> serde_json::Value {
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
