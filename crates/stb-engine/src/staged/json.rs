//! A virtual plan as JSON (the reference's `virtual environments` shape, with our
//! additions: each object's model, root state and active deployment): `stb plan --json`,
//! `target/run/plan/plan.json` and the dev server's `/api/plan` all print this document.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use stb_plan::virtual_plan::{ChangeType, ExecutionMode};

use super::Planned;

type Text<'a> = Cow<'a, str>;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyJson<'a> {
    pub database: Text<'a>,
    pub name: Text<'a>,
    pub object_type: Text<'a>,
}

/// One object change. Members (here and below) in alphabetical order: the order the JSON
/// had when it was a `serde_json::Value`, whose maps sort their keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectChangeJson<'a> {
    pub active_deployment_id: Option<Text<'a>>,
    /// `create`, `rebuild` or `no_op`.
    pub change_type: Text<'a>,
    pub force_full_refresh: bool,
    pub forced_start_time: Option<Text<'a>>,
    pub key: KeyJson<'a>,
    pub model: Text<'a>,
    pub root_state: Text<'a>,
    pub schema_change_kind: Option<stb_plan::virtual_plan::SchemaChange>,
    pub seed_compatibility: Option<stb_plan::virtual_plan::Seeding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubtreeJson<'a> {
    pub affected_keys: Cow<'a, [String]>,
    pub configured_backfill_mode: Option<Text<'a>>,
    pub execution_lookback_seconds: Option<u64>,
    /// `full_rebuild`, `seeded_bounded_rebuild`, `unseeded_bounded_rebuild` or `deploy`.
    pub execution_mode: Text<'a>,
    pub execution_start_time: Option<String>,
    pub forced_full_refresh: bool,
    pub forced_start_time: Option<Text<'a>>,
    pub history_preserving_bounded_supported: bool,
    pub replay_required: bool,
    pub resolved_bounded_replay_fallback: Option<Text<'a>>,
    pub root_key: Text<'a>,
    pub strategy: Text<'a>,
    pub upstream_boundary_key: Option<Text<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowObjectJson<'a> {
    pub logical_key: Text<'a>,
    pub logical_model_name: Text<'a>,
    pub object_type: Text<'a>,
    pub physical_name: Text<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlDiffJson<'a> {
    pub diff_lines: Cow<'a, [String]>,
    pub key: KeyJson<'a>,
    pub name: Text<'a>,
    pub object_type: Text<'a>,
}

/// The members of a virtual plan's JSON up to `sql_diffs`: `plan.json` puts `step_files`
/// after them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadJson<'a> {
    pub adapter: Text<'a>,
    pub database: Text<'a>,
    pub deployment_created_at: String,
    pub deployment_id: Text<'a>,
    /// `virtual environments`.
    pub mode: Text<'a>,
    pub object_changes: Vec<ObjectChangeJson<'a>>,
    /// A plan on its own carries it; a mixed plan's virtual part does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_hash: Option<String>,
    pub prepared_shadow_objects: Vec<ShadowObjectJson<'a>>,
    pub rebuild_subtrees: Vec<SubtreeJson<'a>>,
    /// What the deployment's replays read together, against the target's budget (from
    /// its build's plan; [`VirtualJson::with_replay_cost`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_cost: Option<serde_json::Value>,
    /// What each of its replay roots reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_costs: Option<serde_json::Value>,
    pub sql_diffs: Vec<SqlDiffJson<'a>>,
}

/// The members after `step_files`; `plan.json` puts `workflow_steps` after them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailJson<'a> {
    /// The step names a build of each subtree would run, subtree by subtree.
    pub steps: Vec<String>,
    pub warnings: Cow<'a, [String]>,
}

/// A virtual plan as `stb plan --json` prints it: typed, borrowed when written (at 10,000
/// models a JSON value tree of it, and its copy, were a third of the plan's peak memory)
/// and owned when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualJson<'a> {
    #[serde(flatten)]
    pub head: HeadJson<'a>,
    #[serde(flatten)]
    pub tail: TailJson<'a>,
}

impl VirtualJson<'_> {
    /// Adds the plan's hash (a plan on its own carries it; a mixed plan's part does not).
    pub fn with_plan_hash(mut self, hash: String) -> Self {
        self.head.plan_hash = Some(hash);
        self
    }

    /// Adds what the deployment's replays read, from `build` (its build's plan).
    #[must_use]
    pub fn with_replay_cost(mut self, build: &crate::direct::Planned) -> Self {
        self.head.replay_cost = serde_json::to_value(build.cost_summary()).ok();
        self.head.replay_costs = serde_json::to_value(&build.replay_costs).ok();
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

/// `text`, borrowed.
fn b(text: &str) -> Text<'_> {
    Cow::Borrowed(text)
}

/// The plan as JSON.
#[must_use]
pub fn json(planned: &Planned) -> VirtualJson<'_> {
    let plan = &planned.plan;
    let database = planned.database.as_str();
    let key = |name, object_type| KeyJson {
        database: b(database),
        name: b(name),
        object_type: b(object_type),
    };
    let object_changes = plan
        .object_changes
        .iter()
        .map(|c| ObjectChangeJson {
            active_deployment_id: c.active_deployment_id.as_deref().map(b),
            change_type: b(change_label(c.change_type)),
            force_full_refresh: c.force_full_refresh,
            forced_start_time: c.forced_start_time.as_deref().map(b),
            key: key(&c.name, c.object_type),
            model: b(&c.model),
            root_state: b(c.root_state.as_str()),
            schema_change_kind: c.schema_change_kind,
            seed_compatibility: c.seed_compatibility,
        })
        .collect();
    let rebuild_subtrees = plan
        .rebuild_subtrees
        .iter()
        .map(|s| SubtreeJson {
            affected_keys: Cow::Borrowed(&s.affected),
            configured_backfill_mode: s.configured_backfill_mode.as_deref().map(b),
            execution_lookback_seconds: s.execution_lookback_seconds,
            execution_mode: b(mode_label(s.execution_mode)),
            execution_start_time: planned
                .root_starts
                .get(&s.root)
                .map(ToString::to_string)
                .or_else(|| s.forced_start_time.clone()),
            forced_full_refresh: s.forced_full_refresh,
            forced_start_time: s.forced_start_time.as_deref().map(b),
            history_preserving_bounded_supported: s.history_preserving_bounded_supported,
            replay_required: s.replay_required,
            resolved_bounded_replay_fallback: s.resolved_bounded_replay_fallback.as_deref().map(b),
            root_key: b(&s.root),
            strategy: b(s.strategy),
            upstream_boundary_key: s.upstream_boundary_key.as_deref().map(b),
        })
        .collect();
    let prepared_shadow_objects = planned
        .shadow_objects
        .iter()
        .map(|o| ShadowObjectJson {
            logical_key: b(&o.logical_key),
            logical_model_name: b(&o.logical_model_name),
            object_type: b(o.object_type),
            physical_name: b(&o.physical_name),
        })
        .collect();
    let sql_diffs = plan
        .sql_diffs
        .iter()
        .map(|d| SqlDiffJson {
            diff_lines: Cow::Borrowed(&d.diff_lines),
            key: key(&d.key, d.object_type),
            name: b(&d.name),
            object_type: b(d.object_type),
        })
        .collect();
    VirtualJson {
        head: HeadJson {
            adapter: b("clickhouse"),
            database: b(database),
            deployment_created_at: planned.deployment.created_at(),
            deployment_id: b(planned.deployment.as_str()),
            mode: b("virtual environments"),
            object_changes,
            plan_hash: None,
            prepared_shadow_objects,
            rebuild_subtrees,
            replay_cost: None,
            replay_costs: None,
            sql_diffs,
        },
        tail: TailJson {
            steps: steps(planned).into_iter().flatten().collect(),
            warnings: Cow::Borrowed(&planned.warnings),
        },
    }
}
