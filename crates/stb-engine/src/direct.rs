//! Direct plans: what a build would drop, recreate and replay, with every check that can
//! stop it before anything is touched.
//!
//! [`Scope::resolve`] checks the flags and the selectors (no warehouse needed),
//! [`read`] reads what the plan needs from the warehouse in a fixed number of queries,
//! [`prepare`] plans from those values alone, and [`measure`] runs the shrink guard's
//! queries. `stb plan` stops there; `stb build` goes on to run the workflow.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_compile::Compiled;
use stb_plan::direct::{
    DirectPlan, Landing, PlanModel, PlanSource, Reason, Selection, model_graph, plan_direct,
};
use stb_plan::drift::{Drift, LiveLanding, missing_pieces};
use stb_plan::options::{FLAG_CODE, StartTime};
use stb_plan::shrink::{Probe, ReplayWindow};
use stb_plan::sql_change::{Baseline, SqlChange, sql_change};
use stb_plan::workflow::{RootReplay, Workflow, WorkflowOptions, assemble, landings_read};
use stb_project::Project;
use stb_project::project_config::Mode;
use stb_warehouse::adopted::{ADOPTED_CODE, AdoptedTable, validate_adopted};
use stb_warehouse::fingerprints::{Fingerprints, latest_fingerprints};
use stb_warehouse::{Catalog, Client};

use crate::EngineError;
pub use crate::scope::Scope;

/// A managed source's landing drifted in a way a build cannot repair.
pub const SOURCE_DRIFT_CODE: &str = "STB-SOURCE-002";
/// Virtual pipelines in a direct plan.
pub const VIRTUAL_CODE: &str = "STB-PLAN-002";
/// A prerequisite model does not exist.
pub const PREREQUISITE_CODE: &str = "STB-PLAN-003";
/// A replay root cannot be bounded.
pub const BOUNDARY_CODE: &str = "STB-PLAN-004";
/// `--changed` cannot read the build records.
pub const RECORDS_CODE: &str = "STB-PLAN-005";

/// What `--changed` says when every model matches its last build.
pub const NOTHING_CHANGED: &str = "No changed models to build.";

/// A scope whose flags and selectors are known to make sense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub request: Scope,
    pub start_time: Option<StartTime>,
    /// The selected models; `None`: every model (or `--changed`, decided later).
    pub selected: Option<BTreeSet<String>>,
}

/// How the workflow is built, from the environment the caller runs in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    /// Seconds the new views run before boundaries are captured, when the user asked for a
    /// timed wait; `None`: wait on evidence where it is sound (see [`stabilization`]).
    pub stabilization_seconds: Option<u32>,
}

/// The timed wait used where no sound evidence exists.
pub const DEFAULT_STABILIZATION_SECONDS: u32 = 5;

/// `STREAMBUILD_LIVE_STABILIZATION_SECONDS`.
pub const STABILIZATION_ENV: &str = "STREAMBUILD_LIVE_STABILIZATION_SECONDS";

impl Settings {
    /// The settings `env` gives (`STREAMBUILD_LIVE_STABILIZATION_SECONDS`: a timed wait
    /// instead of evidence).
    ///
    /// # Errors
    /// A value that is not a whole number of seconds.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, EngineError> {
        let Some(text) = env(STABILIZATION_ENV) else {
            return Ok(Self::default());
        };
        text.trim()
            .parse()
            .map(|seconds| Self {
                stabilization_seconds: Some(seconds),
            })
            .map_err(|_| {
                EngineError::new(
                    FLAG_CODE,
                    format!("{STABILIZATION_ENV} must be a whole number of seconds, not '{text}'"),
                    "unset it to wait on evidence (inserts running when the views were created)",
                )
            })
    }
}

/// What the warehouse holds, as far as a plan needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reads {
    pub database: String,
    pub catalog: Catalog,
    /// The latest recorded fingerprint of every compiled model.
    pub fingerprints: Fingerprints,
    /// The catalog's stamp ([`stb_warehouse::catalog_stamp_sql`]) over the target's and
    /// the sources' databases, read with the catalog: the plan's validation records it.
    pub catalog_stamp: Option<String>,
    /// An `on_cluster` or `sharded` target's cluster and shards, which the workflow's
    /// statements are written for ([`stb_plan::cluster::distribute`]).
    pub cluster: Option<stb_plan::cluster::ClusterTarget>,
}

/// Reads the catalog and the latest fingerprints: a fixed number of queries, whatever the
/// number of models. `stamped`: with the catalog's stamp, which only a build needs (its
/// re-check under the lock compares it); reading it costs the server as much as the
/// catalog itself (it hashes every relation's definition). `cache`: what an earlier plan
/// read of each relation, read again only for relations changed since (and left up to
/// date).
///
/// # Errors
/// The warehouse could not be read.
pub fn read(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    stamped: bool,
    cache: Option<&mut stb_warehouse::CatalogCache>,
) -> Result<Reads, EngineError> {
    let catalog = read_catalog(client, database, &compiled.plan_sources, stamped, cache)?;
    read_with(client, database, compiled, catalog)
}

/// The catalog a plan reads, with its stamp when `stamped` (a build's, re-checked under
/// the lock). It needs only the project's `sources` (no model), so a plan may read it
/// while the models compile.
///
/// # Errors
/// The catalog could not be read.
pub fn read_catalog(
    client: &Client,
    database: &str,
    sources: &[stb_plan::direct::PlanSource],
    stamped: bool,
    cache: Option<&mut stb_warehouse::CatalogCache>,
) -> Result<(Catalog, Option<String>), EngineError> {
    let stamp_databases = if stamped {
        crate::validation::stamp_databases(database, sources)
    } else {
        Vec::new()
    };
    // The definitions a plan reads: the landings' (their drift), and the adopted tables'
    // columns whatever they are; every other relation's definition is left unread, which
    // is most of what reading the catalog costs.
    let defined = sources
        .iter()
        .filter_map(|s| s.landing.as_ref())
        .flat_map(|l| [&l.kafka_table, &l.raw_table, &l.view])
        .chain(sources.iter().filter_map(|s| s.relation.as_ref()))
        .cloned()
        .collect();
    client
        .load_catalog_stamped(
            database,
            &stamp_databases,
            &stb_warehouse::Depth::Plan { defined },
            cache,
        )
        .map_err(|e| EngineError::from(&e))
}

/// [`read`] with its catalog read already ([`read_catalog`]): the build records.
///
/// # Errors
/// The build records could not be read.
pub fn read_with(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    (catalog, catalog_stamp): (Catalog, Option<String>),
) -> Result<Reads, EngineError> {
    // One read of the latest baselines, whatever the scope: --changed compares them all.
    let identities: Vec<String> = compiled
        .plan_models
        .iter()
        .map(|m| format!("{database}.{}", m.name))
        .collect();
    let fingerprints =
        latest_fingerprints(client, database, &identities).map_err(|e| EngineError::from(&e))?;
    Ok(Reads {
        database: database.to_owned(),
        catalog,
        fingerprints,
        catalog_stamp,
        cluster: None,
    })
}

/// A direct plan, ready to show or to build.
#[derive(Debug, Clone)]
pub struct Planned {
    pub database: String,
    pub plan: DirectPlan,
    /// Each entry's SQL change since its last successful build, in entry order.
    pub changes: Vec<(String, SqlChange)>,
    pub start_time: Option<StartTime>,
    /// `--changed` found nothing to rebuild.
    pub nothing_changed: bool,
    /// The workflow a build runs, statement by statement.
    pub workflow: Workflow,
    /// Relation -> the model that owns it, for the models in scope.
    pub owner: BTreeMap<String, String>,
    /// Managed sources whose Kafka table is recreated, with what drifted.
    pub recreations: Vec<(String, Vec<String>)>,
    /// Managed sources whose landing table exists with pieces missing, which the build
    /// recreates (`kafka_table`, `landing_view`).
    pub repairs: Vec<(String, Vec<&'static str>)>,
    /// What the shrink guard measures, per replay root.
    pub probes: Vec<Probe>,
    /// Per replay root (same order as the workflow's roots): what its table holds and
    /// what its replay window restores; filled by [`measure`].
    pub replay_windows: Vec<ReplayWindow>,
    /// What each replay root reads ([`stb_plan::cost`]); filled by [`measure`].
    pub replay_costs: Vec<stb_plan::cost::ReplayCost>,
    /// How fast this warehouse replayed before, which the costs' times are estimated
    /// from; filled by [`measure`].
    pub replay_throughput: Option<stb_plan::cost::Throughput>,
    /// `[build] max_replay_rows` / `max_replay_bytes` for the target.
    pub replay_budget: stb_plan::cost::ReplayBudget,
    /// The compiled models, for fingerprints (shared with the compile).
    pub models: std::sync::Arc<[PlanModel]>,
    /// Set when this workflow builds a virtual deployment (its copies under their physical
    /// names): what it records instead of direct fingerprints.
    pub deployment: Option<crate::staged::Deployment>,
    /// What the warehouse accepted when the plan's statements were checked
    /// ([`crate::validation::validate`]); `None` until they are.
    pub validated: Option<crate::validation::Validated>,
}

/// The shrink guard's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShrinkSummary {
    pub needs_allow_shrink: bool,
    pub lost_rows: u64,
    pub models: Vec<String>,
    pub discarded_by_start_time: u64,
}

impl Planned {
    /// The replay roots as the workflow bounds them.
    #[must_use]
    pub fn roots(&self) -> &[RootReplay] {
        &self.workflow.roots
    }

    /// The models the build rebuilds, in plan order.
    #[must_use]
    pub fn executed_models(&self) -> Vec<&str> {
        self.plan.entries.iter().map(|e| e.model.as_str()).collect()
    }

    /// Roots whose rebuild loses rows that retained history cannot restore.
    #[must_use]
    pub fn shrinking(&self) -> Vec<&ReplayWindow> {
        self.replay_windows
            .iter()
            .filter(|w| w.needs_consent())
            .collect()
    }

    /// The replays together, against the target's budget.
    #[must_use]
    pub fn cost_summary(&self) -> stb_plan::cost::CostSummary {
        stb_plan::cost::summarise(
            &self.replay_costs,
            self.replay_throughput,
            self.replay_budget,
        )
    }

    #[must_use]
    pub fn shrink_summary(&self) -> ShrinkSummary {
        let shrinking = self.shrinking();
        ShrinkSummary {
            needs_allow_shrink: !shrinking.is_empty(),
            lost_rows: shrinking.iter().map(|w| w.lost_rows).sum(),
            models: shrinking.iter().map(|w| w.model.clone()).collect(),
            discarded_by_start_time: self
                .replay_windows
                .iter()
                .map(|w| w.discarded_by_start_time)
                .sum(),
        }
    }

    /// How the selection was made: `changed`, `all` or `selected`.
    #[must_use]
    pub fn selection_mode(&self) -> &'static str {
        let changed = self.nothing_changed
            || self
                .plan
                .entries
                .iter()
                .any(|e| matches!(e.reason, Reason::Changed | Reason::SourceDrift));
        if changed {
            "changed"
        } else if self
            .plan
            .entries
            .iter()
            .all(|e| e.reason == Reason::AllModels)
        {
            "all"
        } else {
            "selected"
        }
    }

    /// What a reviewer approves: SHA-256 over every statement the build would run, as
    /// recorded (a build's `workflow_id`). The project's SQL and DDL and whatever of the
    /// warehouse shapes the statements (what exists, what drifted) change it; a build
    /// given `--plan-hash` refuses to run another plan.
    #[must_use]
    pub fn plan_hash(&self) -> String {
        // As `workflow_sha256` of the recorded statements, one statement at a time.
        stb_warehouse::statements::workflow_sha256_of(
            self.workflow
                .steps
                .iter()
                .map(|step| self.workflow.recorded_sql(step)),
        )
    }

    /// The relations `model` creates, in creation order. (One model's; for every model,
    /// [`Self::relations_by_model`] walks the creation list once.)
    #[must_use]
    pub fn relations_of(&self, model: &str) -> Vec<&str> {
        self.relations_by_model().remove(model).unwrap_or_default()
    }

    /// The relations each model creates, in creation order: one pass over the creation
    /// list, so rendering every model's relations stays linear.
    #[must_use]
    pub fn relations_by_model(&self) -> std::collections::HashMap<&str, Vec<&str>> {
        let mut by_model: std::collections::HashMap<&str, Vec<&str>> =
            std::collections::HashMap::new();
        for (_, relation) in &self.plan.creation {
            if let Some(model) = self.owner.get(relation.as_str()) {
                by_model
                    .entry(model.as_str())
                    .or_default()
                    .push(relation.as_str());
            }
        }
        by_model
    }
}

/// Plans a direct build from values only: selection (with `--changed` and
/// `--include-missing-upstream`), the refusal of virtual pipelines, then
/// [`plan_selection`].
///
/// # Errors
/// The first check that stops the plan, with its code.
pub fn prepare(
    project: &Project,
    compiled: &Compiled,
    resolved: &Resolved,
    reads: &Reads,
    settings: Settings,
) -> Result<Planned, EngineError> {
    let catalog = &reads.catalog;
    let request = &resolved.request;
    let graph = model_graph(&compiled.plan_models);
    let present = |relation: &str| catalog.relation(relation).is_some();
    let mut selection = if request.changed {
        changed_selection(project, compiled, reads, request, &graph)?
    } else {
        Selection::new(&graph, resolved.selected.clone())
    };
    if request.include_missing_upstream {
        selection = selection.with_missing_upstream(&graph, &compiled.plan_models, &present);
    }
    refuse_virtual(project, &selection.scope)?;
    let mut planned = plan_selection(
        project,
        compiled,
        &selection,
        resolved.start_time.clone(),
        reads,
        settings,
        &Copies::default(),
    )?;
    planned.nothing_changed = request.changed && selection.scope.is_empty();
    Ok(planned)
}

/// What a virtual deployment's build plans with besides its renamed models.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copies {
    /// The active copy of each copied model: what the shrink guard counts as live.
    pub live_tables: BTreeMap<String, String>,
    /// Seeded roots: the active copy their history before the start comes from.
    pub seeds: BTreeMap<String, stb_plan::workflow::SeedSource>,
    /// Roots bounded by their `replay_on_change` rather than `--start-time`: where each
    /// replay starts.
    pub starts: BTreeMap<String, StartTime>,
}

/// Plans the direct workflow of `selection` over `compiled`'s models: the checks that need
/// the scope (`[build] max_pipelines`, adopted tables, drifted landings), the plan, each
/// model's SQL change, landing repairs, the workflow and the shrink guard's probes. A
/// virtual deployment's build comes here with the models renamed to its copies and its
/// [`Copies`]; a direct build with none.
///
/// # Errors
/// The first check that stops the plan, with its code.
pub fn plan_selection(
    project: &Project,
    compiled: &Compiled,
    selection: &Selection,
    start_time: Option<StartTime>,
    reads: &Reads,
    settings: Settings,
    copies: &Copies,
) -> Result<Planned, EngineError> {
    let Reads {
        database,
        catalog,
        fingerprints,
        ..
    } = reads;
    let graph = model_graph(&compiled.plan_models);
    let present = |relation: &str| catalog.relation(relation).is_some();
    stb_graph::check_max_pipelines(
        &graph,
        &selection.scope,
        project.max_pipelines,
        &project.target,
    )?;
    check_adopted(project, compiled, catalog, &selection.scope)?;
    let owner = compiled
        .plan_models
        .iter()
        .filter(|m| selection.scope.contains(&m.name))
        .flat_map(|m| m.relations.iter().map(|(_, r)| (r.clone(), m.name.clone())))
        .collect();
    let plan = plan_direct(
        &compiled.plan_models,
        &compiled.plan_sources,
        selection,
        &present,
    )
    .map_err(|e| EngineError::new(PREREQUISITE_CODE, e.message, e.hint))?;
    let changes = sql_changes(&plan, compiled, database, fingerprints);
    let (recreations, repairs) =
        source_recreations(&plan, compiled, catalog, reads.cluster.as_ref())?;
    let workflow = assemble(
        &plan,
        &compiled.plan_models,
        &compiled.plan_sources,
        &WorkflowOptions {
            database: database.clone(),
            stabilization: stabilization(settings, &plan, compiled, catalog),
            start_time: start_time.clone(),
            recreate_sources: recreations.iter().map(|(s, _)| s.clone()).collect(),
            seeds: copies.seeds.clone(),
            root_start_times: copies.starts.clone(),
            pacing: project.replay_pacing,
        },
        &present,
    )
    .map_err(|e| EngineError::new(BOUNDARY_CODE, e.message, e.hint))?;
    // Measured through the relations the models read (a sharded cluster's Distributed
    // tables: every shard's rows), before the workflow is written for the cluster.
    let probes = shrink_probes(&workflow, compiled, reads, &copies.live_tables);
    let workflow = match &reads.cluster {
        Some(target) => stb_plan::cluster::distribute(
            workflow,
            &plan,
            &compiled.plan_models,
            &compiled.plan_sources,
            target,
            &present,
        )
        .map_err(|e| EngineError::new(crate::cluster::UNSUPPORTED_CODE, e.message, e.hint))?,
        None => workflow,
    };
    Ok(Planned {
        database: database.clone(),
        plan,
        changes,
        start_time,
        nothing_changed: false,
        workflow,
        owner,
        recreations,
        repairs,
        probes,
        replay_windows: Vec::new(),
        replay_costs: Vec::new(),
        replay_throughput: None,
        replay_budget: project.replay_budget,
        models: compiled.plan_models.clone(),
        deployment: None,
        validated: None,
    })
}

/// How the build waits for inserts that began before its new views existed: the user's
/// timed wait when asked; else evidence (those inserts, by query id) unless the database
/// holds something that can write into tables without being a query the warehouse lists:
/// a streaming or buffering engine (Kafka, Buffer, RabbitMQ, NATS, FileLog, S3Queue,
/// AzureQueue; the Kafka tables of landings the build pauses do not count) or a
/// refreshable materialized view. Then the timed default stays.
#[must_use]
pub fn stabilization(
    settings: Settings,
    plan: &DirectPlan,
    compiled: &Compiled,
    catalog: &Catalog,
) -> stb_plan::workflow::Stabilization {
    use stb_plan::workflow::Stabilization;
    if let Some(seconds) = settings.stabilization_seconds {
        return Stabilization::Timed(seconds);
    }
    let paused: BTreeSet<&str> = landings_read(plan, &compiled.plan_models, &compiled.plan_sources)
        .iter()
        .filter_map(|s| s.landing.as_ref())
        .map(|l| l.kafka_table.as_str())
        .collect();
    let streaming = catalog.relations().iter().any(|r| {
        STREAMING_ENGINES.contains(&r.engine.as_str()) && !paused.contains(r.name.as_str())
    });
    // A server that cannot list its refreshable views may have some among its views.
    let refreshable = catalog.refreshable().map_or_else(
        || {
            catalog
                .relations()
                .iter()
                .any(|r| r.engine == "MaterializedView")
        },
        |views| !views.is_empty(),
    );
    let unlisted_writer = streaming || refreshable;
    if unlisted_writer {
        Stabilization::Timed(DEFAULT_STABILIZATION_SECONDS)
    } else {
        Stabilization::Evidence
    }
}

/// Engines that insert into other tables in the background, not as client queries.
const STREAMING_ENGINES: &[&str] = &[
    "Kafka",
    "Buffer",
    "RabbitMQ",
    "NATS",
    "FileLog",
    "S3Queue",
    "AzureQueue",
    "Redis",
];

/// Runs the shrink guard's queries (after every check that can stop the plan, before
/// anything is dropped) and, beside them, measures what the replays read (their cost:
/// never an error of its own).
///
/// # Errors
/// The live counts could not be read.
pub fn measure(client: &Client, planned: &mut Planned) -> Result<(), EngineError> {
    let measured = stb_build::measure::replays(client, &planned.database, &mut planned.probes)
        .map_err(|e| EngineError::from(&e))?;
    planned.replay_windows = measured.windows;
    planned.replay_costs = measured.costs;
    planned.replay_throughput = measured.throughput;
    Ok(())
}

/// `--changed`: the models whose query or identity differs from their last build, with
/// one pipeline per managed source whose Kafka settings drifted (or whose landing lost a
/// piece) that nothing else in the scope reads.
fn changed_selection(
    project: &Project,
    compiled: &Compiled,
    reads: &Reads,
    request: &Scope,
    graph: &stb_graph::ModelGraph,
) -> Result<Selection, EngineError> {
    let database = &reads.database;
    let direct_pipelines: BTreeSet<&str> = project
        .pipelines
        .iter()
        .filter(|p| p.mode == Mode::Direct)
        .map(|p| p.name.as_str())
        .collect();
    // Borrowed, not copied: at 10,000 models the models are tens of megabytes.
    let direct = compiled
        .plan_models
        .iter()
        .filter(|m| direct_pipelines.contains(m.pipeline.as_str()));
    let found = match &reads.fingerprints {
        Fingerprints::Found(found) => Some(found),
        Fingerprints::Absent => None,
        Fingerprints::Unavailable(reason) => {
            return Err(EngineError::new(
                RECORDS_CODE,
                format!(
                    "--changed cannot tell what changed: the build records could not be read ({reason})"
                ),
                "select the models to rebuild with --select instead",
            ));
        }
    };
    let baseline = |name: &str| {
        found
            .and_then(|f| f.get(&format!("{database}.{name}")))
            .map(|f| stb_plan::direct::RecordedModel {
                definition_hash: f.definition_hash.clone(),
                definition_sql: f.definition_sql.clone(),
                identity: f.identity_metadata.clone(),
            })
    };
    let present = |relation: &str| reads.catalog.relation(relation).is_some();
    let changed = Selection::changed(graph, direct, &baseline, &present);
    let repairs = drifted_source_pipelines(
        project,
        compiled,
        &reads.catalog,
        reads.cluster.as_ref(),
        &changed.scope,
    );
    if !repairs.is_empty() && request.start_time.is_some() {
        return Err(EngineError::new(
            FLAG_CODE,
            format!(
                "--changed --start-time would discard the history of pipelines that repair drifted sources: {}",
                repairs.join(", ")
            ),
            "build those pipelines without --start-time first, or select models with --select",
        ));
    }
    let models = project
        .pipelines
        .iter()
        .filter(|p| repairs.contains(&p.name))
        .flat_map(|p| p.models.iter().map(|m| m.name.clone()))
        .collect();
    Ok(changed.with_source_drift(graph, models))
}

fn refuse_virtual(project: &Project, scope: &BTreeSet<String>) -> Result<(), EngineError> {
    let virtual_pipelines: Vec<&str> = project
        .pipelines
        .iter()
        .filter(|p| p.mode == Mode::Virtual && p.models.iter().any(|m| scope.contains(&m.name)))
        .map(|p| p.name.as_str())
        .collect();
    if virtual_pipelines.is_empty() {
        return Ok(());
    }
    Err(EngineError::new(
        VIRTUAL_CODE,
        format!(
            "a direct build cannot rebuild virtual pipelines in place: {}",
            virtual_pipelines.join(", ")
        ),
        "plan and build them with `stb plan` / `stb build`, which stage virtual pipelines as deployments",
    ))
}

/// Every adopted table the scope reads must exist with the replay columns its source
/// declares.
fn check_adopted(
    project: &Project,
    compiled: &Compiled,
    catalog: &Catalog,
    scope: &BTreeSet<String>,
) -> Result<(), EngineError> {
    let mut problems = Vec::new();
    for source in project
        .sources
        .iter()
        .filter(|s| s.kind == stb_project::sources::SourceKind::StreamTable)
    {
        let read_by_scope = compiled
            .plan_models
            .iter()
            .any(|m| scope.contains(&m.name) && m.reads.contains(&source.name));
        if let (true, Some(table)) = (read_by_scope, &source.table_name) {
            problems.extend(validate_adopted(
                catalog,
                &AdoptedTable {
                    source: &source.name,
                    table,
                    roles: &source.columns,
                },
            ));
        }
    }
    match problems.first() {
        None => Ok(()),
        Some(first) => Err(EngineError::new(
            ADOPTED_CODE,
            problems
                .iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
            first.hint,
        )),
    }
}

/// Each entry's SQL change against its recorded baseline.
fn sql_changes(
    plan: &DirectPlan,
    compiled: &Compiled,
    database: &str,
    fingerprints: &Fingerprints,
) -> Vec<(String, SqlChange)> {
    let queries: BTreeMap<&str, &str> = compiled
        .plan_models
        .iter()
        .map(|m| (m.name.as_str(), m.query.as_str()))
        .collect();
    plan.entries
        .iter()
        .map(|entry| {
            let identity = format!("{database}.{}", entry.model);
            let current = queries.get(entry.model.as_str()).copied().unwrap_or("");
            let baseline = match fingerprints {
                Fingerprints::Absent => Baseline::Absent,
                Fingerprints::Unavailable(_) => Baseline::Unavailable,
                Fingerprints::Found(found) => found
                    .get(&identity)
                    .map_or(Baseline::Absent, |f| Baseline::Recorded(&f.definition_sql)),
            };
            (entry.model.clone(), sql_change(current, &baseline))
        })
        .collect()
}

/// What the shrink guard will measure for each replay root.
fn shrink_probes(
    workflow: &Workflow,
    compiled: &Compiled,
    reads: &Reads,
    live_tables: &BTreeMap<String, String>,
) -> Vec<Probe> {
    // On a sharded cluster a table's engine, keys and retention are its local part's (the
    // Distributed table has none); its rows are counted through the Distributed table.
    let stored = |name: &str| match &reads.cluster {
        Some(target) => {
            target
                .cluster
                .storage_name(&stb_ddl::QualifiedName::new(&reads.database, name))
                .name
        }
        None => name.to_owned(),
    };
    let facts = |name: &str| {
        let local = stored(name);
        reads
            .catalog
            .relation(&local)
            .or_else(|| reads.catalog.relation(name))
            .map(|r| stb_plan::shrink::RelationFacts {
                engine: r.engine.clone(),
                sorting_key: r.sorting_key.clone(),
            })
    };
    let baseline = |model: &str| match &reads.fingerprints {
        Fingerprints::Found(found) => found
            .get(&format!("{}.{model}", reads.database))
            .map(|f| f.definition_sql.clone()),
        Fingerprints::Absent | Fingerprints::Unavailable(_) => None,
    };
    let mut probes = stb_plan::shrink::probes(
        &workflow.roots,
        &stb_plan::shrink::Context {
            models: &compiled.plan_models,
            sources: &compiled.plan_sources,
            facts: &facts,
            baseline: &baseline,
            live_table: &|model| live_tables.get(model).cloned(),
        },
    );
    for probe in &mut probes {
        if let Some(source) = &mut probe.retention_source {
            let local = stored(source);
            if reads.catalog.relation(&local).is_some() {
                *source = local;
            }
        }
    }
    probes
}

/// What a build does to the landings it reads: Kafka tables recreated for their settings,
/// and missing pieces of landings that exist.
type LandingWork = (Vec<(String, Vec<String>)>, Vec<(String, Vec<&'static str>)>);

/// Compares every landing the scope reads with its declaration: settings drift and missing
/// pieces are repaired by the build (returned with what changed or is missing); anything
/// else stops it here, before anything is dropped.
fn source_recreations(
    plan: &DirectPlan,
    compiled: &Compiled,
    catalog: &Catalog,
    cluster: Option<&stb_plan::cluster::ClusterTarget>,
) -> Result<LandingWork, EngineError> {
    let read = landings_read(plan, &compiled.plan_models, &compiled.plan_sources);
    let mut recreations = Vec::new();
    let mut repairs = Vec::new();
    for source in &read {
        let missing = missing_landing_pieces(source, catalog);
        if !missing.is_empty() {
            repairs.push((source.name.clone(), missing));
        }
        match live_drift(source, catalog, cluster) {
            Ok(Drift::None) => {}
            Ok(Drift::Settings(changes)) => recreations.push((source.name.clone(), changes)),
            Err(error) => {
                return Err(EngineError::new(
                    SOURCE_DRIFT_CODE,
                    error.message,
                    error.hint,
                ));
            }
        }
    }
    // A source that feeds the scope only through models it does not rebuild: the build
    // cannot repair it without rebuilding the pipeline that reads it.
    for prerequisite in &plan.prerequisites {
        let Some(model) = compiled
            .plan_models
            .iter()
            .find(|m| m.name == prerequisite.name)
        else {
            continue;
        };
        for source in compiled
            .plan_sources
            .iter()
            .filter(|s| model.reads.contains(&s.name) && !read.iter().any(|r| r.name == s.name))
        {
            let missing = missing_landing_pieces(source, catalog);
            let drifted = match live_drift(source, catalog, cluster) {
                Ok(Drift::None) if missing.is_empty() => continue,
                Ok(Drift::None) => format!("missing: {}", missing.join(", ")),
                Ok(Drift::Settings(changes)) => changes.join(", "),
                Err(error) => error.message,
            };
            return Err(EngineError::new(
                SOURCE_DRIFT_CODE,
                format!(
                    "source '{}' has drifted ({drifted}) and feeds this build through '{}', which it does not rebuild",
                    source.name, model.name
                ),
                format!(
                    "add --select pipeline:{} so the build repairs the source",
                    model.pipeline
                ),
            ));
        }
    }
    Ok((recreations, repairs))
}

/// The pieces of `source`'s landing that are missing while its landing table exists.
fn missing_landing_pieces(source: &PlanSource, catalog: &Catalog) -> Vec<&'static str> {
    source.landing.as_ref().map_or_else(Vec::new, |landing| {
        missing_pieces(&live_landing(landing, catalog))
    })
}

/// For `--changed`: one direct pipeline per managed source whose Kafka settings drifted
/// (or whose landing lost a piece) and which `scope` does not already read (unprotected
/// pipelines first, then by name).
fn drifted_source_pipelines(
    project: &Project,
    compiled: &Compiled,
    catalog: &Catalog,
    cluster: Option<&stb_plan::cluster::ClusterTarget>,
    scope: &BTreeSet<String>,
) -> Vec<String> {
    let mut chosen = Vec::new();
    for source in &compiled.plan_sources {
        let drifted = matches!(live_drift(source, catalog, cluster), Ok(Drift::Settings(_)));
        if !drifted && missing_landing_pieces(source, catalog).is_empty() {
            continue;
        }
        let read_by_scope = compiled
            .plan_models
            .iter()
            .any(|m| scope.contains(&m.name) && m.reads.contains(&source.name));
        if read_by_scope {
            continue;
        }
        let mut owners: Vec<&stb_project::pipelines::Pipeline> = project
            .pipelines
            .iter()
            .filter(|p| p.mode == Mode::Direct && p.source.as_deref() == Some(source.name.as_str()))
            .collect();
        owners.sort_by_key(|p| (p.protection.is_some(), p.name.clone()));
        if let Some(owner) = owners.first()
            && !chosen.contains(&owner.name)
        {
            chosen.push(owner.name.clone());
        }
    }
    chosen
}

/// How `source`'s landing in the catalog differs from its declaration.
fn live_drift(
    source: &PlanSource,
    catalog: &Catalog,
    cluster: Option<&stb_plan::cluster::ClusterTarget>,
) -> Result<Drift, stb_plan::direct::PlanError> {
    let Some(landing) = &source.landing else {
        return Ok(Drift::None);
    };
    // On a sharded cluster the landing view writes into the landing's local part.
    let written = cluster.map_or_else(
        || landing.raw_table.clone(),
        |target| {
            target
                .cluster
                .storage_name(&stb_ddl::QualifiedName::new("", &landing.raw_table))
                .name
        },
    );
    stb_plan::drift::landing_drift_into(
        &source.name,
        landing,
        &live_landing(landing, catalog),
        &written,
    )
}

/// A landing as the catalog has it.
fn live_landing(landing: &Landing, catalog: &Catalog) -> LiveLanding {
    LiveLanding {
        kafka_create: catalog
            .relation(&landing.kafka_table)
            .map(|r| r.create_table_query.clone()),
        raw_columns: catalog.relation(&landing.raw_table).map(|r| {
            r.columns
                .iter()
                .map(|c| (c.name.clone(), c.data_type.clone()))
                .collect()
        }),
        view_create: catalog
            .relation(&landing.view)
            .map(|r| r.create_table_query.clone()),
    }
}

pub mod json;

#[cfg(test)]
mod tests;
