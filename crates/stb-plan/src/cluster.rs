//! A direct workflow as a cluster runs it (`on_cluster` and `sharded` topologies).
//!
//! The workflow is assembled for one server first (every decision is the same on a
//! cluster: what is torn down, created, captured and replayed), then each step is written
//! again in the cluster's form:
//!
//! - Every DDL statement `ON CLUSTER`, from the typed objects ([`stb_ddl::cluster`]): on a
//!   sharded cluster a table becomes its local part and a `Distributed` table, a
//!   materialized view reads the local part of its driving input (the rows of the shard it
//!   runs on) and writes through the `Distributed` table of its target.
//! - Every boundary and replay once per shard, on a replica of that shard: first `SYSTEM
//!   SYNC REPLICA` of the driving input (rows another replica of the shard consumed are
//!   then there), then the capture of that shard's rows, then the replay of exactly those.
//!   A row is held by one shard, so each is replayed once; rows landed after the capture
//!   flow through the new views on whichever shard consumes them.
//!
//! Kafka landings keep one consumer group across the cluster: the broker gives each
//! server some partitions, and each server lands what it reads in its own local part.

use std::collections::{BTreeMap, BTreeSet};

use stb_ddl::cluster::{Cluster, DropKind, Placement, Topology};
use stb_ddl::{Audience, QualifiedName};
use stb_model::planning::QueryPart;

use crate::direct::{DirectPlan, Landing, PlanError, PlanModel, PlanSource, RelationKind};
use crate::replay::capture_sql;
use crate::workflow::{Action, Phase, RootReplay, Step, Workflow};

/// One shard of the cluster, as the servers' `system.clusters` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    /// `shard_num`, from 1.
    pub number: u32,
    /// Its replicas' `host:port`, in replica order.
    pub replicas: Vec<String>,
}

/// The cluster a target is on, and its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTarget {
    pub cluster: Cluster,
    pub shards: Vec<Shard>,
}

/// What a workflow carries when a cluster runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterWork {
    pub target: ClusterTarget,
    /// Each replay root as every shard runs it (same order as the workflow's roots): it
    /// reads and bounds its shard's part of the driving input.
    pub shard_roots: Vec<RootReplay>,
}

impl ClusterWork {
    /// What the statement records hold for root `root`'s replay on shard `shard`.
    #[must_use]
    pub fn placeholder(&self, root: usize, shard: u32) -> String {
        let root = &self.shard_roots[root];
        let reads = root.template.anchor.read_from();
        if !root.bounded {
            return format!(
                "-- replay_{} on shard {shard}: INSERT INTO {} from all of {reads} (rebuilt by an earlier stage, fed by paused landings only); rendered at runtime",
                root.model, root.template.target
            );
        }
        format!(
            "-- replay_{} on shard {shard}: INSERT INTO {} from {reads} bounded by capture_replay_{}__shard_{shard} ({} boundary); rendered at runtime",
            root.model,
            root.template.target,
            root.model,
            root.template.anchor.mode.as_str()
        )
    }

    /// What waits for the inserts running anywhere on the cluster.
    #[must_use]
    pub fn running_inserts_sql(&self) -> String {
        format!(
            "SELECT query_id FROM clusterAllReplicas({}, system.processes) WHERE query_kind = 'Insert'",
            stb_ddl::string_literal(&self.target.cluster.name)
        )
    }
}

/// What a step of the single-server workflow is, found from its id within its phase: the
/// phase says which kinds of step it can be (a teardown step is a set-aside or a drop, a
/// cleanup step a drop of a set-aside), and every id must name exactly one known
/// relation or landing of that kind, so an author's relation named like another step's
/// prefix (`previous_orders`, `source_kafka__orders`) is never taken for it.
enum Known<'a> {
    Database,
    SetAside { relation: &'a str, aside: &'a str },
    Drop(&'a str, RelationKind),
    DropPrevious(&'a str),
    Realize(&'a PlanModel, RelationKind),
    Kafka(&'a Landing),
    DropKafka(&'a Landing),
    Raw(&'a Landing),
    Pause(&'a Landing),
    Activate(&'a Landing),
}

/// What the single-server workflow's ids name: relations, landings, set-asides.
struct Names<'a> {
    relations: BTreeMap<&'a str, (&'a PlanModel, RelationKind)>,
    torn_down: BTreeMap<&'a str, RelationKind>,
    by_source: BTreeMap<&'a str, &'a Landing>,
    by_view: BTreeMap<&'a str, &'a Landing>,
    asides: BTreeMap<&'a str, &'a str>,
}

impl<'a> Names<'a> {
    fn new(
        workflow: &'a Workflow,
        plan: &'a DirectPlan,
        models: &'a [PlanModel],
        sources: &'a [PlanSource],
    ) -> Self {
        let relations = models
            .iter()
            .flat_map(|m| m.relations.iter().map(move |(k, r)| (r.as_str(), (m, *k))))
            .collect();
        let landings: Vec<(&str, &Landing)> = sources
            .iter()
            .filter_map(|s| s.landing.as_ref().map(|l| (s.name.as_str(), l)))
            .collect();
        Self {
            relations,
            torn_down: plan
                .teardown
                .iter()
                .map(|(kind, relation)| (relation.as_str(), *kind))
                .collect(),
            by_source: landings.iter().copied().collect(),
            by_view: landings
                .iter()
                .map(|(_, l)| (l.view.as_str(), *l))
                .collect(),
            asides: workflow
                .undo
                .set_aside
                .iter()
                .map(|(r, a)| (r.as_str(), a.as_str()))
                .collect(),
        }
    }

    fn known(&self, id: &'a str, phase: Phase) -> Option<Known<'a>> {
        let landing = |prefix: &str| {
            id.strip_prefix(prefix)
                .and_then(|source| self.by_source.get(source).copied())
        };
        let view = |prefix: &str| {
            id.strip_prefix(prefix)
                .and_then(|view| self.by_view.get(view).copied())
        };
        match phase {
            Phase::Preparation => {
                if id == "prepare_target_database" {
                    return Some(Known::Database);
                }
                if let Some(landing) = landing("drop_source_kafka__") {
                    return Some(Known::DropKafka(landing));
                }
                if let Some(landing) = [
                    "prepare_source_kafka__",
                    "restore_source_kafka__",
                    "recreate_source_kafka__",
                ]
                .into_iter()
                .find_map(landing)
                {
                    return Some(Known::Kafka(landing));
                }
                if let Some(landing) = landing("prepare_source_raw__") {
                    return Some(Known::Raw(landing));
                }
                view("pause_source_").map(Known::Pause)
            }
            Phase::Teardown => {
                if let Some(relation) = id.strip_prefix("set_aside_")
                    && let Some(aside) = self.asides.get(relation)
                {
                    return Some(Known::SetAside { relation, aside });
                }
                let relation = id.strip_prefix("drop_")?;
                self.torn_down
                    .get(relation)
                    .map(|kind| Known::Drop(relation, *kind))
            }
            Phase::Realization => {
                let relation = id.strip_prefix("realize_")?;
                self.relations
                    .get(relation)
                    .map(|(model, kind)| Known::Realize(model, *kind))
            }
            Phase::Activation => view("activate_source_").map(Known::Activate),
            Phase::Cleanup => {
                let relation = id.strip_prefix("drop_previous_")?;
                self.asides
                    .get(relation)
                    .map(|aside| Known::DropPrevious(aside))
            }
            Phase::Stabilization | Phase::Boundary | Phase::Replay | Phase::Finalization => None,
        }
    }
}

fn refusal(message: String) -> PlanError {
    PlanError {
        message,
        hint: "see docs/clusters.md for what a cluster plan covers; plan this target's models on one server or a Replicated database meanwhile",
    }
}

/// Writes `workflow` (assembled for one server) as `target`'s cluster runs it: every DDL
/// statement in the cluster's form, every boundary and replay once per shard.
///
/// # Errors
/// A step without a cluster form (a virtual deployment's seeds and records), a table the
/// cluster cannot hold, or a sharded replay over an input without a local part (an
/// adopted table).
pub fn distribute(
    workflow: Workflow,
    plan: &DirectPlan,
    models: &[PlanModel],
    sources: &[PlanSource],
    target: &ClusterTarget,
    present: &dyn Fn(&str) -> bool,
) -> Result<Workflow, PlanError> {
    let cluster = &target.cluster;
    let database = workflow.database.clone();
    let sharded = cluster.topology == Topology::Sharded;
    check_shards(target)?;
    let names = Names::new(&workflow, plan, models, sources);
    let by_name = crate::work::ModelIndex::new(models);
    let qualified = |name: &str| QualifiedName::new(&database, name);
    let local = |name: &str| cluster.storage_name(&qualified(name)).name;
    // The tables split into a local part and a Distributed table (sharded only).
    let mut split: BTreeSet<String> = BTreeSet::new();
    let shard_roots = workflow
        .roots
        .iter()
        .map(|root| shard_root(root, &by_name, sources, &database, target))
        .collect::<Result<Vec<_>, _>>()?;
    let waits = workflow
        .roots
        .iter()
        .map(|root| Waits::of(root, &by_name, sources, &database, cluster))
        .collect::<Vec<_>>();
    let mut steps = Vec::new();
    for step in &workflow.steps {
        let id = step.id.as_str();
        let phase = step.phase;
        let Action::Statement(_) = &step.action else {
            distribute_action(step, &shard_roots, &waits, target, &mut steps)?;
            continue;
        };
        let Some(known) = names.known(id, phase) else {
            if phase == Phase::Stabilization {
                // A server-side wait: it reads nothing.
                steps.push(step.clone());
                continue;
            }
            return Err(refusal(format!(
                "step {id} has no cluster form: stb cannot plan it on the {} cluster '{}'",
                cluster.topology.as_str(),
                cluster.name
            )));
        };
        let mut push = |id: String, sql: String| steps.push(Step::statement(id, phase, sql));
        match known {
            Known::Database => push(id.to_owned(), cluster.create_database(&database)),
            Known::SetAside { relation, aside } => push(
                id.to_owned(),
                cluster.rename(&qualified(relation), &qualified(aside)),
            ),
            Known::Drop(relation, kind) => {
                // A table's local part goes with it; a view has none, unless it was a
                // table before (the catalog lists the part).
                let split = kind == RelationKind::Table || present(&local(relation));
                for (suffix, sql) in drops(cluster, &qualified(relation), split) {
                    push(format!("{id}{suffix}"), sql);
                }
            }
            Known::DropPrevious(aside) => {
                for (suffix, sql) in drops(cluster, &qualified(aside), true) {
                    push(format!("{id}{suffix}"), sql);
                }
            }
            Known::Realize(model, kind) => {
                let statements = realize(cluster, model, kind, &by_name, sources, &database)?;
                if sharded && kind == RelationKind::Table {
                    split.extend(model.table().map(str::to_owned));
                }
                for (suffix, sql) in statements {
                    push(format!("{id}{suffix}"), sql);
                }
            }
            Known::Kafka(landing) => {
                let kafka = kafka_definition(landing)?;
                let mut create = Step::statement(
                    id.to_owned(),
                    phase,
                    cluster.create_kafka_table_if_not_exists(kafka, Audience::Runtime),
                );
                create.recorded =
                    Some(cluster.create_kafka_table_if_not_exists(kafka, Audience::Artifact));
                steps.push(create);
            }
            Known::DropKafka(landing) => {
                for sql in cluster.drop(DropKind::Whole, &qualified(&landing.kafka_table)) {
                    push(id.to_owned(), sql);
                }
            }
            Known::Raw(landing) => {
                let raw = landing.raw_definition.as_ref().ok_or_else(|| {
                    refusal(format!("landing {} has no definition", landing.raw_table))
                })?;
                let statements = cluster
                    .create_table_if_not_exists(raw, None, Placement::WhereWritten)
                    .map_err(|e| refusal(format!("landing {}: {e}", landing.raw_table)))?;
                if sharded {
                    split.insert(landing.raw_table.clone());
                }
                for (suffix, sql) in split_suffixes(statements) {
                    push(format!("{id}{suffix}"), sql);
                }
            }
            Known::Pause(landing) => {
                for sql in cluster.drop(DropKind::View, &qualified(&landing.view)) {
                    push(id.to_owned(), sql);
                }
            }
            Known::Activate(landing) => push(
                id.to_owned(),
                cluster.create_landing_view_if_not_exists(view_definition(landing)?),
            ),
        }
    }
    let mut paused_landings = workflow.paused_landings.clone();
    for paused in &mut paused_landings {
        if let Some(landing) = names.by_source.get(paused.source.as_str()) {
            paused.resume_sql =
                cluster.create_landing_view_if_not_exists(view_definition(landing)?);
            let kafka = kafka_definition(landing)?;
            paused.kafka_sql = cluster.create_kafka_table_if_not_exists(kafka, Audience::Runtime);
            paused.kafka_recorded =
                cluster.create_kafka_table_if_not_exists(kafka, Audience::Artifact);
        }
    }
    let mut undo = workflow.undo.clone();
    undo.created = undo
        .created
        .iter()
        .flat_map(|relation| {
            let mut both = vec![relation.clone()];
            if split.contains(relation) {
                both.push(local(relation));
            }
            both
        })
        .collect();
    Ok(Workflow {
        steps,
        paused_landings,
        undo,
        cluster: Some(ClusterWork {
            target: target.clone(),
            shard_roots,
        }),
        ..workflow
    })
}

/// What a root's capture and replay wait for on a cluster, so each shard's replica reads
/// every row its shard holds: the rows queued in `Distributed` tables sent to their
/// shards first (`flush_*`, from the server the build is connected to, `ON CLUSTER`),
/// then the parts other replicas of the shard wrote fetched (`sync_*`, on the replica).
struct Waits {
    /// The driving input written through its `Distributed` table (a model's table on a
    /// sharded cluster; a landing is written where it is consumed).
    flush_input: Option<String>,
    /// The driving input's part, when stb created it replicated (an adopted table is the
    /// author's).
    sync_input: Option<String>,
    /// The target, which the new views write into before the replay looks for the keys
    /// they wrote (only roots that skip those keys look).
    flush_target: Option<String>,
    sync_target: Option<String>,
}

impl Waits {
    fn of(
        root: &RootReplay,
        by_name: &crate::work::ModelIndex<'_>,
        sources: &[PlanSource],
        database: &str,
        cluster: &Cluster,
    ) -> Self {
        let input = input_table(
            cluster,
            by_name,
            sources,
            database,
            &root.driving_input,
            &root.model,
        )
        .ok();
        let input_is_model = by_name.contains(&root.driving_input);
        let target = by_name
            .get(root.model.as_str())
            .and_then(PlanModel::table)
            .map(|table| QualifiedName::new(database, table))
            .filter(|_| root.template.skip_existing.is_some());
        Self {
            flush_input: input
                .as_ref()
                .filter(|_| input_is_model)
                .and_then(|table| cluster.flush_distributed(table)),
            sync_input: input.as_ref().map(|table| cluster.sync_replica(table)),
            flush_target: target
                .as_ref()
                .and_then(|table| cluster.flush_distributed(table)),
            sync_target: target.as_ref().map(|table| cluster.sync_replica(table)),
        }
    }
}

/// A step that is not a statement: captures and replays once per shard, each after what
/// it waits for ([`Waits`]); what needs no cluster form (a wait for inserts, a consumer
/// group's reset) as it is.
fn distribute_action(
    step: &Step,
    shard_roots: &[RootReplay],
    waits: &[Waits],
    target: &ClusterTarget,
    steps: &mut Vec<Step>,
) -> Result<(), PlanError> {
    let on_shard = |id: String, sql: &str, shard: u32| {
        let mut step = Step::statement(id, step.phase, sql.to_owned());
        step.shard = Some(shard);
        step
    };
    match step.action {
        Action::Capture(index) | Action::Replay(index) => {
            let root = &shard_roots[index];
            let wait = &waits[index];
            let capture = matches!(step.action, Action::Capture(_));
            // A bounded root's input is synced before its capture, its target before its
            // replay; an unbounded one (a fan-in over an input an earlier stage rebuilt)
            // has no capture, and its replay looks for no keys: its input before it.
            let input_waits = capture || !root.bounded;
            let (flush, sync, what) = if input_waits {
                (&wait.flush_input, &wait.sync_input, "input")
            } else {
                (&wait.flush_target, &wait.sync_target, "target")
            };
            if let Some(flush) = flush {
                steps.push(Step::statement(
                    format!("flush_{what}_{}", root.model),
                    step.phase,
                    flush.clone(),
                ));
            }
            for shard in &target.shards {
                let number = shard.number;
                if let Some(sync) = sync {
                    steps.push(on_shard(
                        format!("sync_{what}_{}__shard_{number}", root.model),
                        sync,
                        number,
                    ));
                }
                let mut work = step.clone();
                work.id = format!("{}__shard_{number}", step.id);
                work.shard = Some(number);
                steps.push(work);
            }
            Ok(())
        }
        Action::SettleInserts | Action::ResetConsumerGroup(_) => {
            steps.push(step.clone());
            Ok(())
        }
        Action::Seed(_) | Action::Watermark(_) => Err(refusal(format!(
            "step {} belongs to a virtual deployment, which stb does not plan on the {} cluster '{}' yet",
            step.id,
            target.cluster.topology.as_str(),
            target.cluster.name
        ))),
        Action::Statement(_) => Err(refusal(format!("step {} has no cluster form", step.id))),
    }
}

/// A relation's drops with their step-id suffixes: the `Distributed` table under the
/// step's own id, its local part (`split`) under `_local`.
fn drops(cluster: &Cluster, name: &QualifiedName, split: bool) -> Vec<(&'static str, String)> {
    let kind = if split {
        DropKind::Table
    } else {
        DropKind::Whole
    };
    cluster
        .drop(kind, name)
        .into_iter()
        .zip(["", "_local"])
        .map(|(sql, suffix)| (suffix, sql))
        .collect()
}

/// Refuses a cluster whose shards would replay the same rows: on `on_cluster` with more
/// than one shard, a coordination path without `{shard}` makes every server a replica of
/// one table, so each shard's replay would read all of its rows.
fn check_shards(target: &ClusterTarget) -> Result<(), PlanError> {
    let cluster = &target.cluster;
    if cluster.topology == Topology::OnCluster
        && target.shards.len() > 1
        && !cluster.zookeeper_path.contains("{shard}")
    {
        return Err(refusal(format!(
            "the on_cluster cluster '{}' has {} shards and its zookeeper_path '{}' names no {{shard}}: every server would hold every row, and each shard's replay would write them again",
            cluster.name,
            target.shards.len(),
            cluster.zookeeper_path
        )));
    }
    Ok(())
}

/// A split table's statements with their step-id suffixes: the local part first (`_local`),
/// then the `Distributed` table under the step's own id.
fn split_suffixes(statements: Vec<String>) -> Vec<(&'static str, String)> {
    let suffixes: &[&str] = if statements.len() == 2 {
        &["_local", ""]
    } else {
        &[""]
    };
    statements
        .into_iter()
        .zip(suffixes.iter().copied())
        .map(|(sql, suffix)| (suffix, sql))
        .collect()
}

fn kafka_definition(landing: &Landing) -> Result<&stb_ddl::KafkaTable, PlanError> {
    landing
        .kafka_definition
        .as_ref()
        .ok_or_else(|| refusal(format!("landing {} has no definition", landing.kafka_table)))
}

fn view_definition(landing: &Landing) -> Result<&stb_ddl::MaterializedView, PlanError> {
    landing
        .view_definition
        .as_ref()
        .ok_or_else(|| refusal(format!("landing {} has no definition", landing.view)))
}

/// A model's relation of `kind` as the cluster creates it, with step-id suffixes.
fn realize(
    cluster: &Cluster,
    model: &PlanModel,
    kind: RelationKind,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    database: &str,
) -> Result<Vec<(&'static str, String)>, PlanError> {
    let deployable = &model.deployable;
    let missing = || {
        refusal(format!(
            "model '{}' has no {} definition",
            model.name,
            kind.as_str()
        ))
    };
    match kind {
        RelationKind::Table => {
            let table = deployable.table.as_ref().ok_or_else(missing)?;
            let statements = cluster
                .create_table(table, model.sharding_key.as_deref(), Placement::ByKey)
                .map_err(|e| refusal(format!("model '{}': {e}", model.name)))?;
            Ok(split_suffixes(statements))
        }
        RelationKind::MaterializedView => {
            let view = deployable.materialized_view.as_ref().ok_or_else(missing)?;
            let query = view_query(cluster, model, by_name, sources, database)?;
            Ok(vec![(
                "",
                cluster.create_materialized_view(&stb_ddl::MaterializedView {
                    query,
                    ..view.clone()
                }),
            )])
        }
        RelationKind::View => {
            let view = deployable.view.as_ref().ok_or_else(missing)?;
            let query = deployable.query_with(&|name| reference(by_name, name));
            Ok(vec![(
                "",
                cluster.create_view(&stb_ddl::View {
                    query,
                    ..view.clone()
                }),
            )])
        }
    }
}

/// What a reference to model `name` reads: its relation (a `Distributed` table on a
/// sharded cluster: all shards' rows).
fn reference(by_name: &crate::work::ModelIndex<'_>, name: &str) -> String {
    by_name
        .get(name)
        .map_or_else(|| name.to_owned(), |m| m.reference.clone())
}

/// A materialized view's query on the cluster: on a sharded cluster its driving input is
/// read from the shard's local part (a view fires on the inserts of the server it runs
/// on, which go to the local part), every other input through its `Distributed` table.
fn view_query(
    cluster: &Cluster,
    model: &PlanModel,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    database: &str,
) -> Result<String, PlanError> {
    let driving = model.driving_input.as_deref();
    if cluster.topology != Topology::Sharded || driving.is_none() {
        return Ok(model
            .deployable
            .query_with(&|name| reference(by_name, name)));
    }
    let table = input_table(
        cluster,
        by_name,
        sources,
        database,
        driving.unwrap_or_default(),
        &model.name,
    )?;
    // The shard's part, read under the input's own name (a column the author qualified
    // with it still resolves), unless the author gave it an alias.
    let input = cluster.storage_name(&table).to_string();
    let parts = &model.deployable.query_parts;
    let mut query = String::new();
    for (index, part) in parts.iter().enumerate() {
        let is_driving = match part {
            QueryPart::Text(text) => {
                query.push_str(text);
                continue;
            }
            QueryPart::Model(name) | QueryPart::Source { name, .. } => {
                Some(name.as_str()) == driving
            }
        };
        if !is_driving {
            match part {
                QueryPart::Source { relation, .. } => query.push_str(relation),
                QueryPart::Model(name) => query.push_str(&reference(by_name, name)),
                QueryPart::Text(_) => {}
            }
            continue;
        }
        query.push_str(&input);
        let next = match parts.get(index + 1) {
            Some(QueryPart::Text(text)) => text.as_str(),
            _ => "",
        };
        if !crate::replay::alias_follows(next) {
            query.push_str(" AS ");
            query.push_str(&stb_ddl::identifier(&table.name));
        }
    }
    Ok(query)
}

/// A model's driving input `input` when it is a table stb creates (a model's table or a
/// managed landing), which the cluster stores replicated and, sharded, split into local
/// parts; anything else (an adopted table) is the author's.
fn input_table(
    cluster: &Cluster,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    database: &str,
    input: &str,
    model: &str,
) -> Result<QualifiedName, PlanError> {
    let table = match by_name.get(input) {
        Some(upstream) => upstream.table().map(str::to_owned),
        None => sources
            .iter()
            .find(|s| s.name == input)
            .and_then(|s| s.landing.as_ref())
            .map(|l| l.raw_table.clone()),
    };
    table
        .map(|table| QualifiedName::new(database, &table))
        .ok_or_else(|| {
            refusal(format!(
                "model '{model}' is driven by '{input}', which has no local part on the sharded cluster '{}' (an adopted table or a view): its rows cannot be replayed shard by shard",
                cluster.name
            ))
        })
}

/// `root` as each shard replays it: its capture and replay read the shard's part of the
/// driving input; a sharded replay writes through the target's `Distributed` table and
/// returns once every row is on its shard.
fn shard_root(
    root: &RootReplay,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    database: &str,
    target: &ClusterTarget,
) -> Result<RootReplay, PlanError> {
    let cluster = &target.cluster;
    let replicated_shards = target.shards.iter().any(|shard| shard.replicas.len() > 1);
    let mut shard_root = root.clone();
    if cluster.topology == Topology::OnCluster
        && replicated_shards
        && input_table(
            cluster,
            by_name,
            sources,
            database,
            &root.driving_input,
            &root.model,
        )
        .is_err()
    {
        return Err(refusal(format!(
            "model '{}' is driven by '{}', a table stb did not create: on the on_cluster cluster '{}', whose shards have more than one replica, its rows may differ from replica to replica, and a shard's replay reads one",
            root.model, root.driving_input, cluster.name
        )));
    }
    if cluster.topology == Topology::Sharded {
        let input = input_table(
            cluster,
            by_name,
            sources,
            database,
            &root.driving_input,
            &root.model,
        )?;
        shard_root.template.anchor.local = Some(cluster.storage_name(&input).to_string());
        shard_root
            .template
            .settings
            .push(("distributed_foreground_insert".to_owned(), "1".to_owned()));
    }
    shard_root.capture_sql = capture_sql(&shard_root.template.anchor, root.start_time.as_ref());
    Ok(shard_root)
}

#[cfg(test)]
mod tests;
