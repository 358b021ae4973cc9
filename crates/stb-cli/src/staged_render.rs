//! A virtual plan as text and as JSON (the reference's `virtual environments` shape, with
//! our additions: each object's model, root state and active deployment).

use std::fmt::Write as _;
use std::io::Write as _;

use stb_engine::staged::Planned;
use stb_plan::virtual_plan::{ChangeType, ExecutionMode, Subtree};

/// The step names a build of `subtree` (the `index`-th) would run, in order.
fn steps(index: usize, subtree: &Subtree, planned: &Planned) -> Vec<String> {
    let mut steps: Vec<String> = planned
        .shadow_objects
        .iter()
        .filter(|o| subtree.affected.contains(&o.logical_model_name))
        .map(|o| format!("plan-{index}-{}-{}", o.object_type, o.logical_key))
        .collect();
    for step in ["backfill", "audit", "publish"] {
        steps.push(format!("{step}-{index}-{}", subtree.root));
    }
    steps
}

fn change_label(change: ChangeType) -> &'static str {
    match change {
        ChangeType::Create => "create",
        ChangeType::Rebuild => "rebuild",
        ChangeType::NoOp => "no_op",
    }
}

fn mode_label(mode: ExecutionMode) -> &'static str {
    match mode {
        ExecutionMode::FullRebuild => "full_rebuild",
        ExecutionMode::SeededBoundedRebuild => "seeded_bounded_rebuild",
        ExecutionMode::UnseededBoundedRebuild => "unseeded_bounded_rebuild",
        ExecutionMode::Deploy => "deploy",
    }
}

/// The plan as JSON.
#[must_use]
pub(crate) fn json(planned: &Planned) -> serde_json::Value {
    let plan = &planned.plan;
    let database = &planned.database;
    let object_changes: Vec<serde_json::Value> = plan
        .object_changes
        .iter()
        .map(|c| {
            serde_json::json!({
                "key": {"database": database, "object_type": c.object_type, "name": c.name},
                "model": c.model,
                "change_type": change_label(c.change_type),
                "root_state": c.root_state.as_str(),
                "active_deployment_id": c.active_deployment_id,
                "force_full_refresh": c.force_full_refresh,
                "forced_start_time": c.forced_start_time,
                "schema_change_kind": c.schema_change_kind,
                "seed_compatibility": c.seed_compatibility,
            })
        })
        .collect();
    let subtrees: Vec<serde_json::Value> = plan
        .rebuild_subtrees
        .iter()
        .map(|s| {
            serde_json::json!({
                "root_key": s.root,
                "upstream_boundary_key": s.upstream_boundary_key,
                "affected_keys": s.affected,
                "strategy": s.strategy,
                "replay_required": s.replay_required,
                "execution_mode": mode_label(s.execution_mode),
                "forced_full_refresh": s.forced_full_refresh,
                "forced_start_time": s.forced_start_time,
                "configured_backfill_mode": s.configured_backfill_mode,
                "execution_lookback_seconds": s.execution_lookback_seconds,
                "history_preserving_bounded_supported": s.history_preserving_bounded_supported,
                "resolved_bounded_replay_fallback": s.resolved_bounded_replay_fallback,
                "execution_start_time": planned
                    .root_starts
                    .get(&s.root)
                    .map(ToString::to_string)
                    .or_else(|| s.forced_start_time.clone()),
            })
        })
        .collect();
    let steps: Vec<String> = plan
        .rebuild_subtrees
        .iter()
        .enumerate()
        .flat_map(|(i, s)| steps(i + 1, s, planned))
        .collect();
    serde_json::json!({
        "mode": "virtual environments",
        "adapter": "clickhouse",
        "database": database,
        "deployment_id": planned.deployment.as_str(),
        "deployment_created_at": planned.deployment.created_at(),
        "object_changes": object_changes,
        "steps": steps,
        "rebuild_subtrees": subtrees,
        "prepared_shadow_objects": planned.shadow_objects,
        "warnings": planned.warnings,
        "sql_diffs": plan.sql_diffs.iter().map(|d| serde_json::json!({
            "key": {"database": database, "object_type": d.object_type, "name": d.key},
            "object_type": d.object_type,
            "name": d.name,
            "diff_lines": d.diff_lines,
        })).collect::<Vec<_>>(),
    })
}

/// The plan as text.
#[must_use]
pub(crate) fn text(planned: &Planned, verbose: bool) -> String {
    let plan = &planned.plan;
    let mut out = String::new();
    let _ = writeln!(out, "Plan Ready");
    let _ = writeln!(out, "Database: {}", planned.database);
    let _ = writeln!(out, "Deployment: {}", planned.deployment);
    if plan.rebuild_subtrees.is_empty() {
        let _ = writeln!(
            out,
            "\nNo changes: the active deployment matches the project."
        );
        return out;
    }
    let _ = writeln!(out, "Subtrees to rebuild: {}", plan.rebuild_subtrees.len());
    for subtree in &plan.rebuild_subtrees {
        let _ = writeln!(out);
        match (&subtree.upstream_boundary_key, subtree.replay_required) {
            (Some(input), true) => {
                let _ = writeln!(out, "[replay start] {input}");
                for model in &subtree.affected {
                    let _ = writeln!(out, "└── [live target] {model}");
                }
            }
            _ => {
                for model in &subtree.affected {
                    let _ = writeln!(out, "[deploy] {model}");
                }
            }
        }
        let _ = writeln!(out, "    mode: {}", mode_label(subtree.execution_mode));
    }
    let created: Vec<&str> = plan
        .object_changes
        .iter()
        .filter(|c| c.change_type == ChangeType::Create)
        .map(|c| c.name.as_str())
        .collect();
    let rebuilt: Vec<String> = plan
        .object_changes
        .iter()
        .filter(|c| c.change_type == ChangeType::Rebuild)
        .map(|c| match c.schema_change_kind {
            Some(kind) => format!(
                "{} ({})",
                c.name,
                serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            None => c.name.clone(),
        })
        .collect();
    if !created.is_empty() {
        let _ = writeln!(out, "\nNew targets: {}", created.join(", "));
    }
    if !rebuilt.is_empty() {
        let _ = writeln!(out, "\nChanges detected: {}", rebuilt.join(", "));
    }
    if verbose {
        if !plan.sql_diffs.is_empty() {
            let _ = writeln!(out, "\nDiffs against the active deployment:");
            for diff in &plan.sql_diffs {
                let _ = writeln!(out, "  {} ({})", diff.name, diff.object_type);
                for line in &diff.diff_lines {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        let _ = writeln!(out, "\nStaged rollout objects:");
        for object in &planned.shadow_objects {
            let _ = writeln!(out, "  {} -> {}", object.logical_key, object.physical_name);
        }
        let _ = writeln!(out, "\nWorkflow:");
        for (i, subtree) in plan.rebuild_subtrees.iter().enumerate() {
            for step in steps(i + 1, subtree, planned) {
                let _ = writeln!(out, "  {step}");
            }
        }
    } else {
        let _ = writeln!(
            out,
            "\nRun `stb plan --verbose` to show the diffs, the staged objects and the workflow."
        );
    }
    if !planned.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings:");
        for warning in &planned.warnings {
            let _ = writeln!(out, "  - {warning}");
        }
    }
    out
}

/// Prints the plan on stdout.
pub(crate) fn print(planned: &Planned, as_json: bool, verbose: bool) {
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let _ = writeln!(stdout, "{}", json(planned));
    } else {
        let _ = write!(stdout, "{}", text(planned, verbose));
    }
}

/// A mixed scope's combined plan on stdout, as `stb plan` and `stb build` show it: the
/// virtual phase (staged first), then the direct one.
pub(crate) fn print_mixed(
    staged: Option<&Planned>,
    direct: &stb_engine::direct::Planned,
    verbose: bool,
) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "Mixed Build Plan");
    let _ = writeln!(
        stdout,
        "Execution order: virtual (staged) -> direct (applied immediately)"
    );
    let _ = writeln!(stdout, "\nPhase 1/2 VIRTUAL");
    if let Some(deployment) = staged {
        let _ = write!(stdout, "{}", text(deployment, verbose));
    }
    let _ = writeln!(stdout, "\nPhase 2/2 DIRECT");
    drop(stdout);
    crate::plan_render::print(direct, false, verbose);
}
