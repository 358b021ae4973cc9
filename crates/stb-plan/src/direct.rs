//! The shape of a direct plan: which models run and why, what they need that is not
//! rebuilt, where replay starts, and in which order relations are dropped and created.
//!
//! Direct mode does not prune by change: the execution scope is the selection plus
//! everything downstream of it (every model when nothing is selected), in the project's
//! topological order.

use std::collections::{BTreeMap, BTreeSet};

pub use stb_model::planning::{Landing, PlanModel, PlanSource, RelationKind, lineage_columns};

/// Why a model is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    AllModels,
    Selected,
    /// Picked by `--changed`: no baseline, or its query or identity differs from it.
    Changed,
    /// Added by `--include-missing-upstream`: read by the selection, absent from the target.
    MissingUpstream,
    /// Added by `--changed`: a pipeline that reads a managed source whose Kafka settings
    /// drifted, so the build repairs the source.
    SourceDrift,
    DownstreamOfSelected,
}

impl Reason {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllModels => "all_models",
            Self::Selected => "selected",
            Self::Changed => "changed",
            Self::MissingUpstream => "missing_upstream",
            Self::SourceDrift => "source_drift",
            Self::DownstreamOfSelected => "downstream_of_selected",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub model: String,
    pub reason: Reason,
    pub is_replay_root: bool,
}

/// Something the scope reads but does not rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prerequisite {
    pub name: String,
    pub present: bool,
    pub framework_managed: bool,
}

/// Where replay starts, and the models its rows flow into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRoot {
    pub model: String,
    pub driving_input: String,
    /// Rebuilt table models fed from this root, in entry order.
    pub propagated: Vec<String>,
    /// Replays run stage by stage. Stage 0 replays from inputs the build does not
    /// rebuild. A model that joins a side input rebuilt in this build (a fan-in) replays
    /// in a later stage, once that input is complete, with its view created only then:
    /// during earlier replays its view would join a side table still being filled.
    pub stage: usize,
    /// The rebuilt side inputs a fan-in waits for (empty at stage 0).
    pub waits_for: Vec<String>,
}

impl ReplayRoot {
    /// Why the model is a replay root: `driving_input_not_rebuilt`, or
    /// `side_input_rebuilt` for a fan-in.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        if self.waits_for.is_empty() {
            "driving_input_not_rebuilt"
        } else {
            "side_input_rebuilt"
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectPlan {
    pub entries: Vec<Entry>,
    pub prerequisites: Vec<Prerequisite>,
    pub replay_roots: Vec<ReplayRoot>,
    /// Views, then materialized views, then tables, each in reverse entry order.
    pub teardown: Vec<(RelationKind, String)>,
    /// Tables in entry order, materialized views in reverse entry order (leaves first),
    /// then views in entry order.
    pub creation: Vec<(RelationKind, String)>,
    /// `mutable_ref_replay_not_guaranteed` per model that reads a mutable side input.
    pub warnings: Vec<String>,
}

/// What the user selected and the execution scope it implies (the selection and
/// everything downstream; every model when nothing is selected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub selected: Option<BTreeSet<String>>,
    pub scope: BTreeSet<String>,
    /// Why the selected models are in: `Selected` (by selectors) or `Changed`.
    pub selected_reason: Reason,
    /// Upstream models added because they do not exist yet.
    pub missing_upstream: BTreeSet<String>,
    /// Models added because their pipeline reads a drifted source.
    pub source_drift: BTreeSet<String>,
}

impl Selection {
    #[must_use]
    pub fn new(graph: &stb_graph::ModelGraph, selected: Option<BTreeSet<String>>) -> Self {
        let scope = match &selected {
            Some(chosen) => stb_graph::execution_models(graph, chosen),
            None => graph.models(),
        };
        Self {
            selected,
            scope,
            selected_reason: Reason::Selected,
            missing_upstream: BTreeSet::new(),
            source_drift: BTreeSet::new(),
        }
    }

    /// The models `--changed` picks: every model whose baseline is missing or whose query
    /// or identity differs from it (types compared as the server spells them: a respelt
    /// type is no change). `baseline` gives a model's last recorded build.
    #[must_use]
    pub fn changed<'m>(
        graph: &stb_graph::ModelGraph,
        models: impl IntoIterator<Item = &'m PlanModel>,
        baseline: &dyn Fn(&str) -> Option<RecordedModel>,
        present: &dyn Fn(&str) -> bool,
    ) -> Self {
        let changed: BTreeSet<String> = models
            .into_iter()
            .filter(|model| match baseline(&model.name) {
                None => true,
                // A relation gone (dropped by hand, a build stopped and not given back)
                // needs a build whatever the records say.
                Some(_) if model.relations.iter().any(|(_, r)| !present(r)) => true,
                Some(recorded) => {
                    !recorded.same_query(&model.query)
                        || !same_identity(&recorded.identity, &model.identity())
                }
            })
            .map(|model| model.name.clone())
            .collect();
        Self {
            selected_reason: Reason::Changed,
            ..Self::new(graph, Some(changed))
        }
    }

    /// Adds `models` (the models of pipelines that repair a drifted source), with
    /// everything downstream of them.
    #[must_use]
    pub fn with_source_drift(
        mut self,
        graph: &stb_graph::ModelGraph,
        models: BTreeSet<String>,
    ) -> Self {
        let fresh: BTreeSet<String> = models
            .into_iter()
            .filter(|m| !self.scope.contains(m))
            .collect();
        self.scope.extend(graph.with_descendants(&fresh));
        self.source_drift.extend(fresh);
        self
    }

    /// Adds, again and again, the upstream models of the scope whose relations are absent
    /// (`present` says whether a relation exists), with everything downstream of them.
    #[must_use]
    pub fn with_missing_upstream(
        mut self,
        graph: &stb_graph::ModelGraph,
        models: &[PlanModel],
        present: &dyn Fn(&str) -> bool,
    ) -> Self {
        let by_name = crate::work::ModelIndex::new(models);
        loop {
            let missing: BTreeSet<String> = self
                .scope
                .iter()
                .filter_map(|name| by_name.get(name.as_str()))
                .flat_map(|model| model.reads.iter())
                .filter(|read| !self.scope.contains(*read))
                .filter_map(|read| by_name.get(read.as_str()))
                .filter(|upstream| !upstream.relations.iter().all(|(_, r)| present(r)))
                .map(|upstream| upstream.name.clone())
                .collect();
            if missing.is_empty() {
                return self;
            }
            self.scope.extend(graph.with_descendants(&missing));
            self.missing_upstream.extend(missing);
        }
    }
}

/// A model's last recorded build, as `--changed` compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedModel {
    /// SHA-256 of the query text built.
    pub definition_hash: String,
    /// The query text built (empty when the record kept none).
    pub definition_sql: String,
    /// The identity JSON built ([`PlanModel::identity`]).
    pub identity: String,
}

impl RecordedModel {
    /// True when `query` is the query built: the same text, or the same once its casts'
    /// types are spelled as the server prints them.
    #[must_use]
    pub fn same_query(&self, query: &str) -> bool {
        self.definition_hash == crate::sql_change::sql_hash(query)
            || (!self.definition_sql.is_empty()
                && crate::sql_change::same_query(&self.definition_sql, query))
    }
}

/// Identities compare as JSON values, so key order and spacing do not count, nor how an
/// output column's type is spelled.
fn same_identity(recorded: &str, current: &str) -> bool {
    let canonical = |text: &str| {
        let mut value = serde_json::from_str::<serde_json::Value>(text).ok()?;
        if let Some(columns) = value
            .get_mut("output_columns")
            .and_then(serde_json::Value::as_array_mut)
        {
            for column in columns {
                if let Some(slot) = column.get_mut("type")
                    && let Some(data_type) = slot.as_str()
                {
                    *slot = stb_sql::types::canonical_type(data_type).into();
                }
            }
        }
        Some(value)
    };
    match (canonical(recorded), canonical(current)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The model graph of `models`: pipelines, models and the edges between models.
#[must_use]
pub fn model_graph(models: &[PlanModel]) -> stb_graph::ModelGraph {
    let mut graph = stb_graph::ModelGraph::new();
    for model in models {
        graph.add_pipeline(&model.pipeline);
        graph.add_model(&model.pipeline, &model.name);
    }
    let names: BTreeSet<&str> = models.iter().map(|m| m.name.as_str()).collect();
    for model in models {
        for upstream in model.reads.iter().filter(|r| names.contains(r.as_str())) {
            graph.add_edge(upstream, &model.name);
        }
    }
    graph
}

/// A plan that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub message: String,
    pub hint: &'static str,
}

/// Plans a direct build. `models` are in topological order; `present` says whether a
/// relation exists in the target database now.
///
/// # Errors
/// A prerequisite model that does not exist and is not rebuilt.
pub fn plan_direct(
    models: &[PlanModel],
    sources: &[PlanSource],
    selection: &Selection,
    present: &dyn Fn(&str) -> bool,
) -> Result<DirectPlan, PlanError> {
    let by_name = crate::work::ModelIndex::new(models);
    let scope = &selection.scope;
    let in_scope: Vec<&PlanModel> = models.iter().filter(|m| scope.contains(&m.name)).collect();
    let prerequisites = prerequisites(&in_scope, scope, &by_name, sources, present)?;
    let stages = stages(&in_scope, scope);
    let (replay_roots, root_names) = replay_roots(&in_scope, scope, &by_name, sources, &stages);
    let entries = in_scope
        .iter()
        .map(|m| Entry {
            model: m.name.clone(),
            reason: match &selection.selected {
                _ if selection.missing_upstream.contains(&m.name) => Reason::MissingUpstream,
                _ if selection.source_drift.contains(&m.name) => Reason::SourceDrift,
                None => Reason::AllModels,
                Some(chosen) if chosen.contains(&m.name) => selection.selected_reason,
                Some(_) => Reason::DownstreamOfSelected,
            },
            is_replay_root: root_names.contains(m.name.as_str()),
        })
        .collect();
    let ordered = |kinds: &[RelationKind], reverse: bool| {
        let mut list: Vec<&PlanModel> = in_scope.clone();
        if reverse {
            list.reverse();
        }
        kinds
            .iter()
            .flat_map(|kind| {
                list.iter()
                    .flat_map(|m| m.relations.iter())
                    .filter(move |(k, _)| k == kind)
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    use RelationKind::{MaterializedView, Table, View};
    // A fan-in's view is created in its own stage, right before its replay; the views
    // of everything else go live before the first replay.
    let mut deferred: Vec<(usize, &String)> = replay_roots
        .iter()
        .filter(|root| root.stage > 0)
        .filter_map(|root| by_name.get(root.model.as_str()).map(|m| (root.stage, m)))
        .flat_map(|(stage, model)| {
            model
                .relations
                .iter()
                .filter(|(kind, _)| *kind == MaterializedView)
                .map(move |(_, relation)| (stage, relation))
        })
        .collect();
    // In stage order (a stable sort keeps each stage's views in root order).
    deferred.sort_by_key(|(stage, _)| *stage);
    let later: Vec<(RelationKind, String)> = deferred
        .iter()
        .map(|(_, relation)| (MaterializedView, (*relation).clone()))
        .collect();
    let deferred_views: BTreeSet<&String> = deferred.iter().map(|(_, r)| *r).collect();
    let now: Vec<(RelationKind, String)> = ordered(&[MaterializedView], true)
        .into_iter()
        .filter(|(_, relation)| !deferred_views.contains(relation))
        .collect();
    Ok(DirectPlan {
        entries,
        prerequisites,
        replay_roots,
        teardown: ordered(&[View, MaterializedView, Table], true),
        // Materialized views go live leaves first: when a view starts writing, every view
        // downstream of it already listens, so each row it writes reaches the whole closure.
        creation: [ordered(&[Table], false), now, ordered(&[View], false), later].concat(),
        warnings: in_scope
            .iter()
            .filter(|m| m.has_mutable_ref)
            .map(|m| format!("mutable_ref_replay_not_guaranteed: '{}' reads a mutable side input; exact historical replay equivalence cannot be guaranteed", m.name))
            .collect(),
    })
}

fn prerequisites(
    in_scope: &[&PlanModel],
    scope: &BTreeSet<String>,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    present: &dyn Fn(&str) -> bool,
) -> Result<Vec<Prerequisite>, PlanError> {
    let upstream: BTreeSet<&str> = in_scope
        .iter()
        .flat_map(|m| m.reads.iter())
        .filter(|r| !scope.contains(*r))
        .map(String::as_str)
        .collect();
    let mut found = Vec::new();
    for name in upstream {
        let source = sources.iter().find(|s| s.name == name);
        let framework_managed = source.is_some_and(|s| s.framework_managed);
        let exists = match (by_name.get(name), source) {
            // A model exists when every relation it owns does.
            (Some(model), _) => model.relations.iter().all(|(_, r)| present(r)),
            (None, Some(source)) => source.relation.as_deref().is_none_or(present),
            (None, None) => present(name),
        };
        if let Some(model) = by_name.get(name)
            && !exists
        {
            return Err(PlanError {
                message: format!(
                    "'{name}' is read by the selection but does not exist (built by pipeline {}; add it to the selection)",
                    model.pipeline
                ),
                hint: "select it too, or use --include-missing-upstream",
            });
        }
        found.push(Prerequisite {
            name: name.to_owned(),
            present: exists,
            framework_managed,
        });
    }
    Ok(found)
}

/// When each model in scope is complete (by stage), and which rebuilt side inputs each
/// fan-in waits for. A model is complete in the stage its driving input is, unless it
/// joins a side input rebuilt in this build: then it replays itself, one stage after its
/// last rebuilt input (side or driving) is complete. `in_scope` is in topological order.
fn stages(in_scope: &[&PlanModel], scope: &BTreeSet<String>) -> BTreeMap<String, Stage> {
    let mut stages: BTreeMap<String, Stage> = BTreeMap::new();
    for model in in_scope {
        let done = |name: &String| stages.get(name).map_or(0, |s| s.done);
        let rebuilt = |name: &&String| scope.contains(*name);
        let waits_for: Vec<String> = if model.is_table {
            model
                .reads
                .iter()
                .filter(rebuilt)
                .filter(|read| Some(read.as_str()) != model.driving_input.as_deref())
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let inputs = model.reads.iter().filter(rebuilt).map(done).max();
        let stage = if waits_for.is_empty() {
            Stage {
                done: inputs.unwrap_or(0),
                waits_for,
            }
        } else {
            Stage {
                done: inputs.unwrap_or(0) + 1,
                waits_for,
            }
        };
        stages.insert(model.name.clone(), stage);
    }
    stages
}

/// When a model is complete, and the rebuilt side inputs it waits for.
struct Stage {
    done: usize,
    waits_for: Vec<String>,
}

/// Each table model's chain of driving inputs, climbed while the parent is rebuilt too and
/// the model is not a fan-in (which replays itself). Roots come in stage order.
fn replay_roots<'m>(
    in_scope: &[&'m PlanModel],
    scope: &BTreeSet<String>,
    by_name: &crate::work::ModelIndex<'m>,
    sources: &[PlanSource],
    stages: &BTreeMap<String, Stage>,
) -> (Vec<ReplayRoot>, BTreeSet<&'m str>) {
    let fan_in = |model: &PlanModel| {
        stages
            .get(&model.name)
            .is_some_and(|s| !s.waits_for.is_empty())
    };
    let scheduled: BTreeSet<&str> = sources
        .iter()
        .filter(|s| s.scheduled_pull)
        .map(|s| s.name.as_str())
        .collect();
    let mut roots: Vec<ReplayRoot> = Vec::new();
    let mut root_at: BTreeMap<&str, usize> = BTreeMap::new();
    // Each table model's top, found from its parent's (`in_scope` is in topological
    // order): one step per model instead of a climb of the whole chain for each.
    let mut top_of: BTreeMap<&str, &'m PlanModel> = BTreeMap::new();
    for model in in_scope.iter().filter(|m| m.is_table) {
        let parent = Some(*model)
            .filter(|t| !fan_in(t))
            .and_then(|t| t.driving_input.as_deref())
            .filter(|p| scope.contains(*p))
            .and_then(|p| by_name.get(p))
            .filter(|p| p.is_table);
        let top: &'m PlanModel = match parent {
            Some(parent) => top_of.get(parent.name.as_str()).copied().unwrap_or(parent),
            None => model,
        };
        top_of.insert(model.name.as_str(), top);
        let Some(driving_input) = top.driving_input.clone() else {
            continue;
        };
        // The warehouse refreshes scheduled pulls itself; there is nothing to replay.
        if scheduled.contains(driving_input.as_str()) {
            continue;
        }
        match root_at.get(top.name.as_str()).map(|&at| &mut roots[at]) {
            Some(root) if top.name != model.name => root.propagated.push(model.name.clone()),
            Some(_) => {}
            None => {
                let stage = stages.get(&top.name);
                let mut root = ReplayRoot {
                    model: top.name.clone(),
                    driving_input,
                    propagated: Vec::new(),
                    stage: stage
                        .filter(|s| !s.waits_for.is_empty())
                        .map_or(0, |s| s.done),
                    waits_for: stage.map(|s| s.waits_for.clone()).unwrap_or_default(),
                };
                if top.name != model.name {
                    root.propagated.push(model.name.clone());
                }
                root_at.insert(top.name.as_str(), roots.len());
                roots.push(root);
            }
        }
    }
    roots.sort_by_key(|root| root.stage);
    let names = roots
        .iter()
        .filter_map(|r| by_name.get(r.model.as_str()).map(|m| m.name.as_str()))
        .collect();
    (roots, names)
}

#[cfg(test)]
mod tests;
