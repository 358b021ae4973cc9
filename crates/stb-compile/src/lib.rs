//! The compiler: a discovered project in, every artifact's path and bytes out. Pure: it
//! reads nothing and writes nothing ([`publish`] does the writing).

mod audits;
mod blocks;
mod cluster;
pub mod column_lineage;
mod graph;
pub mod incremental;
mod manifest;
mod model;
mod planning;
pub mod publish;
mod relations;
mod sql_tests;

use std::collections::BTreeMap;

use stb_ddl::{Audience, KafkaSettings, ManagedSource};
use stb_diagnostics::{Diagnostic, Diagnostics, Location};
use stb_project::Project;
use stb_project::sources::{Source, SourceKind, SourceRetention};

pub mod codes {
    //! Compile diagnostic codes.
    pub const HEADER: &str = "STB-COMPILE-001";
    pub const CONTRACT: &str = "STB-COMPILE-002";
    pub const RELATION: &str = "STB-COMPILE-003";
    pub const GRAPH: &str = "STB-COMPILE-004";
    pub const SOURCE: &str = "STB-COMPILE-005";
    pub const PUBLISH: &str = "STB-COMPILE-007";
    pub const CLUSTER: &str = "STB-COMPILE-010";
}

/// Everything compile produces, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// Path under the target directory (POSIX separators) -> file contents.
    pub files: BTreeMap<String, String>,
    pub pipelines: usize,
    pub models: usize,
    /// Problems that do not stop the compile (a test mock nothing reads).
    pub warnings: Vec<Diagnostic>,
    /// The models as the planner sees them, in topological order; shared, not copied,
    /// by the plans made from them (at 10,000 models they are tens of megabytes).
    pub plan_models: std::sync::Arc<[stb_model::planning::PlanModel]>,
    /// The sources as the planner sees them.
    pub plan_sources: Vec<stb_model::planning::PlanSource>,
    /// The SQL tests, by name.
    pub tests: Vec<SqlTest>,
    /// The audits (standalone and generic instances), by name.
    pub audits: Vec<Audit>,
}

/// A compiled SQL test, as `stb test` runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlTest {
    pub name: String,
    /// The project file it comes from.
    pub file: String,
    /// Its artifact under `compiled/tests/`.
    pub path: String,
    /// `model` or `macro`.
    pub mode: &'static str,
    /// The models whose expected rows it compares.
    pub targets: Vec<String>,
    /// The one statement that compares them.
    pub statement: String,
}

/// A compiled audit, as `stb audit` and a build's audits run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    pub name: String,
    /// The project file it comes from.
    pub file: String,
    /// Its artifact under `compiled/audits/`.
    pub path: String,
    /// `error` or `warning`.
    pub severity: String,
    /// The models it reads, sorted.
    pub models: Vec<String>,
    /// How often `stb dev`'s audit scheduler runs it (`every`, from its header or the
    /// pipeline's or project's audit defaults); `None`: only on demand and after builds.
    pub every_seconds: Option<u64>,
    pub warmup_seconds: u64,
    /// The query as compiled (`__ref` markers kept): its rows are failures.
    pub query: String,
}

/// The database artifacts are rendered for: the target's, else ClickHouse's `default`.
fn database(project: &Project) -> &str {
    project.database.as_deref().unwrap_or("default")
}

/// What a compile produces besides the planner's view of the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Every artifact, with the manifest and the DAG (`stb compile`, builds).
    Artifacts,
    /// Only what a plan reads: no model resources, manifest or DAG in
    /// [`Compiled::files`] (at 10,000 models they are about 70 MB a plan never reads).
    PlanOnly,
    /// Every artifact, and no planner's view of the models ([`Compiled::plan_models`] is
    /// empty): `stb compile` writes files and plans nothing, and at 10,000 models that
    /// view is tens of megabytes at the compile's peak.
    FilesOnly,
}

impl Output {
    /// Whether the model resources, the manifest and the DAG are made.
    fn writes_files(self) -> bool {
        matches!(self, Self::Artifacts | Self::FilesOnly)
    }
}

/// Compiles a discovered project, with every artifact.
///
/// # Errors
/// Every problem found in headers, queries, references and the graph.
pub fn compile(project: &Project) -> Result<Compiled, Diagnostics> {
    compile_with(project, Output::Artifacts)
}

/// Compiles a discovered project, producing `output`.
///
/// # Errors
/// Every problem found in headers, queries, references and the graph.
pub fn compile_with(project: &Project, output: Output) -> Result<Compiled, Diagnostics> {
    compile_recording(project, output, false).map(|(compiled, _)| compiled)
}

/// Compiles and, when `record`, says per model what an incremental compile needs to know
/// about it (a plan does not need it: 10,000 hashes and names).
pub(crate) fn compile_recording(
    project: &Project,
    output: Output,
    record: bool,
) -> Result<(Compiled, Option<incremental::Facts>), Diagnostics> {
    let mut diagnostics = Diagnostics::new();
    let database = database(project);
    let all_models: Vec<_> = project
        .pipelines
        .iter()
        .flat_map(|p| p.models.iter().map(move |m| (p, m)))
        .collect();
    // SQL macros were expanded by discovery: model text is plain SQL here.
    let results = stb_project::parallel::map_ordered(&all_models, |(pipeline, model)| {
        model::analyse(model, pipeline, &project.defaults)
    });
    let mut analysed = Vec::new();
    let mut failed = std::collections::BTreeSet::new();
    for ((_, model), result) in all_models.iter().zip(results) {
        match result {
            Ok(item) => analysed.push(item),
            Err(problems) => {
                failed.insert(model.name.clone());
                problems.into_iter().for_each(|p| diagnostics.push(p));
            }
        }
    }
    let mut relations: BTreeMap<String, String> = BTreeMap::new();
    for source in &project.sources {
        if let Some(relation) = relations::source_relation(database, source) {
            relations.insert(source.name.clone(), relation);
        }
    }
    for item in &analysed {
        relations.insert(
            item.model.name.clone(),
            stb_ddl::QualifiedName::new(database, &item.relation).to_string(),
        );
    }
    let source_names: std::collections::BTreeSet<String> =
        project.sources.iter().map(|s| s.name.clone()).collect();
    let order = graph::order(project);
    for problem in graph::validate(project, &order) {
        diagnostics.push(problem);
    }
    let mut files = BTreeMap::new();
    let realised = stb_project::parallel::map_ordered(&analysed, |item| {
        let mode = lineage_mode(project, item.pipeline);
        let refresh = pulled_by(project, item.pipeline);
        model::realise(
            item,
            database,
            &model::Names {
                relations: &relations,
                sources: &source_names,
                failed: &failed,
            },
            &project.defaults,
            mode,
            refresh,
        )
    });
    let cluster = project
        .cluster
        .as_ref()
        .map(|config| (config, config.cluster()));
    let mut compiled_models = Vec::new();
    for (item, result) in analysed.iter().zip(realised) {
        match result {
            Ok(compiled) => {
                if let Some(problem) = cluster
                    .as_ref()
                    .and_then(|(config, c)| cluster::check(config, c, item, &compiled))
                {
                    diagnostics.push(problem);
                }
                compiled_models.push((item, compiled));
            }
            Err(problems) => problems.into_iter().for_each(|p| diagnostics.push(p)),
        }
    }
    let managed = managed_sources(project, &mut diagnostics);
    let tests = compile_tests(project, &analysed, &mut diagnostics);
    let audits = audits::compile(project, &analysed, &mut diagnostics);
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    for test in &tests {
        files.insert(test.path.clone(), test.statement.clone());
    }
    for audit in &audits {
        files.insert(audit.path.clone(), audit.query.clone());
    }
    let artifacts = if output.writes_files() {
        &compiled_models[..]
    } else {
        &[]
    };
    for (item, compiled) in artifacts {
        files.extend(model_files(item, compiled));
    }
    for (name, objects) in managed.iter().filter(|_| output.writes_files()) {
        files.insert(
            format!("compiled/resources/sources/{name}/kafka__{name}.sql"),
            objects.kafka.render(Audience::Artifact),
        );
        files.insert(
            format!("compiled/resources/sources/{name}/raw__{name}.sql"),
            objects.raw.render(),
        );
        files.insert(
            format!("compiled/resources/sources/{name}/mv__{name}.sql"),
            objects.landing.render(),
        );
    }
    // Every file ends with exactly one newline.
    for content in files.values_mut() {
        end_with_one_newline(content);
    }
    let order = order.unwrap_or_default();
    if output.writes_files() {
        let manifest = manifest::manifest(
            project,
            &compiled_models,
            &managed,
            &relations,
            &files,
            &tests,
            &audits,
        );
        let dag = manifest::dag(project, &order, &tests, &audits);
        files.insert("manifest.json".to_owned(), manifest);
        files.insert("streambuild_dag.json".to_owned(), dag);
    }
    let warnings = tests.iter().flat_map(|t| t.warnings.clone()).collect();
    let mut sql_tests: Vec<SqlTest> = tests
        .iter()
        .map(|t| SqlTest {
            name: t.name.clone(),
            file: t.file.clone(),
            path: t.path.clone(),
            mode: t.mode,
            targets: t.targets.clone(),
            statement: files
                .get(&t.path)
                .cloned()
                .unwrap_or_else(|| t.statement.clone()),
        })
        .collect();
    sql_tests.sort_by(|a, b| a.name.cmp(&b.name));
    let mut compiled_audits: Vec<Audit> = audits
        .iter()
        .map(|a| Audit {
            name: a.name.clone(),
            file: a.file.clone(),
            path: a.path.clone(),
            severity: a.severity.clone(),
            models: a.models.clone(),
            every_seconds: a.every_seconds,
            warmup_seconds: a.warmup_seconds,
            query: files
                .get(&a.path)
                .cloned()
                .unwrap_or_else(|| a.query.clone()),
        })
        .collect();
    compiled_audits.sort_by(|a, b| a.name.cmp(&b.name));
    let facts = record.then(|| incremental::Facts::of(&analysed, &tests, &audits));
    let compiled = Compiled {
        tests: sql_tests,
        audits: compiled_audits,
        plan_models: if output == Output::FilesOnly {
            std::sync::Arc::from([])
        } else {
            planning::models(project, &order, &compiled_models).into()
        },
        plan_sources: planning::sources(project, &managed),
        files,
        pipelines: project.pipelines.len(),
        models: compiled_models.len(),
        warnings,
    };
    Ok((compiled, facts))
}

/// A model's artifacts: its query, and its table, materialized view or view, each ending
/// with exactly one newline.
fn model_files(
    item: &model::AnalysedModel<'_>,
    compiled: &model::CompiledModel,
) -> Vec<(String, String)> {
    let base = format!("{}/{}", item.pipeline.name, item.model.name);
    let mut files = vec![(
        format!("compiled/models/{base}.sql"),
        compiled.query.clone(),
    )];
    if let Some(table) = &compiled.table {
        files.push((
            format!("compiled/resources/models/{base}.table.sql"),
            table.render(),
        ));
    }
    if let Some(view) = &compiled.materialized_view {
        files.push((
            format!("compiled/resources/models/{base}.mv.sql"),
            view.render(),
        ));
    }
    if let Some(view) = &compiled.view {
        files.push((
            format!("compiled/resources/models/{base}.view.sql"),
            view.render(),
        ));
    }
    for (_, content) in &mut files {
        end_with_one_newline(content);
    }
    files
}

fn end_with_one_newline(content: &mut String) {
    let trimmed = content.trim_end().len();
    content.truncate(trimmed);
    content.push('\n');
}

/// SQL tests: each compiled into one comparison statement under `compiled/tests/`.
fn compile_tests(
    project: &Project,
    analysed: &[model::AnalysedModel<'_>],
    diagnostics: &mut Diagnostics,
) -> Vec<sql_tests::CompiledTest> {
    let models: BTreeMap<&str, &model::AnalysedModel<'_>> = analysed
        .iter()
        .map(|a| (a.model.name.as_str(), a))
        .collect();
    let sources: std::collections::BTreeSet<&str> =
        project.sources.iter().map(|s| s.name.as_str()).collect();
    let mut tests: Vec<sql_tests::CompiledTest> = Vec::new();
    for (file, text) in &project.test_files {
        let original = project.test_originals.get(file).map(String::as_str);
        match sql_tests::compile_file(file, text, original, &models, &sources) {
            Ok(compiled) => {
                for mut test in compiled {
                    if let Some(first) = tests.iter().find(|t| t.name == test.name) {
                        diagnostics.push(
                            Diagnostic::new(
                                sql_tests::CODE,
                                format!(
                                    "Duplicate SQL test name '{}' in '{}' and '{}'",
                                    test.name, first.file, test.file
                                ),
                                "test names are unique across tests/; rename one",
                            )
                            .at(Location::file(&test.file)),
                        );
                        continue;
                    }
                    // One target: its name is the folder; several: a chain folder.
                    // No expected model (assertions only): the test's own name.
                    let folder = if let [one] = test.targets.as_slice() {
                        one.clone()
                    } else if test.targets.is_empty() {
                        test.name.clone()
                    } else {
                        let mut sorted = test.targets.clone();
                        sorted.sort();
                        sorted.dedup();
                        format!("_chain_/{}", sorted.join("__"))
                    };
                    test.path = format!("compiled/tests/{folder}/{}.sql", test.name);
                    tests.push(test);
                }
            }
            Err(problem) => diagnostics.push(problem),
        }
    }
    tests
}

/// For a pipeline fed by a Postgres pull: how its tables refresh.
fn pulled_by(
    project: &Project,
    pipeline: &stb_project::pipelines::Pipeline,
) -> Option<stb_ddl::Refresh> {
    let source = project
        .sources
        .iter()
        .find(|s| Some(&s.name) == pipeline.source.as_ref())?;
    let pg = source.postgres.as_ref()?;
    Some(stb_ddl::Refresh {
        every: pg.refresh.clone(),
        append: pg.append,
    })
}

/// A pipeline's replay lineage mode: its source's replay boundary (Postgres pulls count as
/// `offsets`); none for view-only pipelines.
pub(crate) fn lineage_mode<'p>(
    project: &'p Project,
    pipeline: &stb_project::pipelines::Pipeline,
) -> Option<&'p str> {
    let source = project
        .sources
        .iter()
        .find(|s| Some(&s.name) == pipeline.source.as_ref())?;
    match source.kind {
        SourceKind::Postgres => Some("offsets"),
        _ => source.replay_boundary.as_deref(),
    }
}

/// The effective TTL of a Kafka source's landing table: explicit retention (including
/// `false`) > explicit ttl > project retention > project `managed_source_ttl`.
fn source_ttl(project: &Project, source: &Source) -> Option<String> {
    let kafka = source.kafka.as_ref()?;
    let policy = match kafka.retention {
        Some(retention) => Some(retention),
        None if kafka.ttl.is_some() => return kafka.ttl.clone(),
        None => project.defaults.kafka_retention,
    };
    match policy {
        Some(SourceRetention::Disabled) => None,
        Some(SourceRetention::Policy {
            duration_seconds,
            cap_at_landed,
        }) => Some(stb_ddl::kafka_retention_ttl(
            duration_seconds,
            cap_at_landed,
        )),
        None => project.defaults.managed_source_ttl.clone(),
    }
}

/// Every Kafka source's objects, by source; the problems of those that cannot be made go
/// to `diagnostics`.
fn managed_sources(
    project: &Project,
    diagnostics: &mut Diagnostics,
) -> BTreeMap<String, ManagedSource> {
    let mut managed = BTreeMap::new();
    for source in project
        .sources
        .iter()
        .filter(|s| s.kind == SourceKind::Kafka)
    {
        match managed_source(project, source) {
            Ok(objects) => {
                managed.insert(source.name.clone(), objects);
            }
            Err(problem) => diagnostics.push(problem),
        }
    }
    managed
}

/// The sources as a plan sees them ([`Compiled::plan_sources`]), without compiling a model:
/// they come from the sources' files and the project's settings alone, so a plan can read
/// what the warehouse holds of them while the models compile. A Kafka source whose
/// landing cannot be made is kept without it (the compile reports why).
#[must_use]
pub fn plan_sources(project: &Project) -> Vec<stb_model::planning::PlanSource> {
    let managed = managed_sources(project, &mut Diagnostics::new());
    planning::sources(project, &managed)
}

fn managed_source(project: &Project, source: &Source) -> Result<ManagedSource, Diagnostic> {
    let kafka = source.kafka.as_ref().ok_or_else(|| {
        Diagnostic::new(
            codes::SOURCE,
            format!("Kafka source '{}' has no settings", source.name),
            "report this: discovery should have filled them",
        )
    })?;
    let broker = kafka.broker_list.as_ref().or(project.defaults.kafka_broker_list.as_ref()).ok_or_else(|| {
        Diagnostic::new(codes::SOURCE, format!("Kafka source '{}' has no broker_list and defaults.kafka_broker_list is not set", source.name), "add broker_list to the source").at(Location::file(&source.file))
    })?;
    let group = kafka.consumer_group.clone().unwrap_or_else(|| {
        format!(
            "streambuild_{}_{}_{}",
            project.name, project.target, source.name
        )
    });
    let database = database(project);
    // Values read from the environment are treated as secrets: the Kafka table keeps them
    // for the statement that runs, and its artifact rendering shows `***` instead.
    let mut hidden = Vec::new();
    if broker.from_environment {
        hidden.push("kafka_broker_list".to_owned());
    }
    hidden.extend(
        kafka
            .settings
            .iter()
            .filter(|(_, v)| v.from_environment)
            .map(|(k, _)| k.clone()),
    );
    Ok(stb_ddl::managed_source(
        database,
        &source.name,
        KafkaSettings {
            broker_list: broker.value.clone(),
            topic: source.topic.clone().unwrap_or_default(),
            group,
            format: "JSONAsString".to_owned(),
            settings: kafka
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
            hidden,
        },
        source_ttl(project, source),
    ))
}
