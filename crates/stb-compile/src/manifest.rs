//! `manifest.json` and `streambuild_dag.json`: sorted keys, two-space indent, ASCII only,
//! one trailing newline, so equal projects give equal bytes.
//!
//! The documents are typed structs with borrowed fields, serialised straight to text: a
//! `serde_json::Value` tree of a 10,000-model manifest would cost several times its size.
//! Struct fields are declared in alphabetical order because that is the key order.

use std::collections::BTreeMap;

use serde::Serialize;
use stb_ddl::ManagedSource;
use stb_model::keys::{Retention, WhenMissing};
use stb_project::Project;
use stb_project::pipelines::ModelKind;
use stb_project::refs::RefType;
use stb_project::sources::{SourceKind, SourceRetention};

use crate::model::{AnalysedModel, AppliedRetention, CompiledModel};

/// Pretty JSON with every non-ASCII character escaped as `\uXXXX`, and a trailing newline.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    // Measured first, then written into a buffer of exactly that size: a growing buffer
    // doubles, and the copy at its last doubling held twice a 23 MB manifest (10,000
    // models) at the compile's peak memory. The second pass costs ~5% of compile time.
    let mut counter = Counter(0);
    let mut bytes = Vec::new();
    if serde_json::to_writer_pretty(&mut counter, value).is_ok() {
        bytes.reserve_exact(counter.0 + 1);
    }
    let _ = serde_json::to_writer_pretty(&mut bytes, value);
    let text = String::from_utf8(bytes).unwrap_or_default();
    if text.is_ascii() {
        return text + "\n";
    }
    let mut out = String::with_capacity(text.len() + 64);
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

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Serialize)]
struct Resource<'a> {
    kind: &'a str,
    name: &'a str,
    path: String,
}

#[derive(Serialize)]
struct AllowedReference<'a> {
    downstream_pipeline: &'a str,
    upstream_pipeline: &'a str,
}

#[derive(Serialize)]
struct Dependencies<'a> {
    allowed_cross_pipeline_references: Vec<AllowedReference<'a>>,
    model_reference_scope: &'a str,
}

#[derive(Serialize)]
struct MacroEntry<'a> {
    file: &'a str,
    source: &'a str,
}

#[derive(Serialize)]
struct Metadata {
    manifest_version: u32,
    tool: &'static str,
}

#[derive(Serialize)]
struct PipelineEntry<'a> {
    file: &'a str,
    models: Vec<&'a str>,
    name: &'a str,
    relations: BTreeMap<&'a str, &'a str>,
    replay_lineage_mode: Option<&'a str>,
    resolved_database: &'a str,
    source_name: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum RetentionEntry<'a> {
    Disabled {
        origin: &'a str,
        status: &'static str,
    },
    Source {
        cap_at: Option<&'static str>,
        duration_seconds: u64,
        fallback: &'static str,
        origin: &'a str,
        status: &'static str,
        timestamp: &'static str,
    },
    Model {
        cap_at_column: Option<&'a str>,
        duration_seconds: u64,
        origin: &'a str,
        status: &'static str,
        timestamp_column: &'a str,
        when_missing: &'static str,
    },
}

#[derive(Serialize)]
struct SourceEntry<'a> {
    /// The target database the relation lives in (a table function has none).
    database: Option<&'a str>,
    logical_key: String,
    name: &'a str,
    /// The bare relation (`raw__S`, the adopted table) or the `postgresql(...)` text.
    relation_name: Option<&'a str>,
    /// What a reference to the source becomes in model SQL (qualified, or the adopted
    /// table's aliasing subquery).
    reference: Option<&'a str>,
    replay_lineage_mode: Option<&'a str>,
    resources: Vec<Resource<'a>>,
    retention: Option<RetentionEntry<'a>>,
    ttl: Option<&'a str>,
}

#[derive(Serialize)]
struct ColumnEntry<'a> {
    default: Option<&'a str>,
    name: &'a str,
    #[serde(rename = "type")]
    data_type: &'a str,
}

#[derive(Serialize)]
struct Spec<'a> {
    columns: Vec<ColumnEntry<'a>>,
    engine: &'a str,
    order_by: &'a [String],
    partition_by: Option<&'a str>,
    settings: Option<BTreeMap<&'a str, &'a str>>,
    ttl: Option<&'a str>,
}

#[derive(Serialize)]
struct ModelEntry<'a> {
    /// The header's column descriptions; absent when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    column_descriptions: &'a BTreeMap<String, String>,
    /// Each output column's inputs one step up, as the model's own query says
    /// (`stb lineage` follows them; docs/models.md#column-lineage).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    column_lineage: BTreeMap<String, crate::column_lineage::Step>,
    /// The header's `description`; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    logical_key: String,
    name: &'a str,
    pipeline: &'a str,
    query_path: String,
    refs: Vec<&'a str>,
    relation_name: &'a str,
    /// Table models only: absent for views.
    #[serde(skip_serializing_if = "Option::is_none")]
    replay: Option<ReplayEntry>,
    resources: Vec<Resource<'a>>,
    /// Table models only: absent for views.
    #[serde(skip_serializing_if = "Option::is_none")]
    retention: Option<Option<RetentionEntry<'a>>>,
    source: Option<&'a str>,
    spec: Option<Spec<'a>>,
}

#[derive(Serialize)]
struct ReplayEntry {
    aggregate: bool,
    anchor_eligible: bool,
    lineage_preserved: bool,
    mutable_references: bool,
}

#[derive(Serialize)]
struct Manifest<'a> {
    artifacts: Vec<&'a str>,
    audits: BTreeMap<&'a str, AuditEntry<'a>>,
    dependencies: Dependencies<'a>,
    macros: BTreeMap<&'a str, MacroEntry<'a>>,
    metadata: Metadata,
    models: BTreeMap<&'a str, ModelEntry<'a>>,
    pipelines: BTreeMap<&'a str, PipelineEntry<'a>>,
    sources: BTreeMap<&'a str, SourceEntry<'a>>,
    tests: BTreeMap<&'a str, TestEntry<'a>>,
}

#[derive(Serialize)]
struct AuditEntry<'a> {
    attachment: &'a crate::audits::Attachment,
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    /// Seconds between scheduled runs; absent when the audit runs only on demand.
    every_seconds: Option<u64>,
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    generic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    models: &'a [String],
    name: &'a str,
    path: &'a str,
    scheduled: bool,
    severity: &'a str,
    warmup_seconds: u64,
}

#[derive(Serialize)]
struct TestEntry<'a> {
    assertions: &'a [String],
    file: &'a str,
    mode: &'a str,
    name: &'a str,
    path: &'a str,
    targets: &'a [String],
}

pub(crate) fn manifest(
    project: &Project,
    models: &[(&AnalysedModel<'_>, CompiledModel)],
    managed: &BTreeMap<String, ManagedSource>,
    relations: &BTreeMap<String, String>,
    files: &BTreeMap<String, String>,
    tests: &[crate::sql_tests::CompiledTest],
    audits: &[crate::audits::CompiledAudit],
) -> String {
    let database = project.database.as_deref().unwrap_or("default");
    let mut artifacts = vec!["manifest.json", "streambuild_dag.json"];
    artifacts.extend(files.keys().map(String::as_str));
    let pipelines = project
        .pipelines
        .iter()
        .map(|pipeline| {
            let mut pipeline_relations = BTreeMap::new();
            for name in pipeline
                .source
                .iter()
                .chain(pipeline.models.iter().map(|m| &m.name))
            {
                if let Some(relation) = relations.get(name) {
                    pipeline_relations.insert(name.as_str(), relation.as_str());
                }
            }
            (
                pipeline.name.as_str(),
                PipelineEntry {
                    file: &pipeline.directory,
                    models: pipeline.models.iter().map(|m| m.name.as_str()).collect(),
                    name: &pipeline.name,
                    relations: pipeline_relations,
                    replay_lineage_mode: crate::lineage_mode(project, pipeline),
                    resolved_database: database,
                    source_name: pipeline.source.as_deref(),
                },
            )
        })
        .collect();
    let sources = project
        .sources
        .iter()
        .map(|source| {
            let objects = managed.get(&source.name);
            let resources = objects
                .map(|o| {
                    let base = format!("compiled/resources/sources/{}", source.name);
                    vec![
                        Resource {
                            kind: "managed_source",
                            name: &o.kafka.name.name,
                            path: format!("{base}/kafka__{}.sql", source.name),
                        },
                        Resource {
                            kind: "table",
                            name: &o.raw.name.name,
                            path: format!("{base}/raw__{}.sql", source.name),
                        },
                        Resource {
                            kind: "materialized_view",
                            name: &o.landing.name.name,
                            path: format!("{base}/mv__{}.sql", source.name),
                        },
                    ]
                })
                .unwrap_or_default();
            let retention = source
                .kafka
                .as_ref()
                .and_then(|k| k.retention)
                .map(|r| match r {
                    SourceRetention::Disabled => RetentionEntry::Disabled {
                        origin: "source",
                        status: "disabled",
                    },
                    SourceRetention::Policy {
                        duration_seconds,
                        cap_at_landed,
                    } => RetentionEntry::Source {
                        cap_at: cap_at_landed.then_some("landed"),
                        duration_seconds,
                        fallback: "landed",
                        origin: "source",
                        status: "applied",
                        timestamp: "broker",
                    },
                });
            let reference = relations.get(&source.name).map(String::as_str);
            let bare = match source.kind {
                SourceKind::Kafka => objects.map(|o| o.raw.name.name.as_str()),
                SourceKind::StreamTable => source.table_name.as_deref(),
                SourceKind::Postgres => reference,
            };
            (
                source.name.as_str(),
                SourceEntry {
                    database: (source.kind != SourceKind::Postgres).then_some(database),
                    logical_key: format!("source:{}", source.name),
                    name: &source.name,
                    relation_name: bare,
                    reference,
                    replay_lineage_mode: source.replay_boundary.as_deref(),
                    resources,
                    retention,
                    ttl: objects.and_then(|o| o.raw.ttl.as_deref()),
                },
            )
        })
        .collect();
    let lineage = crate::column_lineage::Names::of_references(project, relations);
    // Every model's query is read again for its lineage: on every core.
    let steps = stb_project::parallel::map_ordered(models, |(_, compiled)| {
        column_steps(&lineage, compiled)
    });
    let model_entries = models
        .iter()
        .zip(steps)
        .map(|((item, compiled), steps)| {
            (item.model.name.as_str(), model_entry(item, compiled, steps))
        })
        .collect();
    to_json(&Manifest {
        artifacts,
        dependencies: Dependencies {
            allowed_cross_pipeline_references: project
                .defaults
                .allowed_cross_pipeline_references
                .iter()
                .map(|(up, down)| AllowedReference {
                    downstream_pipeline: down,
                    upstream_pipeline: up,
                })
                .collect(),
            model_reference_scope: if project.defaults.pipeline_reference_scope {
                "pipeline"
            } else {
                "project"
            },
        },
        macros: project
            .macros
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    MacroEntry {
                        file: &m.file,
                        source: &m.source,
                    },
                )
            })
            .collect(),
        metadata: Metadata {
            manifest_version: 1,
            tool: "streambuild",
        },
        models: model_entries,
        pipelines,
        sources,
        audits: audits
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    AuditEntry {
                        attachment: &a.attachment,
                        column: a.column.as_deref(),
                        description: a.description.as_deref(),
                        every_seconds: a.every_seconds,
                        file: &a.file,
                        generic: a.generic.as_deref(),
                        model: a.model.as_deref(),
                        models: &a.models,
                        name: &a.name,
                        path: &a.path,
                        scheduled: a.every_seconds.is_some(),
                        severity: &a.severity,
                        warmup_seconds: a.warmup_seconds,
                    },
                )
            })
            .collect(),
        tests: tests
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    TestEntry {
                        assertions: &t.assertions,
                        file: &t.file,
                        mode: t.mode,
                        name: &t.name,
                        path: &t.path,
                        targets: &t.targets,
                    },
                )
            })
            .collect(),
    })
}

/// One model's entry value as `manifest.json` holds it (inside `"models"`, so every line
/// after the first indented four more spaces), for an incremental compile to splice in.
pub(crate) fn model_fragment(
    item: &AnalysedModel<'_>,
    compiled: &CompiledModel,
    lineage: &crate::column_lineage::Names,
) -> String {
    let text = to_json(&model_entry(
        item,
        compiled,
        column_steps(lineage, compiled),
    ));
    // JSON strings hold no raw newline: each one in the text starts a line.
    text.trim_end_matches('\n').replace('\n', "\n    ")
}

/// A model's columns one step up, as its own query says. A query that compiled reads; were
/// it not to (or were it refused as too intricate), the entry says nothing rather than
/// something wrong.
fn column_steps(
    lineage: &crate::column_lineage::Names,
    compiled: &CompiledModel,
) -> BTreeMap<String, crate::column_lineage::Step> {
    lineage
        .query(&compiled.query)
        .map(|steps| steps.into_iter().collect())
        .unwrap_or_default()
}

fn model_entry<'a>(
    item: &'a AnalysedModel<'_>,
    compiled: &'a CompiledModel,
    column_lineage: BTreeMap<String, crate::column_lineage::Step>,
) -> ModelEntry<'a> {
    let base = format!(
        "compiled/resources/models/{}/{}",
        item.pipeline.name, item.model.name
    );
    let mut resources = Vec::new();
    if let Some(table) = &compiled.table {
        resources.push(Resource {
            kind: "table",
            name: &table.name.name,
            path: format!("{base}.table.sql"),
        });
    }
    if let Some(view) = &compiled.materialized_view {
        resources.push(Resource {
            kind: "materialized_view",
            name: &view.name.name,
            path: format!("{base}.mv.sql"),
        });
    }
    if let Some(view) = &compiled.view {
        resources.push(Resource {
            kind: "view",
            name: &view.name.name,
            path: format!("{base}.view.sql"),
        });
    }
    let spec = compiled.table.as_ref().map(|table| Spec {
        columns: table
            .columns
            .iter()
            .map(|c| ColumnEntry {
                default: None,
                name: &c.name,
                data_type: &c.data_type,
            })
            .collect(),
        engine: &table.engine,
        order_by: &table.order_by,
        partition_by: table.partition_by.as_deref(),
        settings: (!table.settings.is_empty()).then(|| {
            table
                .settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect()
        }),
        ttl: table.ttl.as_deref(),
    });
    let is_table = item.model.kind == ModelKind::Table;
    ModelEntry {
        column_descriptions: &item.model.docs.columns,
        column_lineage,
        description: item.model.docs.description.as_deref(),
        logical_key: format!("model:{}", item.model.name),
        name: &item.model.name,
        pipeline: &item.pipeline.name,
        query_path: format!(
            "compiled/models/{}/{}.sql",
            item.pipeline.name, item.model.name
        ),
        refs: item.model.refs.iter().map(|r| r.name.as_str()).collect(),
        relation_name: &item.relation,
        replay: compiled.replay.map(|r| ReplayEntry {
            aggregate: r.aggregate,
            anchor_eligible: r.anchor_eligible,
            lineage_preserved: r.lineage_preserved,
            mutable_references: r.mutable_references,
        }),
        resources,
        retention: is_table.then(|| compiled.retention.as_ref().map(model_retention)),
        source: if is_table {
            item.model.driving_input.as_deref()
        } else {
            None
        },
        spec,
    }
}

fn model_retention(applied: &AppliedRetention) -> RetentionEntry<'_> {
    match &applied.retention {
        Retention::Disabled => RetentionEntry::Disabled {
            origin: applied.origin,
            status: "disabled",
        },
        Retention::Policy {
            duration_seconds,
            timestamp_column,
            cap_at_column,
            when_missing,
        } => RetentionEntry::Model {
            cap_at_column: cap_at_column.as_deref(),
            duration_seconds: *duration_seconds,
            origin: applied.origin,
            status: if applied.applied {
                "applied"
            } else {
                "skipped"
            },
            timestamp_column,
            when_missing: if *when_missing == WhenMissing::Skip {
                "skip"
            } else {
                "error"
            },
        },
    }
}

#[derive(Serialize)]
struct Node<'a> {
    id: String,
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    edge_type: &'static str,
    from_id: String,
    to_id: String,
}

#[derive(Serialize)]
struct DagMetadata {
    dag_version: u32,
    tool: &'static str,
}

#[derive(Serialize)]
struct Dag<'a> {
    edges: Vec<Edge>,
    macros: Vec<&'a str>,
    metadata: DagMetadata,
    nodes: Vec<Node<'a>>,
    topological_order: &'a [String],
}

/// Nodes (sources by name, models in pipeline and file order, tests and audits by
/// identity) and edges: lineage, model → test per target model, model → audit per model
/// the audit reads.
pub(crate) fn dag(
    project: &Project,
    order: &[String],
    tests: &[crate::sql_tests::CompiledTest],
    audits: &[crate::audits::CompiledAudit],
) -> String {
    let mut sources: Vec<&str> = project.sources.iter().map(|s| s.name.as_str()).collect();
    sources.sort_unstable();
    let mut nodes: Vec<Node<'_>> = sources
        .iter()
        .map(|s| Node {
            id: format!("source:{s}"),
            name: s,
            kind: "source",
        })
        .collect();
    let mut edges: Vec<Edge> = Vec::new();
    for model in project.pipelines.iter().flat_map(|p| &p.models) {
        nodes.push(Node {
            id: format!("model:{}", model.name),
            name: &model.name,
            kind: "model",
        });
        for reference in &model.refs {
            let from_id = if sources.binary_search(&reference.name.as_str()).is_ok() {
                format!("source:{}", reference.name)
            } else {
                format!("model:{}", reference.name)
            };
            let edge_type = match (model.kind, reference.ref_type) {
                (ModelKind::View, _) | (_, Some(RefType::Reference)) => "reference",
                (_, Some(RefType::Mutable)) => "mutable_reference",
                (ModelKind::Table, None) => "driving_input",
            };
            edges.push(Edge {
                edge_type,
                from_id,
                to_id: format!("model:{}", model.name),
            });
        }
    }
    let mut quality: Vec<(&str, &str, &[String])> = Vec::new();
    let mut sorted_tests: Vec<&crate::sql_tests::CompiledTest> = tests.iter().collect();
    sorted_tests.sort_by(|a, b| a.name.cmp(&b.name));
    quality.extend(
        sorted_tests
            .iter()
            .map(|t| ("test", t.name.as_str(), t.targets.as_slice())),
    );
    let mut sorted_audits: Vec<&crate::audits::CompiledAudit> = audits.iter().collect();
    sorted_audits.sort_by(|a, b| a.name.cmp(&b.name));
    quality.extend(
        sorted_audits
            .iter()
            .map(|a| ("audit", a.name.as_str(), a.models.as_slice())),
    );
    let models: Vec<&str> = project
        .pipelines
        .iter()
        .flat_map(|p| p.models.iter().map(|m| m.name.as_str()))
        .collect();
    for (kind, name, targets) in quality {
        let id = format!("{kind}:{name}");
        for target in targets.iter().filter(|t| models.contains(&t.as_str())) {
            edges.push(Edge {
                edge_type: kind,
                from_id: format!("model:{target}"),
                to_id: id.clone(),
            });
        }
        nodes.push(Node { id, name, kind });
    }
    // Sorted by (from_id, to_id, edge_type).
    edges.sort_by(|a, b| {
        (&a.from_id, &a.to_id, a.edge_type).cmp(&(&b.from_id, &b.to_id, b.edge_type))
    });
    edges.dedup();
    let mut macros: Vec<&str> = project.macros.iter().map(|m| m.name.as_str()).collect();
    macros.sort_unstable();
    to_json(&Dag {
        edges,
        macros,
        metadata: DagMetadata {
            dag_version: 1,
            tool: "streambuild",
        },
        nodes,
        topological_order: order,
    })
}
