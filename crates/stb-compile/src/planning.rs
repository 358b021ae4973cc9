//! The compiled project as the planner sees it: plain values, in topological order.

use std::collections::BTreeMap;

use stb_plan::direct::{PlanModel, PlanSource, RelationKind};
use stb_project::Project;
use stb_project::pipelines::ModelKind;
use stb_project::refs::RefType;
use stb_project::sources::SourceKind;

use crate::model::{AnalysedModel, CompiledModel};

/// `order` holds `model:<name>` and `source:<name>` ids, upstream first.
pub(crate) fn models(
    order: &[String],
    compiled: &[(&AnalysedModel<'_>, CompiledModel)],
) -> Vec<PlanModel> {
    let by_name: BTreeMap<&str, &(&AnalysedModel<'_>, CompiledModel)> = compiled
        .iter()
        .map(|entry| (entry.0.model.name.as_str(), entry))
        .collect();
    order
        .iter()
        .filter_map(|id| id.strip_prefix("model:"))
        .filter_map(|name| by_name.get(name))
        .map(|(item, objects)| {
            let mut relations = Vec::new();
            if let Some(table) = &objects.table {
                relations.push((RelationKind::Table, table.name.name.clone()));
            }
            if let Some(view) = &objects.materialized_view {
                relations.push((RelationKind::MaterializedView, view.name.name.clone()));
            }
            if let Some(view) = &objects.view {
                relations.push((RelationKind::View, view.name.name.clone()));
            }
            let model = item.model;
            let mut reads: Vec<String> = model.refs.iter().map(|r| r.name.clone()).collect();
            reads.sort();
            reads.dedup();
            PlanModel {
                name: model.name.clone(),
                pipeline: item.pipeline.name.clone(),
                is_table: model.kind == ModelKind::Table,
                relations,
                reads,
                driving_input: model.driving_input.clone(),
                has_mutable_ref: model
                    .refs
                    .iter()
                    .any(|r| r.ref_type == Some(RefType::Mutable)),
            }
        })
        .collect()
}

/// `managed` holds the landing objects of each Kafka source.
pub(crate) fn sources(
    project: &Project,
    managed: &BTreeMap<String, stb_ddl::ManagedSource>,
) -> Vec<PlanSource> {
    project
        .sources
        .iter()
        .map(|source| PlanSource {
            name: source.name.clone(),
            framework_managed: matches!(source.kind, SourceKind::Kafka | SourceKind::Postgres),
            scheduled_pull: source.kind == SourceKind::Postgres,
            relation: match source.kind {
                SourceKind::Kafka => managed.get(&source.name).map(|m| m.raw.name.name.clone()),
                SourceKind::StreamTable => source.table_name.clone(),
                // Read through the postgresql() table function.
                SourceKind::Postgres => None,
            },
        })
        .collect()
}
