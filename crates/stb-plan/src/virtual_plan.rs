//! The virtual plan: what a new deployment of the selected virtual models would create,
//! classified against what is deployed now.
//!
//! Deployed state comes from two places, read by the caller in a fixed number of queries:
//! the catalog's stable bindings (views `<relation>` selecting `*` from
//! `<relation>__<deployment id>`) and the object-state rows the active deployments
//! recorded (each object's spec as deterministic JSON). A model is compared with the spec
//! its active deployment recorded, so a planned change means "differs from what was
//! deployed", whatever ClickHouse later did to the DDL's text.

pub mod diffs;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_model::planning::{PlanModel, RelationKind};

use crate::deployment::{DeploymentId, split_physical};

/// What is live for one logical relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootState {
    /// Its stable view selects from a deployment's relation.
    ActiveViewPresent,
    /// Its stable view selects from a relation that belongs to no deployment.
    InvalidActiveView,
    /// No stable view, but deployments hold copies of it.
    LogicalViewMissing,
    /// Never deployed.
    Greenfield,
}

/// The deployed state of a target, as the catalog and the metadata show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployed {
    /// Stable bindings: logical relation -> the relation its view selects from.
    pub bindings: BTreeMap<String, String>,
    /// Every relation in the target database.
    pub relations: BTreeSet<String>,
    /// The spec each active deployment recorded, by logical relation.
    pub recorded: BTreeMap<String, String>,
}

impl Deployed {
    /// The state of `relation` and its active deployment, if any.
    #[must_use]
    pub fn state(&self, relation: &str) -> (RootState, Option<DeploymentId>) {
        if let Some(physical) = self.bindings.get(relation) {
            return match split_physical(physical) {
                Some((logical, id)) if logical == relation => {
                    (RootState::ActiveViewPresent, Some(id))
                }
                _ => (RootState::InvalidActiveView, None),
            };
        }
        let copies = self
            .relations
            .iter()
            .any(|name| split_physical(name).is_some_and(|(logical, _)| logical == relation));
        if copies {
            (RootState::LogicalViewMissing, None)
        } else {
            (RootState::Greenfield, None)
        }
    }
}

/// `create`, `rebuild` or `no_op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    Create,
    Rebuild,
    NoOp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaChange {
    /// Columns were only added.
    NonBreaking,
    /// Columns were removed or changed type.
    Breaking,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seeding {
    Seedable,
    /// A column changed type: rows of the active table cannot be copied.
    NonSeedable,
}

/// A relation's spec as recorded in object state: what decides whether it changed.
#[must_use]
pub fn object_fingerprint(model: &PlanModel, kind: RelationKind) -> String {
    let deployable = &model.deployable;
    let logical = |name: &str| name.to_owned();
    let query = || deployable.query_with(&logical);
    match kind {
        RelationKind::Table => serde_json::json!({
            "kind": "table",
            "columns": model.output_columns,
            "storage": model.storage,
        }),
        RelationKind::MaterializedView => serde_json::json!({
            "kind": "materialized_view",
            "query": query(),
            "target": model.relations.first().map(|(_, r)| r),
        }),
        RelationKind::View => serde_json::json!({"kind": "view", "query": query()}),
    }
    .to_string()
}

/// One object's classification, as the JSON reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectChange {
    pub model: String,
    pub object_type: &'static str,
    pub name: String,
    pub change_type: ChangeType,
    pub root_state: RootState,
    pub active_deployment_id: Option<String>,
    pub force_full_refresh: bool,
    pub forced_start_time: Option<String>,
    pub schema_change_kind: Option<SchemaChange>,
    pub seed_compatibility: Option<Seeding>,
}

/// How a subtree is rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    FullRebuild,
    /// Copies the active table's rows before the lower bound, replays from it.
    SeededBoundedRebuild,
    /// Replays from the lower bound only.
    UnseededBoundedRebuild,
    /// A view subtree: nothing to replay.
    Deploy,
}

/// A created or rebuilt model and everything downstream of it in the selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subtree {
    pub root: String,
    /// What the root replays from: its driving input (a source or an upstream model).
    pub upstream_boundary_key: Option<String>,
    /// The root and its descendants, upstream first.
    pub affected: Vec<String>,
    pub strategy: &'static str,
    pub replay_required: bool,
    pub execution_mode: ExecutionMode,
    pub forced_full_refresh: bool,
    pub forced_start_time: Option<String>,
    /// The root's `replay_on_change` for this change's kind (`full`, `bounded-30m`).
    pub configured_backfill_mode: Option<String>,
    /// A bounded rebuild's lookback; `None` with a bounded mode: from the active copy's
    /// frontier (what it holds now).
    pub execution_lookback_seconds: Option<u64>,
    /// The active table keeps the lineage columns a seed needs.
    pub history_preserving_bounded_supported: bool,
    /// `bounded_replay_fallback`, when it decided the mode (a bounded rebuild whose active
    /// table cannot seed it).
    pub resolved_bounded_replay_fallback: Option<String>,
}

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The selected models; `None`: every virtual model.
    pub selected: Option<BTreeSet<String>>,
    pub full_refresh: bool,
    /// `--start-time`, normalised.
    pub start_time: Option<String>,
}

/// A virtual plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VirtualPlan {
    pub deployment_id: String,
    pub object_changes: Vec<ObjectChange>,
    /// The recorded spec against the desired one, per object whose spec changed.
    pub sql_diffs: Vec<diffs::SqlDiff>,
    pub rebuild_subtrees: Vec<Subtree>,
    /// Every model the deployment creates a copy of, upstream first.
    pub deployed_models: Vec<String>,
}

/// Why a virtual plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualPlanError {
    pub message: String,
    pub hint: String,
}

/// What one model's classification found, for its subtree.
#[derive(Debug, Clone, Copy)]
struct Found {
    schema: Option<SchemaChange>,
    seeding: Option<Seeding>,
}

/// Classifies the `models` of virtual pipelines (topological order) against `deployed`.
///
/// # Errors
/// `--start-time` for a selected model that has no active deployment to bound it by.
pub fn plan_virtual(
    models: &[&PlanModel],
    deployed: &Deployed,
    options: &Options,
    deployment_id: &DeploymentId,
) -> Result<VirtualPlan, VirtualPlanError> {
    let forced = |name: &str| {
        (options.full_refresh || options.start_time.is_some())
            && options.selected.as_ref().is_none_or(|s| s.contains(name))
    };
    let mut object_changes = Vec::new();
    let mut sql_diffs = Vec::new();
    let mut changed: BTreeMap<&str, Found> = BTreeMap::new();
    for model in models {
        let (root_state, active) = model
            .relations
            .first()
            .map_or((RootState::Greenfield, None), |(_, r)| deployed.state(r));
        let forced_here = forced(&model.name);
        if forced_here && options.start_time.is_some() && active.is_none() {
            return Err(VirtualPlanError {
                message: format!(
                    "--start-time needs an active deployment of '{}' to bound its replay; it has none ({})",
                    model.name,
                    root_state.as_str()
                ),
                hint: "build it once without --start-time, or leave it out of the selection"
                    .to_owned(),
            });
        }
        let (schema, seeding) = schema_change(model, deployed);
        let mut model_changed = false;
        for (relation_kind, relation) in &model.relations {
            let desired = object_fingerprint(model, *relation_kind);
            let recorded = deployed.recorded.get(relation);
            let change_type = if active.is_none() {
                ChangeType::Create
            } else if forced_here || recorded.is_none_or(|spec| !diffs::same_spec(spec, &desired)) {
                ChangeType::Rebuild
            } else {
                ChangeType::NoOp
            };
            if let (Some(_), Some(spec)) = (&active, recorded) {
                sql_diffs.extend(diffs::diff(
                    relation,
                    relation_kind.as_str(),
                    spec,
                    &desired,
                ));
            }
            model_changed |= change_type != ChangeType::NoOp;
            let rebuilt_table =
                *relation_kind == RelationKind::Table && change_type == ChangeType::Rebuild;
            object_changes.push(ObjectChange {
                model: model.name.clone(),
                object_type: relation_kind.as_str(),
                name: relation.clone(),
                change_type,
                root_state: root_state.clone(),
                active_deployment_id: active.as_ref().map(ToString::to_string),
                force_full_refresh: forced_here && options.full_refresh,
                forced_start_time: forced_here.then(|| options.start_time.clone()).flatten(),
                schema_change_kind: schema.filter(|_| rebuilt_table),
                seed_compatibility: seeding.filter(|_| rebuilt_table),
            });
        }
        if model_changed {
            changed.insert(model.name.as_str(), Found { schema, seeding });
        }
    }
    let order: BTreeMap<&str, usize> = models
        .iter()
        .enumerate()
        .map(|(i, m)| (m.name.as_str(), i))
        .collect();
    let descendants = downstream(models);
    // Largest subtrees first; a candidate inside a kept subtree is part of it.
    let mut candidates: Vec<(&str, &Vec<&str>)> = changed
        .keys()
        .map(|root| (*root, &descendants[root]))
        .collect();
    candidates.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(order[a.0].cmp(&order[b.0])));
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    let mut rebuild_subtrees = Vec::new();
    for (root, members) in candidates {
        if covered.contains(root) {
            continue;
        }
        let mut affected: Vec<&str> = std::iter::once(root)
            .chain(members.iter().copied())
            .collect();
        affected.sort_by_key(|m| order[m]);
        covered.extend(affected.iter().copied());
        let model = models[order[root]];
        rebuild_subtrees.push(subtree(
            model,
            &affected,
            changed[root],
            deployed,
            options,
            forced(root),
        ));
    }
    rebuild_subtrees.sort_by_key(|s| order[s.root.as_str()]);
    let mut deployed_models: Vec<&str> = covered.into_iter().collect();
    deployed_models.sort_by_key(|m| order[m]);
    Ok(VirtualPlan {
        deployment_id: deployment_id.to_string(),
        object_changes,
        sql_diffs,
        rebuild_subtrees,
        deployed_models: deployed_models.into_iter().map(str::to_owned).collect(),
    })
}

impl RootState {
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ActiveViewPresent => "active_view_present",
            Self::InvalidActiveView => "invalid_active_view",
            Self::LogicalViewMissing => "logical_view_missing",
            Self::Greenfield => "greenfield",
        }
    }
}

/// The subtree rooted at `root`, and how it is rebuilt: forced by the flags, seeded when
/// only columns were added and the active table keeps the lineage to bound the replay,
/// else in full.
fn subtree(
    root: &PlanModel,
    affected: &[&str],
    found: Found,
    deployed: &Deployed,
    options: &Options,
    forced: bool,
) -> Subtree {
    let replay_required = root.is_table;
    let active = root
        .relations
        .first()
        .and_then(|(_, r)| deployed.state(r).1);
    let lineage = active.is_some() && active_keeps_lineage(root, deployed);
    // A query change that keeps the columns is as breaking as a removed column: the rows
    // the active copy holds were made by another query.
    let configured = if found.schema == Some(SchemaChange::NonBreaking) {
        root.replay_policy.non_breaking.clone()
    } else {
        root.replay_policy.breaking.clone()
    };
    let lookback = configured
        .as_deref()
        .and_then(stb_model::planning::ReplayPolicy::lookback_seconds);
    let mut fallback = None;
    let execution_mode = if !replay_required {
        ExecutionMode::Deploy
    } else if forced && options.full_refresh {
        ExecutionMode::FullRebuild
    } else if forced && options.start_time.is_some() {
        ExecutionMode::SeededBoundedRebuild
    } else if active.is_none() {
        ExecutionMode::FullRebuild
    } else {
        let bounded = match configured.as_deref() {
            Some("full") => false,
            Some(_) => true,
            // No policy: only a change that adds columns keeps the active rows.
            None => found.schema == Some(SchemaChange::NonBreaking),
        };
        let seedable = found.seeding != Some(Seeding::NonSeedable);
        if !bounded {
            ExecutionMode::FullRebuild
        } else if lineage && seedable {
            ExecutionMode::SeededBoundedRebuild
        } else if lineage && configured.is_some() {
            ExecutionMode::UnseededBoundedRebuild
        } else if configured.is_none() {
            ExecutionMode::FullRebuild
        } else {
            let chosen = root
                .replay_policy
                .fallback
                .clone()
                .unwrap_or_else(|| "full".to_owned());
            let mode = if chosen == "bounded_without_history" {
                ExecutionMode::UnseededBoundedRebuild
            } else {
                ExecutionMode::FullRebuild
            };
            fallback = Some(chosen);
            mode
        }
    };
    Subtree {
        root: root.name.clone(),
        // The root replays from its driving input as deployed: a source's landing or
        // adopted table, or the active copy of an upstream model.
        upstream_boundary_key: root.driving_input.clone(),
        affected: affected.iter().map(|m| (*m).to_owned()).collect(),
        strategy: "shadow_rebuild",
        replay_required,
        execution_mode,
        forced_full_refresh: forced && options.full_refresh,
        forced_start_time: forced.then(|| options.start_time.clone()).flatten(),
        configured_backfill_mode: configured,
        execution_lookback_seconds: lookback.filter(|_| {
            matches!(
                execution_mode,
                ExecutionMode::SeededBoundedRebuild | ExecutionMode::UnseededBoundedRebuild
            )
        }),
        history_preserving_bounded_supported: lineage,
        resolved_bounded_replay_fallback: fallback,
    }
}

/// Added, removed and retyped columns against the spec the active deployment recorded.
fn schema_change(
    model: &PlanModel,
    deployed: &Deployed,
) -> (Option<SchemaChange>, Option<Seeding>) {
    let Some(recorded) = model.table().and_then(|t| recorded_columns(deployed, t)) else {
        return (None, None);
    };
    let desired: BTreeMap<&str, &str> = model
        .output_columns
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let removed = recorded
        .keys()
        .any(|name| !desired.contains_key(name.as_str()));
    let retyped = recorded.iter().any(|(name, data_type)| {
        desired
            .get(name.as_str())
            .is_some_and(|t| !stb_sql::types::same_type(t, data_type))
    });
    let added = desired.keys().any(|name| !recorded.contains_key(*name));
    let seeding = if retyped {
        Seeding::NonSeedable
    } else {
        Seeding::Seedable
    };
    if removed || retyped {
        (Some(SchemaChange::Breaking), Some(seeding))
    } else if added {
        (Some(SchemaChange::NonBreaking), Some(seeding))
    } else {
        (None, Some(seeding))
    }
}

fn recorded_columns(deployed: &Deployed, table: &str) -> Option<BTreeMap<String, String>> {
    let spec: serde_json::Value = serde_json::from_str(deployed.recorded.get(table)?).ok()?;
    spec["columns"]
        .as_array()?
        .iter()
        .map(|pair| Some((pair[0].as_str()?.to_owned(), pair[1].as_str()?.to_owned())))
        .collect()
}

/// The active table keeps the lineage columns of the model's replay mode, so a bounded
/// replay can find where its rows end.
#[must_use]
pub fn active_keeps_lineage(model: &PlanModel, deployed: &Deployed) -> bool {
    let Some(columns) = model.table().and_then(|t| recorded_columns(deployed, t)) else {
        return false;
    };
    let needed = stb_model::planning::lineage_columns(model.boundary_mode.as_deref().unwrap_or(""));
    !needed.is_empty() && needed.iter().all(|c| columns.contains_key(*c))
}

/// Every model downstream of each model, within `models` (topological order).
fn downstream<'m>(models: &[&'m PlanModel]) -> BTreeMap<&'m str, Vec<&'m str>> {
    let names: BTreeSet<&str> = models.iter().map(|m| m.name.as_str()).collect();
    let mut readers: BTreeMap<&str, Vec<&'m str>> = BTreeMap::new();
    for model in models {
        for read in &model.reads {
            if names.contains(read.as_str()) {
                readers
                    .entry(read.as_str())
                    .or_default()
                    .push(model.name.as_str());
            }
        }
    }
    let mut result: BTreeMap<&'m str, Vec<&'m str>> = BTreeMap::new();
    // Upstream last: a model's closure is its readers and their (already known) closures.
    for model in models.iter().rev() {
        let mut closure: BTreeSet<&'m str> = BTreeSet::new();
        for reader in readers.get(model.name.as_str()).into_iter().flatten() {
            closure.insert(reader);
            closure.extend(result.get(reader).into_iter().flatten().copied());
        }
        result.insert(model.name.as_str(), closure.into_iter().collect());
    }
    result
}

/// Where each virtual model lives for a deployment: copied into it, or read from the
/// deployment that is active for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The models the new deployment copies.
    pub deployed: BTreeSet<String>,
    /// The active deployment of every other virtual model that has one.
    pub active: BTreeMap<String, DeploymentId>,
}

/// The project's models as a build of `deployment` sees them: every model the deployment
/// copies, and every virtual model it reads from an active deployment, under its
/// physical names, with references between models resolved to physical relations (never
/// to a stable view: a materialized view reading a view is never triggered). Direct
/// models are unchanged.
///
/// # Errors
/// A copied model reads a virtual model that is neither copied nor deployed.
pub fn deployment_models(
    models: &[PlanModel],
    database: &str,
    deployment: &DeploymentId,
    placement: &Placement,
    is_virtual: &dyn Fn(&str) -> bool,
) -> Result<Vec<PlanModel>, VirtualPlanError> {
    let id_of = |model: &str| -> Option<&DeploymentId> {
        if placement.deployed.contains(model) {
            Some(deployment)
        } else {
            placement.active.get(model)
        }
    };
    let by_name = crate::work::ModelIndex::new(models);
    let mut unresolved = BTreeSet::new();
    let resolve = |model: &str| -> String {
        let target = by_name.get(model).and_then(|m| {
            let relation = m.relations.first().map(|(_, r)| r.as_str())?;
            Some(match id_of(model) {
                Some(id) => qualified(database, &id.physical(relation)),
                None => m.reference.clone(),
            })
        });
        target.unwrap_or_default()
    };
    let mut result = Vec::with_capacity(models.len());
    for model in models {
        let Some(id) = id_of(&model.name) else {
            result.push(model.clone());
            continue;
        };
        if placement.deployed.contains(&model.name) {
            for read in &model.reads {
                if is_virtual(read) && by_name.contains(read.as_str()) && id_of(read).is_none() {
                    unresolved.insert(format!("'{}' reads '{read}'", model.name));
                }
            }
        }
        result.push(renamed(model, database, id, &resolve));
    }
    if !unresolved.is_empty() {
        return Err(VirtualPlanError {
            message: format!(
                "The deployment reads virtual models that no deployment holds: {}",
                unresolved.into_iter().collect::<Vec<_>>().join(", ")
            ),
            hint: "select those models too, so the deployment creates them".to_owned(),
        });
    }
    Ok(result)
}

fn qualified(database: &str, relation: &str) -> String {
    stb_ddl::QualifiedName::new(database, relation).to_string()
}

/// `model` under the physical names of deployment `id`.
fn renamed(
    model: &PlanModel,
    database: &str,
    id: &DeploymentId,
    resolve: &dyn Fn(&str) -> String,
) -> PlanModel {
    let deployable = &model.deployable;
    let query = deployable.query_with(resolve);
    let rename = |name: &stb_ddl::QualifiedName| {
        stb_ddl::QualifiedName::new(&name.database, &id.physical(&name.name))
    };
    let mut create_statements = Vec::new();
    for (kind, _) in &model.relations {
        let statement = match kind {
            RelationKind::Table => deployable.table.as_ref().map(|table| {
                stb_ddl::Table {
                    name: rename(&table.name),
                    ..table.clone()
                }
                .render()
            }),
            RelationKind::MaterializedView => deployable.materialized_view.as_ref().map(|view| {
                stb_ddl::MaterializedView {
                    name: rename(&view.name),
                    target: rename(&view.target),
                    query: query.clone(),
                    ..view.clone()
                }
                .render()
            }),
            RelationKind::View => deployable.view.as_ref().map(|view| {
                stb_ddl::View {
                    name: rename(&view.name),
                    query: query.clone(),
                }
                .render()
            }),
        };
        create_statements.push(statement.unwrap_or_default());
    }
    let relations: Vec<(RelationKind, String)> = model
        .relations
        .iter()
        .map(|(kind, relation)| (*kind, id.physical(relation)))
        .collect();
    PlanModel {
        reference: relations
            .first()
            .map(|(_, r)| qualified(database, r))
            .unwrap_or_default(),
        relations,
        create_statements,
        replay_query: model
            .driving_input
            .as_deref()
            .filter(|_| model.is_table)
            .map(|input| deployable.cut_at(input, resolve))
            .unwrap_or_default(),
        query,
        ..model.clone()
    }
}

#[cfg(test)]
mod tests;
