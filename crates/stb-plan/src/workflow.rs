//! The direct build's workflow: every statement, in the order it runs, assembled once
//! before confirmation. Replay statements are templates until their boundary is captured.
//!
//! Phases are monotonic within a stage: preparation, teardown, realization, stabilization,
//! boundary, replay. All boundaries of a stage are captured before its first replay so
//! every capture is taken as close as possible to the moment the new views went live.
//! Later stages (fan-ins: models joining a side input this build rebuilds) create their
//! views and replay after the earlier stages' replays, then activation resumes landings.

use std::collections::{BTreeMap, BTreeSet};

use crate::direct::{DirectPlan, Landing, PlanError, PlanModel, PlanSource, RelationKind};
use crate::options::StartTime;
use crate::replay::{
    Anchor, BoundaryMode, ReplayTemplate, capture_sql, existing_keys, required_columns,
};
use crate::seed::Seed;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Phase {
    Preparation,
    Teardown,
    Realization,
    Stabilization,
    Boundary,
    Replay,
    Activation,
    /// After everything else: the tables moved aside are dropped (see [`crate::restore`]).
    Cleanup,
    /// A virtual deployment's last step: its header row, which makes it complete. A build
    /// that stops before the header is on record is undone (the deployment stays
    /// incomplete; a rerun with its id builds it again); once it is, nothing is given back
    /// (see [`Workflow::completed_when`]).
    Finalization,
}

impl Phase {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preparation => "preparation",
            Self::Teardown => "teardown",
            Self::Realization => "realization",
            Self::Stabilization => "stabilization",
            Self::Boundary => "boundary",
            Self::Replay => "replay",
            Self::Activation => "activation",
            Self::Cleanup => "cleanup",
            Self::Finalization => "finalization",
        }
    }
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Action {
    /// A statement known in full now.
    Statement(String),
    /// Runs root `n`'s capture query and keeps its answer.
    Capture(usize),
    /// Deletes the consumer group of fresh landing `n` (see [`Workflow::fresh_groups`]).
    ResetConsumerGroup(usize),
    /// Waits until the inserts running when the boundaries were captured have finished,
    /// so every row they committed to a driving input has reached the new views' tables
    /// before a replay looks for rows the views already wrote.
    SettleInserts,
    /// Renders and runs root `n`'s replay from its capture.
    Replay(usize),
    /// Renders and runs root `n`'s seed from its capture (see [`crate::seed`]).
    Seed(usize),
    /// Renders and runs watermark `n`'s insert from its root's capture (see
    /// [`crate::watermark`]).
    Watermark(usize),
}

/// The running inserts a settle step waits for.
pub const RUNNING_INSERTS_SQL: &str =
    "SELECT query_id FROM system.processes WHERE query_kind = 'Insert'";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    pub id: String,
    pub phase: Phase,
    pub action: Action,
    /// What the records hold instead of the statement, when it carries secrets.
    pub recorded: Option<String>,
    /// The shard whose replica runs it, on a cluster (see [`crate::cluster`]); `None`:
    /// the server the build is connected to (which runs `ON CLUSTER` statements on
    /// every server).
    pub shard: Option<u32>,
}

impl Step {
    #[must_use]
    pub fn statement(id: String, phase: Phase, sql: String) -> Self {
        Self {
            id,
            phase,
            action: Action::Statement(sql),
            recorded: None,
            shard: None,
        }
    }

    #[must_use]
    pub fn of(id: String, phase: Phase, action: Action) -> Self {
        Self {
            id,
            phase,
            action,
            recorded: None,
            shard: None,
        }
    }
}

impl Step {
    /// `query` for reads, `mutation` for everything that changes the warehouse.
    #[must_use]
    pub fn intent(&self) -> &'static str {
        match self.action {
            Action::Capture(_) | Action::SettleInserts => "query",
            Action::ResetConsumerGroup(_) => "kafka",
            Action::Statement(_) if self.phase == Phase::Stabilization => "query",
            Action::Statement(_) | Action::Replay(_) | Action::Seed(_) | Action::Watermark(_) => {
                "mutation"
            }
        }
    }
}

/// One replay root, ready to capture and replay.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootReplay {
    pub model: String,
    pub driving_input: String,
    pub propagated: Vec<String>,
    pub capture_sql: String,
    pub template: ReplayTemplate,
    /// See [`crate::direct::ReplayRoot::stage`].
    pub stage: usize,
    /// The rebuilt side inputs a fan-in waits for.
    pub waits_for: Vec<String>,
    /// False for a fan-in whose driving input was rebuilt in an earlier stage from paused
    /// landings only: nothing can reach that input any more until activation, so the
    /// replay reads all of it and needs no boundary (nor lineage columns in it).
    pub bounded: bool,
    /// The start time this root's window applies: the build's, except for a fan-in
    /// replayed from a rebuilt input, which holds only the rebuilt window already.
    pub start_time: Option<StartTime>,
    /// Its driving input is rebuilt by an earlier stage of the same build.
    pub rebuilt_input: bool,
    /// A seeded deployment's copy: the active copy's rows before the start.
    pub seed: Option<Seed>,
    /// `[build] replay_chunk_rows` when this root's replay is cut into chunks (see
    /// [`crate::replay::chunks`]): a bounded replay whose rows do not depend on the cut.
    pub chunk_rows: Option<u64>,
}

impl RootReplay {
    /// What the statement records hold for the replay until its boundary is known.
    #[must_use]
    pub fn placeholder(&self) -> String {
        if !self.bounded {
            return format!(
                "-- replay_{}: INSERT INTO {} from all of {} (rebuilt by an earlier stage, fed by paused landings only); rendered at runtime",
                self.model, self.template.target, self.driving_input
            );
        }
        let chunked = self.chunk_rows.map_or_else(String::new, |rows| {
            format!(", in chunks of at most {rows} rows")
        });
        format!(
            "-- replay_{}: INSERT INTO {} from {} bounded by capture_replay_{} ({} boundary{chunked}); rendered at runtime",
            self.model,
            self.template.target,
            self.driving_input,
            self.model,
            self.template.anchor.mode.as_str()
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Workflow {
    pub database: String,
    pub steps: Vec<Step>,
    pub roots: Vec<RootReplay>,
    pub start_time: Option<StartTime>,
    /// Landing views paused for the build: (source, step that pauses it, the statement
    /// that resumes it). Every exit after a pause must resume them. Never recorded (the
    /// statements can hold credentials): a workflow that pauses landings is not resumable.
    #[serde(skip)]
    pub paused_landings: Vec<PausedLanding>,
    /// Consumer groups of landings this build creates: their committed offsets belong to
    /// an earlier landing and would skip history, so they are deleted first. Never
    /// recorded (brokers can hold credentials); they are reset before any replay.
    #[serde(skip)]
    pub fresh_groups: Vec<FreshGroup>,
    /// What a build that does not finish must undo (see [`crate::restore`]).
    pub undo: crate::restore::Undo,
    /// The boundaries a virtual deployment records (see [`crate::watermark`]).
    pub watermarks: Vec<crate::watermark::Watermark>,
    /// A query answering one row with a column `complete` (1 or 0): whether what the
    /// workflow makes is complete on record (a virtual deployment's header). A build that
    /// stops once it is complete is neither undone nor finished: it is done. `None`: only
    /// the run's own events say so.
    pub completed_when: Option<String>,
    /// Set when a cluster runs the workflow: its shards and each root as a shard replays
    /// it (see [`crate::cluster::distribute`]). Never recorded: this executor does not run
    /// a cluster's workflow.
    #[serde(skip)]
    pub cluster: Option<crate::cluster::ClusterWork>,
}

/// The consumer group of a landing the build creates.
#[derive(Clone, PartialEq, Eq)]
pub struct FreshGroup {
    pub source: String,
    pub group: String,
    /// May hold credentials.
    pub brokers: String,
    pub settings: Vec<(String, String)>,
}

impl std::fmt::Debug for FreshGroup {
    // Brokers and settings can hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshGroup")
            .field("source", &self.source)
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

/// A managed source's landing view that the build stops and must start again.
#[derive(Clone, PartialEq, Eq)]
pub struct PausedLanding {
    pub source: String,
    pub pause_step: String,
    pub activate_step: String,
    /// `CREATE MATERIALIZED VIEW IF NOT EXISTS` of the landing view.
    pub resume_sql: String,
    /// `CREATE TABLE IF NOT EXISTS` of the Kafka table (as run, and as recorded): a
    /// recovery runs it first, in case the build stopped inside a settings repair.
    pub kafka_sql: String,
    pub kafka_recorded: String,
}

impl std::fmt::Debug for PausedLanding {
    // The Kafka table's statement can hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedLanding")
            .field("source", &self.source)
            .field("pause_step", &self.pause_step)
            .field("activate_step", &self.activate_step)
            .finish_non_exhaustive()
    }
}

impl Workflow {
    /// The statement a step records before it runs (replays: their placeholder); borrowed
    /// where the workflow holds it (a deployment's metadata insert is tens of megabytes).
    #[must_use]
    pub fn recorded_sql<'a>(&'a self, step: &'a Step) -> std::borrow::Cow<'a, str> {
        use std::borrow::Cow;
        if let Some(recorded) = &step.recorded {
            return Cow::Borrowed(recorded);
        }
        if let (Some(cluster), Some(shard)) = (&self.cluster, step.shard) {
            match &step.action {
                Action::Capture(root) => {
                    return Cow::Borrowed(&cluster.shard_roots[*root].capture_sql);
                }
                Action::Replay(root) => return Cow::Owned(cluster.placeholder(*root, shard)),
                _ => {}
            }
        }
        match &step.action {
            Action::Statement(sql) => Cow::Borrowed(sql),
            Action::Capture(root) => Cow::Borrowed(&self.roots[*root].capture_sql),
            Action::SettleInserts => self
                .cluster
                .as_ref()
                .map_or(Cow::Borrowed(RUNNING_INSERTS_SQL), |cluster| {
                    Cow::Owned(cluster.running_inserts_sql())
                }),
            Action::ResetConsumerGroup(index) => {
                let fresh = &self.fresh_groups[*index];
                Cow::Owned(format!(
                    "-- Kafka: delete consumer group '{}' of source '{}', so its new landing starts from the earliest retained message",
                    fresh.group, fresh.source
                ))
            }
            Action::Replay(root) => Cow::Owned(self.roots[*root].placeholder()),
            Action::Seed(root) => {
                let root = &self.roots[*root];
                Cow::Owned(
                    root.seed
                        .as_ref()
                        .map(|seed| seed.placeholder(&root.model))
                        .unwrap_or_default(),
                )
            }
            Action::Watermark(index) => {
                let watermark = &self.watermarks[*index];
                Cow::Owned(watermark.placeholder(&self.roots[watermark.root].model))
            }
        }
    }
}

/// How a build makes sure the inserts that began before its new views existed have
/// finished before it captures a boundary: such an insert does not feed the new views, so
/// its rows must be visible to the capture to be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stabilization {
    /// Wait for exactly those inserts: every insert running once the views exist, by query
    /// id (bounded; a warning names any that outlive the bound). Sound when every writer
    /// of the driving inputs is a query the warehouse lists in `system.processes`.
    Evidence,
    /// A server-side wait of this many seconds: asked for, or something may feed the
    /// inputs that the warehouse does not list as queries (a Kafka or Buffer table, a
    /// refreshable view, async inserts that do not wait for their flush).
    Timed(u32),
}

/// How the workflow is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowOptions {
    pub database: String,
    pub stabilization: Stabilization,
    pub start_time: Option<StartTime>,
    /// Sources whose Kafka table is recreated because its settings drifted.
    pub recreate_sources: Vec<String>,
    /// Seeded deployments: per root model, the active copy its rows before the start
    /// come from (with `start_time` only).
    pub seeds: BTreeMap<String, SeedSource>,
    /// Roots whose replay starts somewhere of their own (a virtual deployment's
    /// `replay_on_change`), instead of at `start_time`.
    pub root_start_times: BTreeMap<String, StartTime>,
    /// `[build] replay_chunk_rows` and the replays' throttles.
    pub pacing: stb_model::planning::ReplayPacing,
}

/// Where a seeded root's history comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSource {
    /// The active copy (unqualified).
    pub table: String,
    /// The columns the new copy shares with it, in the new copy's order.
    pub columns: Vec<String>,
}

fn qualified(database: &str, relation: &str) -> String {
    stb_ddl::QualifiedName::new(database, relation).to_string()
}

/// Assembles the direct workflow of `plan`; `present` says whether a relation exists in
/// the target database now.
///
/// # Errors
/// A replay root whose driving input lacks the columns its boundary mode needs.
pub fn assemble(
    plan: &DirectPlan,
    models: &[PlanModel],
    sources: &[PlanSource],
    options: &WorkflowOptions,
    present: &dyn Fn(&str) -> bool,
) -> Result<Workflow, PlanError> {
    let by_name = crate::work::ModelIndex::new(models);
    let database = &options.database;
    let mut steps = vec![Step::statement(
        "prepare_target_database".into(),
        Phase::Preparation,
        format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            stb_ddl::identifier(database)
        ),
    )];
    let landings = relevant_landings(plan, &by_name, sources);
    let mut fresh_groups = Vec::new();
    let paused_landings =
        prepare_landings(&landings, options, present, &mut steps, &mut fresh_groups);
    let mut undo = crate::restore::Undo {
        database: database.clone(),
        ..crate::restore::Undo::default()
    };
    undo.dropped.extend(
        paused_landings
            .iter()
            .filter_map(|l| landings.iter().find(|(source, _)| *source == l.source))
            .map(|(_, landing)| landing.view.clone())
            .filter(|view| present(view)),
    );
    for (kind, relation) in &plan.teardown {
        if *kind == RelationKind::Table && present(relation) {
            // Its rows stay, under another name, until the build has completed. (Its
            // views are dropped before: they would write into the new table by name.)
            let aside = crate::restore::aside_name(relation);
            steps.push(Step::statement(
                format!("set_aside_{relation}"),
                Phase::Teardown,
                format!(
                    "RENAME TABLE {} TO {}",
                    qualified(database, relation),
                    qualified(database, &aside)
                ),
            ));
            undo.set_aside.push((relation.clone(), aside));
            continue;
        }
        if present(relation) {
            undo.dropped.push(relation.clone());
        }
        // DROP TABLE drops views too, so a model that changed kind is still torn down.
        steps.push(Step::statement(
            format!("drop_{relation}"),
            Phase::Teardown,
            format!(
                "DROP TABLE IF EXISTS {} SYNC",
                qualified(database, relation)
            ),
        ));
    }
    let statements: BTreeMap<(RelationKind, &str), &String> = plan
        .entries
        .iter()
        .filter_map(|entry| by_name.get(entry.model.as_str()))
        .flat_map(|model| {
            model
                .relations
                .iter()
                .zip(&model.create_statements)
                .map(|((kind, relation), sql)| ((*kind, relation.as_str()), sql))
        })
        .collect();
    // A fan-in's view waits for its stage (below).
    // Each deferred relation with the stage it waits for.
    let deferred: BTreeMap<&str, usize> = plan
        .replay_roots
        .iter()
        .filter(|root| root.stage > 0)
        .filter_map(|root| by_name.get(root.model.as_str()).map(|m| (root.stage, m)))
        .flat_map(|(stage, m)| m.relations.iter().map(move |(_, r)| (r.as_str(), stage)))
        .collect();
    for (kind, relation) in &plan.creation {
        if *kind == RelationKind::MaterializedView && deferred.contains_key(relation.as_str()) {
            continue;
        }
        if let Some(statement) = statements.get(&(*kind, relation.as_str())) {
            steps.push(Step::statement(
                format!("realize_{relation}"),
                Phase::Realization,
                (*statement).clone(),
            ));
        }
    }
    let paused: Vec<&str> = paused_landings.iter().map(|l| l.source.as_str()).collect();
    let scope: BTreeSet<&str> = plan.entries.iter().map(|e| e.model.as_str()).collect();
    let roots = plan
        .replay_roots
        .iter()
        .map(|root| {
            let rebuilt_input = scope.contains(&root.driving_input.as_str());
            let frozen = rebuilt_input && fed_only_by(&root.driving_input, &by_name, &paused);
            root_replay(root, &by_name, sources, options, rebuilt_input, frozen)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let frozen_references: Vec<&str> = paused_landings
        .iter()
        .filter_map(|l| sources.iter().find(|s| s.name == l.source))
        .filter_map(|s| s.reference.as_deref())
        .collect();
    let last_stage = roots.iter().map(|r| r.stage).max().unwrap_or(0);
    // Each stage's roots and deferred views, in their orders, from one pass over each.
    let mut roots_in: Vec<Vec<usize>> = vec![Vec::new(); last_stage + 1];
    for (index, root) in roots.iter().enumerate() {
        roots_in[root.stage].push(index);
    }
    let mut views_in: Vec<Vec<&str>> = vec![Vec::new(); last_stage + 1];
    for (kind, relation) in &plan.creation {
        if *kind == RelationKind::MaterializedView
            && let Some(&stage) = deferred.get(relation.as_str())
            && stage <= last_stage
        {
            views_in[stage].push(relation.as_str());
        }
    }
    for (stage, in_stage) in roots_in.iter().enumerate() {
        for relation in &views_in[stage] {
            if let Some(statement) = statements.get(&(RelationKind::MaterializedView, *relation)) {
                steps.push(Step::statement(
                    format!("realize_{relation}"),
                    Phase::Realization,
                    (*statement).clone(),
                ));
            }
        }
        boundaries_and_replays(
            &roots,
            in_stage,
            stage,
            &frozen_references,
            options,
            &mut steps,
        );
    }
    for landing in &paused_landings {
        steps.push(Step::statement(
            landing.activate_step.clone(),
            Phase::Activation,
            landing.resume_sql.clone(),
        ));
    }
    for (relation, aside) in &undo.set_aside {
        steps.push(Step::statement(
            format!("drop_previous_{relation}"),
            Phase::Cleanup,
            format!("DROP TABLE IF EXISTS {} SYNC", qualified(database, aside)),
        ));
    }
    undo.created = created_relations(&steps, &landings);
    Ok(Workflow {
        database: database.clone(),
        steps,
        roots,
        start_time: options.start_time.clone(),
        paused_landings,
        fresh_groups,
        undo,
        watermarks: Vec::new(),
        completed_when: None,
        cluster: None,
    })
}

/// The relations the workflow's steps create, in order: every realized model relation,
/// a landing's tables when the build creates the landing, and the landing views it
/// starts. (A Kafka table recreated by a
/// settings repair is not among them: the landing recovery puts it back as declared.)
fn created_relations(steps: &[Step], landings: &[(&str, &Landing)]) -> Vec<String> {
    // The landing steps that create a relation, by id (one map, not a scan of the
    // landings for every step).
    let mut by_step: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for (source, landing) in landings {
        for (id, relation) in [
            (
                format!("prepare_source_kafka__{source}"),
                &landing.kafka_table,
            ),
            (format!("prepare_source_raw__{source}"), &landing.raw_table),
            // Resumed as it was, or created for a new landing: the undo tells them apart.
            (format!("activate_source_{}", landing.view), &landing.view),
        ] {
            by_step.entry(id).or_default().push(relation);
        }
    }
    let mut created = Vec::new();
    for step in steps {
        if let Some(relation) = step.id.strip_prefix("realize_") {
            created.push(relation.to_owned());
        }
        if let Some(relations) = by_step.get(&step.id) {
            created.extend(relations.iter().map(|r| (*r).clone()));
        }
    }
    created
}

/// A stage's waits, captures and replays. The wait lets inserts that began before the new
/// views existed finish before the boundary is taken. A paused landing receives no inserts
/// at all, so when every bounded root of the stage replays one, there is nothing to wait
/// for; anything else may be fed by writers or by streaming the warehouse does not list
/// as queries, so it keeps the timed wait. Later stages' step ids carry their stage.
fn boundaries_and_replays(
    roots: &[RootReplay],
    in_stage: &[usize],
    stage: usize,
    frozen_references: &[&str],
    options: &WorkflowOptions,
    steps: &mut Vec<Step>,
) {
    let suffix = if stage == 0 {
        String::new()
    } else {
        format!("_stage_{stage}")
    };
    let bounded: Vec<usize> = in_stage
        .iter()
        .copied()
        .filter(|i| roots[*i].bounded)
        .collect();
    let all_frozen = bounded
        .iter()
        .all(|i| frozen_references.contains(&roots[*i].template.anchor.relation.as_str()));
    if !all_frozen {
        match options.stabilization {
            Stabilization::Evidence => steps.push(Step::of(
                format!("wait_for_inserts_begun_before_views{suffix}"),
                Phase::Stabilization,
                Action::SettleInserts,
            )),
            Stabilization::Timed(0) => {}
            Stabilization::Timed(seconds) => steps.push(Step::statement(
                format!("wait_for_live_stabilization{suffix}"),
                Phase::Stabilization,
                sleep_sql(seconds),
            )),
        }
    }
    for &index in &bounded {
        steps.push(Step::of(
            format!("capture_replay_{}", roots[index].model),
            Phase::Boundary,
            Action::Capture(index),
        ));
    }
    if bounded
        .iter()
        .any(|i| roots[*i].template.skip_existing.is_some())
    {
        steps.push(Step::of(
            format!("wait_for_inflight_inserts{suffix}"),
            Phase::Boundary,
            Action::SettleInserts,
        ));
    }
    for &index in in_stage {
        if roots[index].seed.is_some() {
            steps.push(Step::of(
                format!("seed_{}", roots[index].model),
                Phase::Replay,
                Action::Seed(index),
            ));
        }
        steps.push(Step::of(
            format!("replay_{}", roots[index].model),
            Phase::Replay,
            Action::Replay(index),
        ));
    }
}

/// True when `input` is fed, through its chain of driving inputs, by one of the `paused`
/// landings: nothing reaches it until they resume.
fn fed_only_by(input: &str, by_name: &crate::work::ModelIndex<'_>, paused: &[&str]) -> bool {
    let mut current = input;
    for _ in 0..=by_name.len() {
        match by_name.get(current) {
            Some(model) => match model.driving_input.as_deref() {
                Some(parent) => current = parent,
                None => return false,
            },
            None => return paused.contains(&current),
        }
    }
    false
}

/// A server-side wait, part of the recorded workflow; one second per row keeps it under
/// ClickHouse's per-block sleep limit.
fn sleep_sql(seconds: u32) -> String {
    format!(
        "SELECT sleepEachRow(1) FROM numbers({seconds}) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = {}",
        u64::from(seconds) * 1_000_000
    )
}

/// Settings repair: the Kafka table is dropped and created as declared; the landing table
/// and its rows stay, and the consumer group resumes from its committed offsets. It runs
/// while the landing view is paused, so nothing reads the Kafka table meanwhile; a build
/// that stops in between gets the declared table back from the landing recovery. (The
/// reference exchanges a staged table into place; the local stack's embedded engine loses
/// both Kafka tables on `EXCHANGE`, and the pause already gives the repair its safety.)
fn recreate_kafka_table(source: &str, landing: &Landing, database: &str, steps: &mut Vec<Step>) {
    steps.push(Step::statement(
        format!("drop_source_kafka__{source}"),
        Phase::Preparation,
        format!(
            "DROP TABLE IF EXISTS {} SYNC",
            qualified(database, &landing.kafka_table)
        ),
    ));
    let mut create = Step::statement(
        format!("recreate_source_kafka__{source}"),
        Phase::Preparation,
        landing.create_kafka.clone(),
    );
    create.recorded = Some(landing.create_kafka_recorded.clone());
    steps.push(create);
}

/// Managed sources whose landing feeds the scope: read by a rebuilt model.
#[must_use]
pub fn landings_read<'s>(
    plan: &DirectPlan,
    models: &[PlanModel],
    sources: &'s [PlanSource],
) -> Vec<&'s PlanSource> {
    let by_name = crate::work::ModelIndex::new(models);
    relevant_landings(plan, &by_name, sources)
        .into_iter()
        .filter_map(|(name, _)| sources.iter().find(|s| s.name == name))
        .collect()
}

fn relevant_landings<'s>(
    plan: &DirectPlan,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &'s [PlanSource],
) -> Vec<(&'s str, &'s Landing)> {
    // What the scope reads, collected once (not a scan of the scope per source).
    let read: BTreeSet<&str> = plan
        .entries
        .iter()
        .filter_map(|entry| by_name.get(entry.model.as_str()))
        .flat_map(|m| m.reads.iter().map(String::as_str))
        .collect();
    sources
        .iter()
        .filter(|source| read.contains(source.name.as_str()))
        .filter_map(|source| source.landing.as_ref().map(|l| (source.name.as_str(), l)))
        .collect()
}

/// Creates missing landings (without their view), then pauses every landing view: from here on the landing tables are frozen, so history is replayed
/// once and everything later flows through the new views once.
fn prepare_landings(
    landings: &[(&str, &Landing)],
    options: &WorkflowOptions,
    present: &dyn Fn(&str) -> bool,
    steps: &mut Vec<Step>,
    fresh_groups: &mut Vec<FreshGroup>,
) -> Vec<PausedLanding> {
    for (source, landing) in landings {
        if present(&landing.raw_table) {
            continue;
        }
        steps.push(Step::of(
            format!("reset_consumer_group__{source}"),
            Phase::Preparation,
            Action::ResetConsumerGroup(fresh_groups.len()),
        ));
        fresh_groups.push(FreshGroup {
            source: (*source).to_owned(),
            group: landing.consumer_group.clone(),
            brokers: landing.brokers.clone(),
            settings: landing.settings.clone(),
        });
        let mut kafka = Step::statement(
            format!("prepare_source_kafka__{source}"),
            Phase::Preparation,
            landing.create_kafka.clone(),
        );
        kafka.recorded = Some(landing.create_kafka_recorded.clone());
        steps.push(kafka);
        steps.push(Step::statement(
            format!("prepare_source_raw__{source}"),
            Phase::Preparation,
            landing.create_raw.clone(),
        ));
    }
    // A new landing's view is not created here (the reference creates it and waits 5 s
    // for retained messages to land): it starts with the other landings at activation,
    // and everything it lands then flows through the new views, once.
    landings
        .iter()
        .map(|(source, landing)| {
            let pause_step = format!("pause_source_{}", landing.view);
            steps.push(Step::statement(
                pause_step.clone(),
                Phase::Preparation,
                format!(
                    "DROP TABLE IF EXISTS {} SYNC",
                    qualified(&options.database, &landing.view)
                ),
            ));
            if options.recreate_sources.iter().any(|s| s == source) {
                recreate_kafka_table(source, landing, &options.database, steps);
            } else if present(&landing.raw_table) && !present(&landing.kafka_table) {
                // The landing table is there and its Kafka table is not: create just that
                // (a missing landing view is created at activation like any paused one).
                let mut create = Step::statement(
                    format!("restore_source_kafka__{source}"),
                    Phase::Preparation,
                    landing.create_kafka.clone(),
                );
                create.recorded = Some(landing.create_kafka_recorded.clone());
                steps.push(create);
            }
            PausedLanding {
                source: (*source).to_owned(),
                pause_step,
                activate_step: format!("activate_source_{}", landing.view),
                resume_sql: landing.create_view.clone(),
                kafka_sql: landing.create_kafka.clone(),
                kafka_recorded: landing.create_kafka_recorded.clone(),
            }
        })
        .collect()
}

/// A root's replay. `rebuilt_input`: its driving input is rebuilt by an earlier stage (a
/// fan-in), so it already holds only the build's window; `frozen`: nothing feeds that
/// input until activation, so the replay reads all of it.
fn root_replay(
    root: &crate::direct::ReplayRoot,
    by_name: &crate::work::ModelIndex<'_>,
    sources: &[PlanSource],
    options: &WorkflowOptions,
    rebuilt_input: bool,
    frozen: bool,
) -> Result<RootReplay, PlanError> {
    let start_time = if rebuilt_input {
        None
    } else {
        options
            .root_start_times
            .get(&root.model)
            .or(options.start_time.as_ref())
            .cloned()
    };
    let model = by_name.get(root.model.as_str()).ok_or_else(|| PlanError {
        message: format!("replay root '{}' is not a compiled model", root.model),
        hint: "recompile the project",
    })?;
    let mode = model
        .boundary_mode
        .as_deref()
        .and_then(BoundaryMode::parse)
        .ok_or_else(|| PlanError {
            message: format!(
                "'{}' has no replay boundary mode: its pipeline reads no source with replay_boundary",
                root.model
            ),
            hint: "give the pipeline's source a replay_boundary mode",
        })?;
    let (reference, columns) = match by_name.get(root.driving_input.as_str()) {
        Some(input) => (
            input.reference.clone(),
            input
                .output_columns
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| name.starts_with("_replay_"))
                .collect::<Vec<_>>(),
        ),
        None => {
            let source = sources
                .iter()
                .find(|s| s.name == root.driving_input)
                .ok_or_else(|| PlanError {
                    message: format!(
                        "'{}' reads unknown input '{}'",
                        root.model, root.driving_input
                    ),
                    hint: "recompile the project",
                })?;
            (
                source.reference.clone().unwrap_or_default(),
                source.replay_columns.clone(),
            )
        }
    };
    let time_column = if frozen {
        None
    } else {
        required_columns(mode, &columns, start_time.is_some()).map_err(|missing| {
            if rebuilt_input {
                PlanError {
                    message: format!(
                        "'{}' joins {}, rebuilt in this build, so it replays from '{}' once that is complete; '{}' is fed live by a source the build does not pause, so the replay needs a {} boundary on it, and it has no column {missing}",
                        root.model,
                        root.waits_for.join(", "),
                        root.driving_input,
                        root.driving_input,
                        mode.as_str()
                    ),
                    hint: "keep the lineage columns (_replay_*) in the driving input's output",
                }
            } else {
                PlanError {
                    message: format!(
                        "replay root '{}' reads '{}', which has no column {missing}: a {} replay{} needs it",
                        root.model,
                        root.driving_input,
                        mode.as_str(),
                        if start_time.is_some() { " with --start-time" } else { "" }
                    ),
                    hint: "select the upstream model too (--select <upstream>) so the replay starts where the lineage columns exist",
                }
            }
        })?
    };
    if model.replay_query.len() < 2 {
        return Err(PlanError {
            message: format!(
                "replay root '{}' does not reference its driving input '{}' where a replay can bound it",
                root.model, root.driving_input
            ),
            hint: "reference the driving input with __source(...) or __ref(...) in FROM",
        });
    }
    let anchor = Anchor {
        relation: reference,
        mode,
        time_column,
        local: None,
    };
    let skip_existing = if frozen {
        // Nothing reaches the fan-in's new view before its replay ends.
        None
    } else {
        existing_keys(
            mode,
            model.aggregate,
            &model
                .output_columns
                .iter()
                .map(|(name, _)| name.clone())
                .collect::<Vec<_>>(),
        )
    };
    let seed = match (options.seeds.get(&root.model), &start_time) {
        (Some(source), Some(start)) if !frozen => Some(Seed {
            source: qualified(&options.database, &source.table),
            target: model.reference.clone(),
            columns: source.columns.clone(),
            mode,
            start: start.clone(),
            skip_existing: existing_keys(mode, model.aggregate, &source.columns),
        }),
        _ => None,
    };
    // A model's own replay settings win over the project's throttles.
    let mut settings = model.replay_settings.clone();
    for (name, value) in options.pacing.settings() {
        if !settings
            .iter()
            .any(|(set, _)| set.eq_ignore_ascii_case(&name))
        {
            settings.push((name, value));
        }
    }
    let chunk_rows = options
        .pacing
        .chunk_rows
        .filter(|_| !frozen && crate::replay::chunks::chunkable(model.aggregate, &model.engine()));
    Ok(RootReplay {
        chunk_rows,
        seed,
        model: root.model.clone(),
        driving_input: root.driving_input.clone(),
        propagated: root.propagated.clone(),
        capture_sql: capture_sql(&anchor, start_time.as_ref()),
        template: ReplayTemplate {
            target: model.reference.clone(),
            query_parts: model.replay_query.clone(),
            anchor,
            settings,
            skip_existing,
        },
        stage: root.stage,
        waits_for: root.waits_for.clone(),
        bounded: !frozen,
        start_time,
        rebuilt_input,
    })
}

/// Every step of a workflow as `plan.json` lists it (and `GET /api/plan?statements=true`
/// answers it): `intent`, `phase`, `sequence`, `sql` (as recorded: secrets stay
/// placeholders), `step_id`, `template`.
pub struct StepsJson<'a>(pub &'a Workflow);

impl serde::Serialize for StepsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let workflow = self.0;
        serializer.collect_seq(
            workflow
                .steps
                .iter()
                .enumerate()
                .map(|(index, step)| StepJson::of(workflow, step, index + 1)),
        )
    }
}

/// One step as [`StepsJson`] lists it. Fields in sorted order, as a JSON value's map
/// writes them; `shard` only on a cluster's per-shard steps.
#[derive(serde::Serialize)]
pub struct StepJson<'s> {
    intent: &'static str,
    phase: &'static str,
    sequence: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<u32>,
    sql: std::borrow::Cow<'s, str>,
    step_id: &'s str,
    template: bool,
}

impl<'s> StepJson<'s> {
    /// `step` of `workflow`, numbered `sequence` (from 1).
    #[must_use]
    pub fn of(workflow: &'s Workflow, step: &'s Step, sequence: usize) -> Self {
        Self {
            intent: step.intent(),
            phase: step.phase.as_str(),
            sequence,
            shard: step.shard,
            sql: workflow.recorded_sql(step),
            step_id: &step.id,
            template: is_template(&step.action),
        }
    }
}

/// A statement a plan can only show as a template: its boundary is captured at run time.
#[must_use]
pub fn is_template(action: &Action) -> bool {
    matches!(
        action,
        Action::Replay(_) | Action::Seed(_) | Action::Watermark(_)
    )
}

#[cfg(test)]
mod tests;
