//! Bounded subtrees of a deployment: where each replay starts (`--start-time`, a
//! `replay_on_change` lookback, or the active copy's frontier), whether its active copy can
//! seed it, and the seeds' sources once the build is planned.

use std::collections::BTreeMap;

use stb_compile::Compiled;
use stb_plan::deployment::DeploymentId;
use stb_plan::direct::PlanModel;
use stb_plan::options::{FLAG_CODE, StartTime};
use stb_plan::virtual_plan::{Deployed, ExecutionMode, VirtualPlan};

use super::Planned;
use crate::EngineError;

/// Resolves every bounded subtree of `plan`: a `--start-time` it cannot seed is refused;
/// a policy it cannot have falls back (`bounded_replay_fallback`, said in a warning);
/// the others get their start. Returns the warnings and each policy-bounded root's start.
///
/// # Errors
/// `--start-time` for a root its active copy cannot seed.
pub(super) fn resolve_bounds(
    plan: &mut VirtualPlan,
    models: &[&PlanModel],
    compiled: &Compiled,
    deployed: &Deployed,
    deployment: &DeploymentId,
) -> Result<(Vec<String>, BTreeMap<String, StartTime>), EngineError> {
    let mut warnings = Vec::new();
    let mut root_starts = BTreeMap::new();
    for subtree in &mut plan.rebuild_subtrees {
        let bounded = matches!(
            subtree.execution_mode,
            ExecutionMode::SeededBoundedRebuild | ExecutionMode::UnseededBoundedRebuild
        );
        if !bounded {
            continue;
        }
        let root = models
            .iter()
            .find(|m| m.name == subtree.root)
            .ok_or_else(|| {
                EngineError::new(
                    FLAG_CODE,
                    "a subtree root is not in scope",
                    "recompile the project",
                )
            })?;
        let positional = matches!(root.boundary_mode.as_deref(), Some("offsets" | "cursor"));
        let placeable = !positional || input_has_time(root, compiled);
        let mut seeded = subtree.execution_mode == ExecutionMode::SeededBoundedRebuild;
        let mut problem = if seeded {
            unseedable(root, compiled, &plan.object_changes, deployed)
        } else {
            (!placeable)
                .then(|| "its driving input has no time column to place a start in".to_owned())
        };
        let fallback = root.replay_policy.fallback.as_deref().unwrap_or("full");
        if let Some(why) = &problem
            && seeded
            && placeable
            && subtree.forced_start_time.is_none()
            && fallback == "bounded_without_history"
        {
            // Asked for: bounded even without the active rows.
            warnings.push(format!(
                "'{}' cannot be seeded ({why}); bounded_replay_fallback bounded_without_history: replayed from its start only",
                subtree.root
            ));
            subtree.execution_mode = ExecutionMode::UnseededBoundedRebuild;
            subtree.resolved_bounded_replay_fallback = Some(fallback.to_owned());
            seeded = false;
            problem = None;
        }
        if subtree.forced_start_time.is_some() {
            if let Some(why) = problem {
                return Err(EngineError::new(
                    FLAG_CODE,
                    format!("--start-time cannot seed '{}': {why}", root.name),
                    "use --full-refresh to rebuild it from all retained history",
                ));
            }
        } else {
            if let Some(why) = problem {
                // A bounded rebuild this root cannot have: in full, from retained history.
                warnings.push(format!(
                    "'{}' cannot be rebuilt bounded ({why}): rebuilt in full from retained history",
                    subtree.root
                ));
                subtree.execution_mode = ExecutionMode::FullRebuild;
                subtree.resolved_bounded_replay_fallback = Some("full".to_owned());
                continue;
            }
            root_starts.insert(
                subtree.root.clone(),
                policy_start(deployment, subtree.execution_lookback_seconds)?,
            );
            if !seeded {
                warnings.push(format!(
                    "'{}' is rebuilt from {} on only (replay_on_change {}): the rows before it are not copied, and promoting it shows fewer rows",
                    subtree.root,
                    root_starts[&subtree.root],
                    subtree.configured_backfill_mode.as_deref().unwrap_or("bounded")
                ));
            }
        }
        if seeded && root.boundary_mode.as_deref() == Some("timestamp") {
            warnings.push(format!(
                "'{}' is seeded by event time: an event older than the start time that lands while the build runs can reach the copy twice (live, and from the active copy)",
                subtree.root
            ));
        }
    }
    Ok((warnings, root_starts))
}

/// Why `root`'s active copy cannot seed its new copy, if it cannot: it aggregates (its
/// rows cannot be split at a position), a column changed type, its active table lacks the
/// lineage columns of its mode, or its driving input has no time to place a start in.
fn unseedable(
    root: &PlanModel,
    compiled: &Compiled,
    changes: &[stb_plan::virtual_plan::ObjectChange],
    deployed: &Deployed,
) -> Option<String> {
    if root.aggregate {
        return Some("it aggregates, and its active rows cannot be split at a position".into());
    }
    if changes.iter().any(|c| {
        c.model == root.name
            && c.seed_compatibility == Some(stb_plan::virtual_plan::Seeding::NonSeedable)
    }) {
        return Some("a column changed type since the active deployment".into());
    }
    if !stb_plan::virtual_plan::active_keeps_lineage(root, deployed) {
        return Some(format!(
            "its active table lacks the {} lineage columns",
            root.boundary_mode.as_deref().unwrap_or("replay")
        ));
    }
    let positional = matches!(root.boundary_mode.as_deref(), Some("offsets" | "cursor"));
    if positional && !input_has_time(root, compiled) {
        return Some(format!(
            "its driving input {} has no _replay_timestamp or _replay_landed_at to place a start in",
            root.driving_input.as_deref().unwrap_or("(none)")
        ));
    }
    None
}

/// The root's driving input exposes a time column a start can be placed by.
fn input_has_time(root: &PlanModel, compiled: &Compiled) -> bool {
    let Some(input) = root.driving_input.as_deref() else {
        return false;
    };
    let time = |column: &str| column == "_replay_timestamp" || column == "_replay_landed_at";
    compiled
        .plan_sources
        .iter()
        .find(|s| s.name == input)
        .map(|s| s.replay_columns.iter().any(|c| time(c)))
        .or_else(|| {
            compiled
                .plan_models
                .iter()
                .find(|m| m.name == input)
                .map(|m| m.output_columns.iter().any(|(c, _)| time(c)))
        })
        .unwrap_or(false)
}

/// Where a bounded subtree's replay starts when no `--start-time` names it: its lookback
/// before the deployment's instant, or (no lookback: from the active copy's frontier)
/// the instant itself, so the seed brings everything the active copy holds.
fn policy_start(
    deployment: &DeploymentId,
    lookback: Option<u64>,
) -> Result<StartTime, EngineError> {
    let instant = stb_plan::deployment::parse_utc_text(&deployment.created_at()).unwrap_or(0);
    let back = i64::try_from(lookback.unwrap_or(0))
        .unwrap_or(i64::MAX / 2_000)
        .saturating_mul(1000);
    let text = stb_plan::deployment::utc_text(instant.saturating_sub(back)).replacen(' ', "T", 1);
    stb_plan::options::parse_start_time(&format!("{text}Z")).map_err(EngineError::from)
}

/// Where each seeded root's rows before its start come from: its active copy, and the
/// columns the new copy shares with it.
pub(super) fn seed_sources(
    staged: &Planned,
    compiled: &Compiled,
    reads: &crate::direct::Reads,
    live_tables: &BTreeMap<String, String>,
) -> BTreeMap<String, stb_plan::workflow::SeedSource> {
    let seeded: Vec<_> = staged
        .plan
        .rebuild_subtrees
        .iter()
        .filter(|s| s.execution_mode == ExecutionMode::SeededBoundedRebuild)
        .collect();
    if seeded.is_empty() {
        return BTreeMap::new();
    }
    let models = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    seeded
        .into_iter()
        .filter_map(|s| {
            let model = models.get(&s.root)?;
            let table = live_tables.get(&s.root)?;
            let active = reads.catalog.relation(table)?;
            let columns = model
                .output_columns
                .iter()
                .map(|(name, _)| name)
                .filter(|name| active.columns.iter().any(|c| &c.name == *name))
                .cloned()
                .collect();
            Some((
                s.root.clone(),
                stb_plan::workflow::SeedSource {
                    table: table.clone(),
                    columns,
                },
            ))
        })
        .collect()
}
