//! `manifest.json` and `streambuild_dag.json`: sorted keys, two-space indent, ASCII only,
//! one trailing newline, so equal projects give equal bytes.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use stb_ddl::ManagedSource;
use stb_model::keys::{Retention, WhenMissing};
use stb_project::Project;
use stb_project::pipelines::ModelKind;
use stb_project::refs::RefType;
use stb_project::sources::SourceRetention;

use crate::model::{AnalysedModel, AppliedRetention, CompiledModel};

/// Pretty JSON with every non-ASCII character escaped as `\uXXXX`.
pub(crate) fn to_json(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if ch.is_ascii() {
            out.push(ch);
        } else {
            let mut units = [0_u16; 2];
            for unit in ch.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.push('\n');
    out
}

fn resource(kind: &str, name: &str, path: &str) -> Value {
    json!({"kind": kind, "name": name, "path": path})
}

pub(crate) fn manifest(
    project: &Project,
    models: &[(&AnalysedModel<'_>, CompiledModel)],
    managed: &BTreeMap<String, ManagedSource>,
    relations: &BTreeMap<String, String>,
    files: &BTreeMap<String, String>,
) -> String {
    let database = project
        .database
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let mut artifacts = vec![
        "manifest.json".to_owned(),
        "streambuild_dag.json".to_owned(),
    ];
    artifacts.extend(files.keys().cloned());
    let allowed: Vec<Value> = project
        .defaults
        .allowed_cross_pipeline_references
        .iter()
        .map(|(up, down)| json!({"upstream_pipeline": up, "downstream_pipeline": down}))
        .collect();
    let macros: serde_json::Map<String, Value> = project
        .macros
        .iter()
        .map(|m| (m.name.clone(), json!({"file": m.file, "source": m.source})))
        .collect();
    let mut pipelines = serde_json::Map::new();
    for pipeline in &project.pipelines {
        let mut pipeline_relations = serde_json::Map::new();
        if let Some(source) = &pipeline.source
            && let Some(relation) = relations.get(source)
        {
            pipeline_relations.insert(source.clone(), json!(relation));
        }
        for model in &pipeline.models {
            if let Some(relation) = relations.get(&model.name) {
                pipeline_relations.insert(model.name.clone(), json!(relation));
            }
        }
        pipelines.insert(
            pipeline.name.clone(),
            json!({
                "file": pipeline.directory,
                "models": pipeline.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
                "name": pipeline.name,
                "relations": pipeline_relations,
                "resolved_database": database,
                "source_name": pipeline.source,
            }),
        );
    }
    let mut sources = serde_json::Map::new();
    for source in &project.sources {
        let resources: Vec<Value> = managed
            .get(&source.name)
            .map(|objects| {
                let base = format!("compiled/resources/sources/{}", source.name);
                vec![
                    resource(
                        "managed_source",
                        &objects.kafka.name.name,
                        &format!("{base}/kafka__{}.sql", source.name),
                    ),
                    resource(
                        "table",
                        &objects.raw.name.name,
                        &format!("{base}/raw__{}.sql", source.name),
                    ),
                    resource(
                        "materialized_view",
                        &objects.landing.name.name,
                        &format!("{base}/mv__{}.sql", source.name),
                    ),
                ]
            })
            .unwrap_or_default();
        let retention = source.kafka.as_ref().and_then(|k| k.retention).map(|r| match r {
            SourceRetention::Disabled => json!({"origin": "source", "status": "disabled"}),
            SourceRetention::Policy { duration_seconds, cap_at_landed } => json!({
                "origin": "source", "status": "applied", "duration_seconds": duration_seconds,
                "timestamp": "broker", "fallback": "landed", "cap_at": if cap_at_landed { json!("landed") } else { Value::Null },
            }),
        });
        sources.insert(
            source.name.clone(),
            json!({
                "logical_key": format!("source:{}", source.name),
                "name": source.name,
                "relation_name": relations.get(&source.name),
                "replay_lineage_mode": source.replay_boundary,
                "resources": resources,
                "retention": retention,
                "ttl": managed.get(&source.name).and_then(|o| o.raw.ttl.clone()),
            }),
        );
    }
    let mut model_entries = serde_json::Map::new();
    for (item, compiled) in models {
        let base = format!(
            "compiled/resources/models/{}/{}",
            item.pipeline.name, item.model.name
        );
        let mut resources = Vec::new();
        if let Some(table) = &compiled.table {
            resources.push(resource(
                "table",
                &table.name.name,
                &format!("{base}.table.sql"),
            ));
        }
        if let Some(view) = &compiled.materialized_view {
            resources.push(resource(
                "materialized_view",
                &view.name.name,
                &format!("{base}.mv.sql"),
            ));
        }
        if let Some(view) = &compiled.view {
            resources.push(resource(
                "view",
                &view.name.name,
                &format!("{base}.view.sql"),
            ));
        }
        let spec = compiled.table.as_ref().map(|table| {
            json!({
                "columns": table.columns.iter().map(|c| json!({"default": null, "name": c.name, "type": c.data_type})).collect::<Vec<_>>(),
                "engine": table.engine,
                "order_by": table.order_by,
                "partition_by": table.partition_by,
                "settings": if table.settings.is_empty() { Value::Null } else { json!(table.settings.iter().cloned().collect::<BTreeMap<_, _>>()) },
                "ttl": table.ttl,
            })
        });
        let mut entry = json!({
            "logical_key": format!("model:{}", item.model.name),
            "name": item.model.name,
            "pipeline": item.pipeline.name,
            "query_path": format!("compiled/models/{}/{}.sql", item.pipeline.name, item.model.name),
            "refs": item.model.refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            "relation_name": item.relation,
            "resources": resources,
            "source": if item.model.kind == ModelKind::Table { json!(item.model.driving_input) } else { Value::Null },
            "spec": spec,
        });
        if item.model.kind == ModelKind::Table
            && let Value::Object(map) = &mut entry
        {
            map.insert(
                "retention".to_owned(),
                model_retention(compiled.retention.as_ref()),
            );
        }
        model_entries.insert(item.model.name.clone(), entry);
    }
    to_json(&json!({
        "artifacts": artifacts,
        "dependencies": {
            "allowed_cross_pipeline_references": allowed,
            "model_reference_scope": if project.defaults.pipeline_reference_scope { "pipeline" } else { "project" },
        },
        "macros": macros,
        "metadata": {"manifest_version": 1, "tool": "streambuild"},
        "models": model_entries,
        "pipelines": pipelines,
        "sources": sources,
    }))
}

fn model_retention(retention: Option<&AppliedRetention>) -> Value {
    let Some(AppliedRetention {
        retention,
        origin,
        applied,
    }) = retention
    else {
        return Value::Null;
    };
    match retention {
        Retention::Disabled => json!({"origin": origin, "status": "disabled"}),
        Retention::Policy {
            duration_seconds,
            timestamp_column,
            cap_at_column,
            when_missing,
        } => json!({
            "origin": origin,
            "status": if *applied { "applied" } else { "skipped" },
            "duration_seconds": duration_seconds,
            "timestamp_column": timestamp_column,
            "cap_at_column": cap_at_column,
            "when_missing": if *when_missing == WhenMissing::Skip { "skip" } else { "error" },
        }),
    }
}

/// Nodes (sources by name, then models in pipeline and file order) and lineage edges.
pub(crate) fn dag(project: &Project, order: &[String]) -> String {
    let mut nodes: Vec<Value> = Vec::new();
    let mut sources: Vec<&str> = project.sources.iter().map(|s| s.name.as_str()).collect();
    sources.sort_unstable();
    for source in sources {
        nodes.push(json!({"id": format!("source:{source}"), "name": source, "type": "source"}));
    }
    let mut edges: Vec<(String, String, &str)> = Vec::new();
    let source_names: Vec<&str> = project.sources.iter().map(|s| s.name.as_str()).collect();
    for model in project.pipelines.iter().flat_map(|p| &p.models) {
        nodes.push(
            json!({"id": format!("model:{}", model.name), "name": model.name, "type": "model"}),
        );
        for reference in &model.refs {
            let from = if source_names.contains(&reference.name.as_str()) {
                format!("source:{}", reference.name)
            } else {
                format!("model:{}", reference.name)
            };
            let edge_type = match (model.kind, reference.ref_type) {
                (ModelKind::View, _) | (_, Some(RefType::Reference)) => "reference",
                (_, Some(RefType::Mutable)) => "mutable_reference",
                (ModelKind::Table, None) => "driving_input",
            };
            edges.push((from, format!("model:{}", model.name), edge_type));
        }
    }
    edges.sort();
    edges.dedup();
    let edges: Vec<Value> = edges
        .into_iter()
        .map(|(from, to, kind)| json!({"edge_type": kind, "from_id": from, "to_id": to}))
        .collect();
    let macros: Vec<&str> = {
        let mut names: Vec<&str> = project.macros.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        names
    };
    to_json(&json!({
        "edges": edges,
        "macros": macros,
        "metadata": {"dag_version": 1, "tool": "streambuild"},
        "nodes": nodes,
        "topological_order": order,
    }))
}
