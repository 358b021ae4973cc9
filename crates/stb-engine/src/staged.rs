//! Virtual plans: what a new deployment of the selected virtual models would stage beside
//! production. [`route`] tells direct, virtual and mixed scopes apart, [`read`] reads the
//! deployed state in a fixed number of queries, [`prepare`] plans from it alone.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_compile::Compiled;
use stb_plan::deployment::DeploymentId;
use stb_plan::direct::{PlanModel, RelationKind, model_graph};
use stb_plan::options::{FLAG_CODE, Mode as FlagMode, ScopeFlags, StartTime, validate};
use stb_plan::virtual_plan::{Deployed, Options, VirtualPlan, plan_virtual};
use stb_project::Project;
use stb_project::project_config::Mode;
use stb_warehouse::Client;
use stb_warehouse::deployments::{bindings, recorded_specs};

pub mod json;
mod seeding;

use crate::EngineError;
use crate::direct::VIRTUAL_CODE;

/// What to plan for virtual pipelines, as the user asked for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub select: Vec<String>,
    pub start_time: Option<stb_plan::options::StartTime>,
    pub full_refresh: bool,
    pub deployment_id: Option<String>,
}

/// Which planner a scope needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Direct,
    /// Every model in scope is in a virtual pipeline: the models in scope.
    Virtual(BTreeSet<String>),
    /// Both kinds: the pipelines of each, and the models in scope of each.
    Mixed {
        direct: Vec<String>,
        virtual_pipelines: Vec<String>,
        direct_models: BTreeSet<String>,
        virtual_models: BTreeSet<String>,
    },
}

/// The scope `select` names (every model when empty) and the planner it needs. `--changed`
/// always routes to the direct planner: it picks changed models of direct pipelines only
/// (a virtual pipeline's baseline is its active deployment, which `stb plan` compares).
///
/// # Errors
/// An unknown selector.
pub fn route(
    project: &Project,
    compiled: &Compiled,
    select: &[String],
    changed: bool,
) -> Result<Route, EngineError> {
    if changed {
        return Ok(Route::Direct);
    }
    let scope: BTreeSet<String> = if select.is_empty() {
        compiled
            .plan_models
            .iter()
            .map(|m| m.name.clone())
            .collect()
    } else {
        // A selection brings everything downstream of it: a copy's readers must be copied
        // too, to read it.
        let graph = model_graph(&compiled.plan_models);
        let selected = stb_graph::select_for_build(&graph, select)?;
        stb_graph::execution_models(&graph, &selected)
    };
    let in_scope =
        |p: &&stb_project::pipelines::Pipeline| p.models.iter().any(|m| scope.contains(&m.name));
    let (virtual_pipelines, direct): (Vec<_>, Vec<_>) = project
        .pipelines
        .iter()
        .filter(in_scope)
        .partition(|p| p.mode == Mode::Virtual);
    Ok(match (virtual_pipelines.is_empty(), direct.is_empty()) {
        (true, _) => Route::Direct,
        (false, true) => Route::Virtual(scope),
        (false, false) => {
            let models_of = |pipelines: &[&stb_project::pipelines::Pipeline]| -> BTreeSet<String> {
                pipelines
                    .iter()
                    .flat_map(|p| p.models.iter().map(|m| m.name.clone()))
                    .filter(|m| scope.contains(m))
                    .collect()
            };
            Route::Mixed {
                direct: direct.iter().map(|p| p.name.clone()).collect(),
                virtual_pipelines: virtual_pipelines.iter().map(|p| p.name.clone()).collect(),
                direct_models: models_of(&direct),
                virtual_models: models_of(&virtual_pipelines),
            }
        }
    })
}

/// A mixed scope where only one kind can go (the commands plan and build mixed scopes in
/// two phases; this is for a step that cannot).
#[must_use]
pub fn mixed_refusal(direct: &[String], virtual_pipelines: &[String]) -> EngineError {
    EngineError::new(
        VIRTUAL_CODE,
        format!(
            "The scope holds direct pipelines ({}) and virtual ones ({}), which this step cannot take together",
            direct.join(", "),
            virtual_pipelines.join(", ")
        ),
        "select one kind (--select pipeline:<name>)",
    )
}

/// The deployed state of `database` for `models`: the stable bindings of `catalog` (read
/// once by the caller for the whole plan) and the specs their active deployments recorded,
/// in two queries whatever the number of models.
///
/// # Errors
/// The warehouse could not be read.
pub fn read(
    client: &Client,
    database: &str,
    catalog: &stb_warehouse::Catalog,
    models: &[&PlanModel],
) -> Result<Deployed, EngineError> {
    let bindings = bindings(catalog, database);
    let relations: BTreeSet<String> = catalog.relations().iter().map(|r| r.name.clone()).collect();
    let mut deployed = Deployed {
        bindings,
        relations,
        recorded: BTreeMap::new(),
    };
    // Each relation of a model was recorded by the deployment its first relation (its
    // table, or its view) is bound to.
    let wanted: Vec<(String, String)> = models
        .iter()
        .filter_map(|model| {
            let (_, first) = model.relations.first()?;
            let id = deployed.state(first).1?;
            Some(
                model
                    .relations
                    .iter()
                    .map(move |(_, r)| (id.to_string(), r.clone())),
            )
        })
        .flatten()
        .collect();
    deployed.recorded =
        recorded_specs(client, database, &wanted).map_err(|e| EngineError::from(&e))?;
    Ok(deployed)
}

/// A deployment's copy of a relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShadowObject {
    pub logical_key: String,
    pub object_type: &'static str,
    pub physical_name: String,
    pub logical_model_name: String,
}

/// A virtual plan, ready to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub database: String,
    pub deployment: DeploymentId,
    pub plan: VirtualPlan,
    /// What the deployment creates, upstream first.
    pub shadow_objects: Vec<ShadowObject>,
    /// Warnings for the reader (an upstream model read through no deployment, ...).
    pub warnings: Vec<String>,
    /// The deployed state it was planned against.
    pub deployed: Deployed,
    /// `--start-time`: the subtrees it bounds are seeded from their active copies.
    pub start_time: Option<stb_plan::options::StartTime>,
    /// Where the replays of subtrees bounded by their `replay_on_change` start.
    pub root_starts: BTreeMap<String, StartTime>,
}

/// What measuring a deployment's replays found for its reader, worded for the plan: a
/// root whose replay source holds no rows (`empty_replay_source`), and a copy that would
/// restore fewer rows than its active copy holds (never a seeded one: its history before
/// the start comes from the active copy). Neither refuses the build: nothing
/// readers see is dropped, and a rollback shows the active copy's rows again.
#[must_use]
pub fn measured_warnings(planned: &crate::direct::Planned) -> Vec<String> {
    let mut warnings = Vec::new();
    let seeded = |model: &str| {
        planned
            .workflow
            .roots
            .iter()
            .any(|r| r.model == model && r.seed.is_some())
    };
    for window in &planned.replay_windows {
        if seeded(&window.model) {
            // History before the start comes from the active copy: nothing is lost.
            continue;
        }
        if window.input_rows == 0 && !window.replays_rebuilt_input {
            let mut text = format!(
                "empty_replay_source: {} replays from {}, which holds no rows",
                window.model, window.driving_input
            );
            if window.live_table_exists && window.live_rows > 0 {
                text.push_str(&format!(
                    "; its active copy holds {} {}",
                    window.live_rows, window.basis
                ));
            }
            warnings.push(text);
        } else if window.needs_consent() {
            warnings.push(format!(
                "promoting this deployment would show fewer rows than the active copy holds: {}",
                window.describe()
            ));
        }
    }
    warnings
}

/// Plans a deployment of the virtual models in `scope` against `deployed`. `now_ms` and
/// `suffix` make the id when the request names none (the caller's clock and randomness).
///
/// # Errors
/// Flags that cannot mean anything, an invalid `--deployment-id`, or a `--start-time`
/// for a root its active copy cannot seed.
pub fn prepare(
    compiled: &Compiled,
    database: &str,
    request: &Request,
    scope: &BTreeSet<String>,
    deployed: Deployed,
    now_ms: i64,
    suffix: &str,
) -> Result<Planned, EngineError> {
    let start_time = validate(
        &ScopeFlags {
            select: request.select.clone(),
            start_time: request.start_time.clone(),
            full_refresh: request.full_refresh,
            deployment_id: request.deployment_id.clone(),
            ..ScopeFlags::default()
        },
        FlagMode::Virtual,
    )
    .map_err(EngineError::from)?;
    let deployment = match &request.deployment_id {
        Some(text) => DeploymentId::parse(text).map_err(|e| {
            EngineError::new(
                FLAG_CODE,
                e.to_string(),
                "leave --deployment-id out to get a fresh one",
            )
        })?,
        None => DeploymentId::generate(now_ms, suffix),
    };
    let models: Vec<&PlanModel> = compiled
        .plan_models
        .iter()
        .filter(|m| scope.contains(&m.name))
        .collect();
    let selected = (!request.select.is_empty()).then(|| scope.clone());
    let mut plan = plan_virtual(
        &models,
        &deployed,
        &Options {
            selected,
            full_refresh: request.full_refresh,
            start_time: start_time.as_ref().map(ToString::to_string),
        },
        &deployment,
    )
    .map_err(|e| EngineError::new(FLAG_CODE, e.message, e.hint))?;
    let (mut warnings, root_starts) =
        seeding::resolve_bounds(&mut plan, &models, compiled, &deployed, &deployment)?;
    let deployed_models: BTreeSet<&str> = plan.deployed_models.iter().map(String::as_str).collect();
    let shadow_objects = models
        .iter()
        .filter(|m| deployed_models.contains(m.name.as_str()))
        .flat_map(|m| {
            m.relations.iter().map(|(kind, relation)| ShadowObject {
                logical_key: relation.clone(),
                object_type: kind.as_str(),
                physical_name: deployment.physical(relation),
                logical_model_name: m.name.clone(),
            })
        })
        .collect();
    warnings.extend(unreadable_upstream(
        compiled,
        &models,
        &deployed_models,
        &deployed,
    ));
    Ok(Planned {
        database: database.to_owned(),
        deployment,
        plan,
        shadow_objects,
        warnings,
        deployed,
        start_time,
        root_starts,
    })
}

/// Models the deployment reads that it neither creates nor finds deployed: a build could
/// not resolve them to a physical relation.
fn unreadable_upstream(
    compiled: &Compiled,
    models: &[&PlanModel],
    deployed_models: &BTreeSet<&str>,
    deployed: &Deployed,
) -> Vec<String> {
    let by_name = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    let mut missing = BTreeSet::new();
    for model in models
        .iter()
        .filter(|m| deployed_models.contains(m.name.as_str()))
    {
        for read in &model.reads {
            let Some(upstream) = by_name.get(read) else {
                continue; // a source
            };
            if deployed_models.contains(upstream.name.as_str()) {
                continue;
            }
            let active = upstream
                .relations
                .iter()
                .find(|(kind, _)| *kind != RelationKind::MaterializedView)
                .and_then(|(_, r)| deployed.state(r).1);
            if active.is_none() {
                missing.insert(format!(
                    "model '{}' reads '{}', which has no active deployment: select it too",
                    model.name, upstream.name
                ));
            }
        }
    }
    missing.into_iter().collect()
}

/// What a deployment's build records besides its workflow: the header that completes it.
/// (Its object-state rows are a statement of the workflow; the objects they are made from
/// are not kept beside it: at 10,000 models they are tens of megabytes.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub id: DeploymentId,
    /// `offsets`, `timestamp`, `landed_at`, `cursor`, or `none` (no replay).
    pub replay_lineage_mode: String,
}

/// One object the deployment creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployedObject {
    pub object_type: &'static str,
    pub logical_name: String,
    pub physical_name: String,
    pub model: String,
    pub is_selected_root: bool,
    pub fingerprint: String,
    pub canonical_query: Option<String>,
}

impl Deployment {
    /// The rows `stb_warehouse::deployments::record_objects` writes for `objects`.
    #[must_use]
    pub fn object_states<'a>(
        &'a self,
        objects: &'a [DeployedObject],
    ) -> Vec<stb_warehouse::deployments::ObjectState<'a>> {
        objects
            .iter()
            .map(|o| stb_warehouse::deployments::ObjectState {
                deployment_id: self.id.as_str(),
                object_type: o.object_type,
                logical_name: &o.logical_name,
                physical_name: &o.physical_name,
                model: &o.model,
                is_selected_root: o.is_selected_root,
                fingerprint: &o.fingerprint,
                canonical_query: o.canonical_query.as_deref(),
            })
            .collect()
    }
}

/// The build of the deployment `staged` plans: the direct workflow of its copies (created
/// under their physical names beside production, replayed exactly as a direct rebuild
/// replays, never dropping anything but this deployment's own unfinished copies), and what
/// it records.
///
/// # Errors
/// A copied model reads a virtual model no deployment holds, or a check of the direct
/// planner (adopted tables, boundaries, `[build] max_pipelines`).
pub fn prepare_build(
    project: &Project,
    compiled: &Compiled,
    staged: &Planned,
    deployed: &Deployed,
    reads: &crate::direct::Reads,
    settings: crate::direct::Settings,
) -> Result<crate::direct::Planned, EngineError> {
    use stb_plan::virtual_plan::{Placement, deployment_models, object_fingerprint};
    let virtual_models: BTreeSet<&str> = project
        .pipelines
        .iter()
        .filter(|p| p.mode == Mode::Virtual)
        .flat_map(|p| p.models.iter().map(|m| m.name.as_str()))
        .collect();
    let copied: BTreeSet<String> = staged.plan.deployed_models.iter().cloned().collect();
    let active = compiled
        .plan_models
        .iter()
        .filter(|m| virtual_models.contains(m.name.as_str()) && !copied.contains(&m.name))
        .filter_map(|m| {
            let (_, first) = m.relations.first()?;
            Some((m.name.clone(), deployed.state(first).1?))
        })
        .collect();
    let placement = Placement {
        deployed: copied.clone(),
        active,
    };
    let models = deployment_models(
        &compiled.plan_models,
        &staged.database,
        &staged.deployment,
        &placement,
        &|name| virtual_models.contains(name),
    )
    .map_err(|e| EngineError::new(crate::direct::PREREQUISITE_CODE, e.message, e.hint))?;
    let replay_lineage_mode = compiled
        .plan_models
        .iter()
        .filter(|m| copied.contains(&m.name))
        .find_map(|m| m.boundary_mode.clone())
        .unwrap_or_else(|| "none".to_owned());
    // The planner reads the models and the sources only: the artifacts, tests and
    // audits are not copied (at 10,000 models a build's artifacts are about 70 MB).
    let deployment_compiled = Compiled {
        plan_models: models.into(),
        plan_sources: compiled.plan_sources.clone(),
        files: BTreeMap::new(),
        tests: Vec::new(),
        audits: Vec::new(),
        warnings: Vec::new(),
        pipelines: compiled.pipelines,
        models: compiled.models,
    };
    let graph = model_graph(&deployment_compiled.plan_models);
    let selection = stb_plan::direct::Selection::new(&graph, Some(copied.clone()));
    let start_time = staged.start_time.clone();
    // The shrink guard compares each copy's window with what its active copy holds now:
    // what readers would lose by promoting it.
    let live_tables: BTreeMap<String, String> = compiled
        .plan_models
        .iter()
        .filter(|m| copied.contains(&m.name))
        .filter_map(|m| {
            let table = m.table()?;
            let id = deployed.state(table).1?;
            Some((m.name.clone(), id.physical(table)))
        })
        .collect();
    let seeds = seeding::seed_sources(staged, compiled, reads, &live_tables);
    let mut planned = crate::direct::plan_selection(
        project,
        &deployment_compiled,
        &selection,
        start_time,
        reads,
        settings,
        &crate::direct::Copies {
            live_tables,
            seeds,
            starts: staged.root_starts.clone(),
        },
    )?;
    let deployment = Deployment {
        id: staged.deployment.clone(),
        replay_lineage_mode,
    };
    // The objects only become the metadata statement: made here, dropped after it.
    let roots: BTreeSet<&str> = staged
        .plan
        .rebuild_subtrees
        .iter()
        .map(|s| s.root.as_str())
        .collect();
    let roots = &roots;
    // What a reference to each model becomes, found by name (a scan of every model per
    // reference made a 10,000-model deployment quadratic).
    let by_name = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    let by_name = &by_name;
    let objects: Vec<DeployedObject> = compiled
        .plan_models
        .iter()
        .filter(|m| copied.contains(&m.name))
        .flat_map(|m| {
            let query = m.deployable.query_with(&|name: &str| {
                by_name
                    .get(name)
                    .map(|other| other.reference.clone())
                    .unwrap_or_default()
            });
            m.relations
                .iter()
                .map(move |(kind, relation)| DeployedObject {
                    object_type: kind.as_str(),
                    logical_name: relation.clone(),
                    physical_name: staged.deployment.physical(relation),
                    model: m.name.clone(),
                    is_selected_root: roots.contains(m.name.as_str()),
                    fingerprint: object_fingerprint(m, *kind),
                    canonical_query: (*kind != RelationKind::Table).then(|| query.clone()),
                })
        })
        .collect();
    record_in_workflow(
        &mut planned.workflow,
        &deployment,
        &objects,
        &deployment_compiled.plan_models,
        &compiled.plan_sources,
    );
    planned.deployment = Some(deployment);
    Ok(planned)
}

/// What a deployment records, as steps of its own workflow (so its step files hold every
/// statement it ran): its objects after the preparation, each root's boundary after its
/// capture, and, last, its header, which makes it complete. The header's fingerprint is
/// the sha256 of every statement before it.
fn record_in_workflow(
    workflow: &mut stb_plan::workflow::Workflow,
    deployment: &Deployment,
    objects: &[DeployedObject],
    models: &[stb_plan::direct::PlanModel],
    sources: &[stb_plan::direct::PlanSource],
) {
    use stb_plan::workflow::{Phase, Step};
    let database = workflow.database.clone();
    if let Some(sql) = stb_warehouse::deployments::record_objects_sql(
        &database,
        &deployment.object_states(objects),
    ) {
        let at = workflow
            .steps
            .iter()
            .position(|step| step.phase != Phase::Preparation)
            .unwrap_or(workflow.steps.len());
        workflow.steps.insert(
            at,
            Step::statement(
                "persist_candidate_metadata".to_owned(),
                Phase::Preparation,
                sql,
            ),
        );
    }
    stb_plan::watermark::record_boundaries(
        workflow,
        deployment.id.as_str(),
        (models, sources),
        stb_warehouse::deployments::boundaries::TABLE,
    );
    // Hashed one statement at a time: holding them all is a second copy of the workflow.
    let fingerprint = stb_warehouse::statements::workflow_sha256_of(
        workflow
            .steps
            .iter()
            .map(|step| workflow.recorded_sql(step)),
    );
    let created_at = deployment.id.created_at();
    let header = stb_warehouse::deployments::complete_sql(
        &database,
        &stb_warehouse::deployments::Header {
            deployment_id: deployment.id.as_str(),
            workflow_fingerprint: &fingerprint,
            replay_lineage_mode: &deployment.replay_lineage_mode,
            created_at: &created_at,
        },
    );
    workflow.steps.push(Step::statement(
        "complete_deployment".to_owned(),
        Phase::Finalization,
        header,
    ));
    workflow.completed_when = Some(stb_warehouse::deployments::complete_check_sql(
        &database,
        deployment.id.as_str(),
    ));
}

/// Refuses a deployment id that names a complete deployment: its copies may be published,
/// and a build would drop them.
///
/// # Errors
/// `STB-BUILD-006`, or the read failed.
pub fn refuse_complete(
    client: &Client,
    database: &str,
    id: &DeploymentId,
) -> Result<(), EngineError> {
    if stb_warehouse::deployments::is_complete(client, database, id.as_str())
        .map_err(|e| EngineError::from(&e))?
    {
        return Err(EngineError::new(
            crate::build::DEPLOYMENT_CODE,
            format!("deployment {id} is complete already; a build never writes into it again"),
            "leave --deployment-id out to build a new deployment",
        ));
    }
    Ok(())
}
