//! The compiled project as the planner sees it: plain values, in topological order.

use std::collections::BTreeMap;

use stb_model::planning::{PlanModel, PlanSource, RelationKind};
use stb_project::Project;
use stb_project::pipelines::ModelKind;
use stb_project::refs::RefType;
use stb_project::sources::SourceKind;

use crate::model::{AnalysedModel, CompiledModel};

/// `order` holds `model:<name>` and `source:<name>` ids, upstream first.
pub(crate) fn models(
    project: &Project,
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
            let mut create_statements = Vec::new();
            let mut reference = String::new();
            let mut storage = String::new();
            let sharding_key = sharding_key(project, item, objects);
            if let Some(table) = &objects.table {
                relations.push((RelationKind::Table, table.name.name.clone()));
                create_statements.push(table.render());
                reference = table.name.to_string();
                storage = storage_identity(table, sharding_key.as_deref());
            }
            if let Some(view) = &objects.materialized_view {
                relations.push((RelationKind::MaterializedView, view.name.name.clone()));
                create_statements.push(view.render());
            }
            if let Some(view) = &objects.view {
                relations.push((RelationKind::View, view.name.name.clone()));
                create_statements.push(view.render());
                reference = view.name.to_string();
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
                create_statements,
                query: objects.query.clone(),
                reference,
                output_columns: item
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.data_type.clone()))
                    .collect(),
                storage,
                boundary_mode: crate::lineage_mode(project, item.pipeline).map(str::to_owned),
                aggregate: objects.replay.is_some_and(|r| r.aggregate),
                replay_query: objects.replay_query.clone(),
                replay_settings: item.header.replay_settings.clone(),
                // The objects' queries stay empty: the parts carry the query once.
                deployable: stb_model::planning::Deployable {
                    table: objects.table.clone(),
                    materialized_view: objects.materialized_view.as_ref().map(|view| {
                        stb_ddl::MaterializedView {
                            query: String::new(),
                            ..view.clone()
                        }
                    }),
                    view: objects.view.as_ref().map(|view| stb_ddl::View {
                        query: String::new(),
                        ..view.clone()
                    }),
                    query_parts: objects.query_parts.clone(),
                },
                replay_policy: stb_model::planning::ReplayPolicy {
                    breaking: item
                        .header
                        .replay_on_change
                        .as_ref()
                        .and_then(|(breaking, _)| breaking.clone()),
                    non_breaking: item
                        .header
                        .replay_on_change
                        .as_ref()
                        .and_then(|(_, non_breaking)| non_breaking.clone()),
                    fallback: item.header.bounded_replay_fallback.clone(),
                }
                .within(
                    &item
                        .pipeline
                        .replay_policy
                        .within(&project.defaults.replay_policy),
                ),
                sharding_key,
            }
        })
        .collect()
}

/// A table model's sharding key on a sharded target: its own, else the cluster's default.
fn sharding_key(
    project: &Project,
    item: &AnalysedModel<'_>,
    objects: &CompiledModel,
) -> Option<String> {
    let cluster = project.cluster.as_ref()?;
    if cluster.topology != stb_ddl::cluster::Topology::Sharded || objects.table.is_none() {
        return None;
    }
    item.header
        .sharding_key
        .clone()
        .or_else(|| cluster.sharding_key.clone())
}

/// What decides a table's physical layout, compared by `--changed`: on a sharded target
/// also the key that places its rows (absent elsewhere, so one server's identities stay
/// as they were).
fn storage_identity(table: &stb_ddl::Table, sharding_key: Option<&str>) -> String {
    let mut settings = table.settings.clone();
    settings.sort();
    let mut identity = serde_json::json!({
        "engine": table.engine,
        "order_by": table.order_by,
        "partition_by": table.partition_by,
        "ttl": table.ttl,
        "settings": settings,
    });
    if let (Some(key), Some(object)) = (sharding_key, identity.as_object_mut()) {
        object.insert("sharding_key".to_owned(), serde_json::Value::from(key));
    }
    identity.to_string()
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
            reference: crate::relations::source_relation(crate::database(project), source),
            replay_columns: match source.kind {
                SourceKind::Kafka => [
                    "_replay_partition",
                    "_replay_offset",
                    "_replay_timestamp",
                    "_replay_landed_at",
                ]
                .map(str::to_owned)
                .to_vec(),
                SourceKind::StreamTable => source
                    .columns
                    .iter()
                    .map(|(role, _)| role.clone())
                    .collect(),
                SourceKind::Postgres => Vec::new(),
            },
            landing: managed
                .get(&source.name)
                .map(|objects| stb_model::planning::Landing {
                    kafka_table: objects.kafka.name.name.clone(),
                    raw_table: objects.raw.name.name.clone(),
                    view: objects.landing.name.name.clone(),
                    create_kafka: objects
                        .kafka
                        .render_if_not_exists(stb_ddl::Audience::Runtime),
                    create_kafka_recorded: objects
                        .kafka
                        .render_if_not_exists(stb_ddl::Audience::Artifact),
                    create_raw: objects.raw.render_if_not_exists(),
                    raw_definition: Some(objects.raw.clone()),
                    create_view: objects.landing.render_if_not_exists(),
                    kafka_definition: Some(objects.kafka.clone()),
                    view_definition: Some(objects.landing.clone()),
                    consumer_group: objects.kafka.group.clone(),
                    brokers: objects.kafka.broker_list.clone(),
                    settings: objects.kafka.settings.clone(),
                }),
        })
        .collect()
}
