//! A virtual plan as JSON (the reference's `virtual environments` shape, with our
//! additions: each object's model, root state and active deployment): `stb plan --json`,
//! `target/run/plan/plan.json` and the dev server's `/api/plan` all print this document.

use serde::Serialize;
use stb_plan::virtual_plan::{ChangeType, ExecutionMode};

use super::Planned;

/// The step names a build of each subtree would run, subtree by subtree, in order: its
/// objects' preparations, then its backfill, audit and publish.
pub fn steps(planned: &Planned) -> Vec<Vec<String>> {
    let subtrees = &planned.plan.rebuild_subtrees;
    // Which subtrees each model is in, found once: a scan of every object per subtree
    // was subtrees times objects (a hundred times twenty thousand at 10,000 models).
    let mut subtrees_of: std::collections::HashMap<&str, Vec<usize>> =
        std::collections::HashMap::new();
    for (at, subtree) in subtrees.iter().enumerate() {
        for model in &subtree.affected {
            subtrees_of.entry(model.as_str()).or_default().push(at);
        }
    }
    let mut steps: Vec<Vec<String>> = vec![Vec::new(); subtrees.len()];
    for object in &planned.shadow_objects {
        for &at in subtrees_of
            .get(object.logical_model_name.as_str())
            .into_iter()
            .flatten()
        {
            steps[at].push(format!(
                "plan-{}-{}-{}",
                at + 1,
                object.object_type,
                object.logical_key
            ));
        }
    }
    for (at, subtree) in subtrees.iter().enumerate() {
        for step in ["backfill", "audit", "publish"] {
            steps[at].push(format!("{step}-{}-{}", at + 1, subtree.root));
        }
    }
    steps
}

pub fn change_label(change: ChangeType) -> &'static str {
    match change {
        ChangeType::Create => "create",
        ChangeType::Rebuild => "rebuild",
        ChangeType::NoOp => "no_op",
    }
}

pub fn mode_label(mode: ExecutionMode) -> &'static str {
    match mode {
        ExecutionMode::FullRebuild => "full_rebuild",
        ExecutionMode::SeededBoundedRebuild => "seeded_bounded_rebuild",
        ExecutionMode::UnseededBoundedRebuild => "unseeded_bounded_rebuild",
        ExecutionMode::Deploy => "deploy",
    }
}

/// A database object as the reference's JSON names it.
#[derive(Serialize)]
struct KeyJson<'a> {
    database: &'a str,
    name: &'a str,
    object_type: &'a str,
}

/// One object change. Fields (here and below) in alphabetical order: the order the JSON
/// had when it was a `serde_json::Value`, whose maps sort their keys.
#[derive(Serialize)]
struct ObjectChangeJson<'a> {
    active_deployment_id: Option<&'a str>,
    change_type: &'static str,
    force_full_refresh: bool,
    forced_start_time: Option<&'a str>,
    key: KeyJson<'a>,
    model: &'a str,
    root_state: &'a str,
    schema_change_kind: Option<stb_plan::virtual_plan::SchemaChange>,
    seed_compatibility: Option<stb_plan::virtual_plan::Seeding>,
}

#[derive(Serialize)]
struct SubtreeJson<'a> {
    affected_keys: &'a [String],
    configured_backfill_mode: Option<&'a str>,
    execution_lookback_seconds: Option<u64>,
    execution_mode: &'static str,
    execution_start_time: Option<String>,
    forced_full_refresh: bool,
    forced_start_time: Option<&'a str>,
    history_preserving_bounded_supported: bool,
    replay_required: bool,
    resolved_bounded_replay_fallback: Option<&'a str>,
    root_key: &'a str,
    strategy: &'a str,
    upstream_boundary_key: Option<&'a str>,
}

#[derive(Serialize)]
struct ShadowObjectJson<'a> {
    logical_key: &'a str,
    logical_model_name: &'a str,
    object_type: &'a str,
    physical_name: &'a str,
}

#[derive(Serialize)]
struct SqlDiffJson<'a> {
    diff_lines: &'a [String],
    key: KeyJson<'a>,
    name: &'a str,
    object_type: &'a str,
}

/// The members of a virtual plan's JSON up to `sql_diffs`: `plan.json` puts `step_files`
/// after them.
#[derive(Serialize)]
struct HeadJson<'a> {
    adapter: &'static str,
    database: &'a str,
    deployment_created_at: String,
    deployment_id: &'a str,
    mode: &'static str,
    object_changes: Vec<ObjectChangeJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan_hash: Option<String>,
    prepared_shadow_objects: Vec<ShadowObjectJson<'a>>,
    rebuild_subtrees: Vec<SubtreeJson<'a>>,
    sql_diffs: Vec<SqlDiffJson<'a>>,
}

/// The members after `step_files`; `plan.json` puts `workflow_steps` after them.
#[derive(Serialize)]
struct TailJson<'a> {
    steps: Vec<String>,
    warnings: &'a [String],
}

/// A virtual plan as `stb plan --json` prints it: typed and borrowed, serialised as it is
/// written (at 10,000 models a JSON value tree of it, and its copy, were a third of the
/// plan's peak memory).
pub struct VirtualJson<'a> {
    head: HeadJson<'a>,
    tail: TailJson<'a>,
}

impl VirtualJson<'_> {
    /// Adds the plan's hash (a plan on its own carries it; a mixed plan's part does not).
    pub fn with_plan_hash(mut self, hash: String) -> Self {
        self.head.plan_hash = Some(hash);
        self
    }

    /// The document with the workflow's steps added, as `plan.json` holds it: `steps`
    /// serialises the workflow's steps, `step_files` says whether each has its own file.
    pub fn with_workflow<'d, S: Serialize + 'd>(
        &'d self,
        steps: S,
        step_files: bool,
    ) -> impl Serialize + 'd {
        Document {
            head: &self.head,
            step_files: Some(step_files),
            tail: &self.tail,
            workflow_steps: Some(steps),
        }
    }
}

impl serde::Serialize for VirtualJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Document::<()> {
            head: &self.head,
            step_files: None,
            tail: &self.tail,
            workflow_steps: None,
        }
        .serialize(serializer)
    }
}

/// The members in key order, with the workflow's members where `plan.json` has them.
#[derive(Serialize)]
struct Document<'d, S> {
    #[serde(flatten)]
    head: &'d HeadJson<'d>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_files: Option<bool>,
    #[serde(flatten)]
    tail: &'d TailJson<'d>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_steps: Option<S>,
}

/// The plan as JSON.
#[must_use]
pub fn json(planned: &Planned) -> VirtualJson<'_> {
    let plan = &planned.plan;
    let database = planned.database.as_str();
    let object_changes = plan
        .object_changes
        .iter()
        .map(|c| ObjectChangeJson {
            active_deployment_id: c.active_deployment_id.as_deref(),
            change_type: change_label(c.change_type),
            force_full_refresh: c.force_full_refresh,
            forced_start_time: c.forced_start_time.as_deref(),
            key: KeyJson {
                database,
                name: &c.name,
                object_type: c.object_type,
            },
            model: &c.model,
            root_state: c.root_state.as_str(),
            schema_change_kind: c.schema_change_kind,
            seed_compatibility: c.seed_compatibility,
        })
        .collect();
    let rebuild_subtrees = plan
        .rebuild_subtrees
        .iter()
        .map(|s| SubtreeJson {
            affected_keys: &s.affected,
            configured_backfill_mode: s.configured_backfill_mode.as_deref(),
            execution_lookback_seconds: s.execution_lookback_seconds,
            execution_mode: mode_label(s.execution_mode),
            execution_start_time: planned
                .root_starts
                .get(&s.root)
                .map(ToString::to_string)
                .or_else(|| s.forced_start_time.clone()),
            forced_full_refresh: s.forced_full_refresh,
            forced_start_time: s.forced_start_time.as_deref(),
            history_preserving_bounded_supported: s.history_preserving_bounded_supported,
            replay_required: s.replay_required,
            resolved_bounded_replay_fallback: s.resolved_bounded_replay_fallback.as_deref(),
            root_key: &s.root,
            strategy: s.strategy,
            upstream_boundary_key: s.upstream_boundary_key.as_deref(),
        })
        .collect();
    let prepared_shadow_objects = planned
        .shadow_objects
        .iter()
        .map(|o| ShadowObjectJson {
            logical_key: &o.logical_key,
            logical_model_name: &o.logical_model_name,
            object_type: o.object_type,
            physical_name: &o.physical_name,
        })
        .collect();
    let sql_diffs = plan
        .sql_diffs
        .iter()
        .map(|d| SqlDiffJson {
            diff_lines: &d.diff_lines,
            key: KeyJson {
                database,
                name: &d.key,
                object_type: d.object_type,
            },
            name: &d.name,
            object_type: d.object_type,
        })
        .collect();
    VirtualJson {
        head: HeadJson {
            adapter: "clickhouse",
            database,
            deployment_created_at: planned.deployment.created_at(),
            deployment_id: planned.deployment.as_str(),
            mode: "virtual environments",
            object_changes,
            plan_hash: None,
            prepared_shadow_objects,
            rebuild_subtrees,
            sql_diffs,
        },
        tail: TailJson {
            steps: steps(planned).into_iter().flatten().collect(),
            warnings: &planned.warnings,
        },
    }
}
