//! A virtual plan as text and as JSON (the reference's `virtual environments` shape, with
//! our additions: each object's model, root state and active deployment).

use std::fmt::Write as _;
use std::io::Write as _;

use stb_engine::staged::Planned;
use stb_plan::virtual_plan::{ChangeType, ExecutionMode};

/// The step names a build of each subtree would run, subtree by subtree, in order: its
/// objects' preparations, then its backfill, audit and publish.
fn steps(planned: &Planned) -> Vec<Vec<String>> {
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

fn change_label(change: ChangeType) -> &'static str {
    match change {
        ChangeType::Create => "create",
        ChangeType::Rebuild => "rebuild",
        ChangeType::NoOp => "no_op",
    }
}

fn mode_label(mode: ExecutionMode) -> &'static str {
    match mode {
        ExecutionMode::FullRebuild => "full_rebuild",
        ExecutionMode::SeededBoundedRebuild => "seeded_bounded_rebuild",
        ExecutionMode::UnseededBoundedRebuild => "unseeded_bounded_rebuild",
        ExecutionMode::Deploy => "deploy",
    }
}

/// A database object as the reference's JSON names it.
#[derive(serde::Serialize)]
struct KeyJson<'a> {
    database: &'a str,
    name: &'a str,
    object_type: &'a str,
}

/// One object change. Fields (here and below) in alphabetical order: the order the JSON
/// had when it was a `serde_json::Value`, whose maps sort their keys.
#[derive(serde::Serialize)]
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

#[derive(serde::Serialize)]
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

#[derive(serde::Serialize)]
struct ShadowObjectJson<'a> {
    logical_key: &'a str,
    logical_model_name: &'a str,
    object_type: &'a str,
    physical_name: &'a str,
}

#[derive(serde::Serialize)]
struct SqlDiffJson<'a> {
    diff_lines: &'a [String],
    key: KeyJson<'a>,
    name: &'a str,
    object_type: &'a str,
}

/// The members of a virtual plan's JSON up to `sql_diffs`: `plan.json` puts `step_files`
/// after them.
#[derive(serde::Serialize)]
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
#[derive(serde::Serialize)]
struct TailJson<'a> {
    steps: Vec<String>,
    warnings: &'a [String],
}

/// A virtual plan as `stb plan --json` prints it: typed and borrowed, serialised as it is
/// written (at 10,000 models a JSON value tree of it, and its copy, were a third of the
/// plan's peak memory).
pub(crate) struct VirtualJson<'a> {
    head: HeadJson<'a>,
    tail: TailJson<'a>,
}

impl VirtualJson<'_> {
    /// Adds the plan's hash (a plan on its own carries it; a mixed plan's part does not).
    pub(crate) fn with_plan_hash(mut self, hash: String) -> Self {
        self.head.plan_hash = Some(hash);
        self
    }

    /// The document with the workflow's steps added, as `plan.json` holds it.
    fn with_steps<'d>(
        &'d self,
        steps: crate::run_artifacts::StepsJson<'d>,
        step_files: bool,
    ) -> Document<'d> {
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
        Document {
            head: &self.head,
            step_files: None,
            tail: &self.tail,
            workflow_steps: None,
        }
        .serialize(serializer)
    }
}

impl crate::run_artifacts::PlanFile for VirtualJson<'_> {
    fn write(
        &self,
        out: &mut dyn std::io::Write,
        steps: crate::run_artifacts::StepsJson<'_>,
        step_files: bool,
    ) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.with_steps(steps, step_files))
    }
}

/// The members in key order, with the workflow's members where `plan.json` has them.
#[derive(serde::Serialize)]
struct Document<'d> {
    #[serde(flatten)]
    head: &'d HeadJson<'d>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_files: Option<bool>,
    #[serde(flatten)]
    tail: &'d TailJson<'d>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_steps: Option<crate::run_artifacts::StepsJson<'d>>,
}

/// The plan as JSON.
#[must_use]
pub(crate) fn json(planned: &Planned) -> VirtualJson<'_> {
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

/// The plan as text.
#[must_use]
pub(crate) fn text(planned: &Planned, verbose: bool) -> String {
    let plan = &planned.plan;
    let mut out = String::new();
    let _ = writeln!(out, "Plan Ready");
    let _ = writeln!(out, "Database: {}", planned.database);
    let _ = writeln!(out, "Deployment: {}", planned.deployment);
    if plan.rebuild_subtrees.is_empty() {
        let _ = writeln!(
            out,
            "\nNo changes: the active deployment matches the project."
        );
        return out;
    }
    let _ = writeln!(out, "Subtrees to rebuild: {}", plan.rebuild_subtrees.len());
    for subtree in &plan.rebuild_subtrees {
        let _ = writeln!(out);
        match (&subtree.upstream_boundary_key, subtree.replay_required) {
            (Some(input), true) => {
                let _ = writeln!(out, "[replay start] {input}");
                for model in &subtree.affected {
                    let _ = writeln!(out, "└── [live target] {model}");
                }
            }
            _ => {
                for model in &subtree.affected {
                    let _ = writeln!(out, "[deploy] {model}");
                }
            }
        }
        let _ = writeln!(out, "    mode: {}", mode_label(subtree.execution_mode));
    }
    let created: Vec<&str> = plan
        .object_changes
        .iter()
        .filter(|c| c.change_type == ChangeType::Create)
        .map(|c| c.name.as_str())
        .collect();
    let rebuilt: Vec<String> = plan
        .object_changes
        .iter()
        .filter(|c| c.change_type == ChangeType::Rebuild)
        .map(|c| match c.schema_change_kind {
            Some(kind) => format!(
                "{} ({})",
                c.name,
                serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            None => c.name.clone(),
        })
        .collect();
    if !created.is_empty() {
        let _ = writeln!(out, "\nNew targets: {}", created.join(", "));
    }
    if !rebuilt.is_empty() {
        let _ = writeln!(out, "\nChanges detected: {}", rebuilt.join(", "));
    }
    if verbose {
        if !plan.sql_diffs.is_empty() {
            let _ = writeln!(out, "\nDiffs against the active deployment:");
            for diff in &plan.sql_diffs {
                let _ = writeln!(out, "  {} ({})", diff.name, diff.object_type);
                for line in &diff.diff_lines {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        let _ = writeln!(out, "\nStaged rollout objects:");
        for object in &planned.shadow_objects {
            let _ = writeln!(out, "  {} -> {}", object.logical_key, object.physical_name);
        }
        let _ = writeln!(out, "\nWorkflow:");
        for step in steps(planned).into_iter().flatten() {
            let _ = writeln!(out, "  {step}");
        }
    } else {
        let _ = writeln!(
            out,
            "\nRun `stb plan --verbose` to show the diffs, the staged objects and the workflow."
        );
    }
    if !planned.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings:");
        for warning in &planned.warnings {
            let _ = writeln!(out, "  - {warning}");
        }
    }
    out
}

/// Prints the plan on stdout.
pub(crate) fn print(planned: &Planned, as_json: bool, verbose: bool) {
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let _ = serde_json::to_writer(&mut stdout, &json(planned));
        let _ = writeln!(stdout);
    } else {
        let _ = write!(stdout, "{}", text(planned, verbose));
    }
}

/// A mixed scope's combined plan on stdout, as `stb plan` and `stb build` show it: the
/// virtual phase (staged first), then the direct one.
pub(crate) fn print_mixed(
    staged: Option<&Planned>,
    direct: &stb_engine::direct::Planned,
    verbose: bool,
) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "Mixed Build Plan");
    let _ = writeln!(
        stdout,
        "Execution order: virtual (staged) -> direct (applied immediately)"
    );
    let _ = writeln!(stdout, "\nPhase 1/2 VIRTUAL");
    if let Some(deployment) = staged {
        let _ = write!(stdout, "{}", text(deployment, verbose));
    }
    let _ = writeln!(stdout, "\nPhase 2/2 DIRECT");
    drop(stdout);
    crate::plan_render::print(direct, false, verbose);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of the deployments example against an empty target, every model created.
    fn planned() -> Planned {
        let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo");
        let dir = std::path::Path::new(&manifest_dir).join("../../examples/deployments");
        let project = stb_project::discover(&stb_project::DiscoverOptions {
            project_dir: Some(dir.clone()),
            cwd: dir,
            ..Default::default()
        })
        .expect("the example discovers");
        let compiled = stb_compile::compile(&project).expect("the example compiles");
        let scope = compiled
            .plan_models
            .iter()
            .map(|m| m.name.clone())
            .collect();
        let request = stb_engine::staged::Request {
            deployment_id: Some("20261205T000000Z_abcdef".to_owned()),
            ..Default::default()
        };
        stb_engine::staged::prepare(
            &compiled,
            "shop",
            &request,
            &scope,
            stb_plan::virtual_plan::Deployed::default(),
            0,
            "abcdef",
        )
        .expect("plans")
    }

    /// The JSON was a `serde_json::Value` (maps sorted by key); typed, each struct lists its
    /// fields alphabetically so the bytes stay the same. Going through a value re-sorts:
    /// both texts agree only if nothing is out of order.
    #[test]
    fn the_typed_plan_json_has_the_key_order_a_json_value_gives() {
        let planned = planned();
        assert!(!planned.plan.object_changes.is_empty());
        let document = json(&planned).with_plan_hash("hash".to_owned());
        let typed = serde_json::to_string_pretty(&document).expect("json");
        let value = serde_json::to_value(&document).expect("value");
        assert_eq!(typed, serde_json::to_string_pretty(&value).expect("json"));
        for key in [
            "object_changes",
            "prepared_shadow_objects",
            "rebuild_subtrees",
            "steps",
        ] {
            assert!(
                value[key].as_array().is_some_and(|a| !a.is_empty()),
                "{key} is filled"
            );
        }
        // And `plan.json`, with the workflow's steps beside the plan's own.
        let workflow = crate::run_artifacts::tests::workflow();
        let mut file = Vec::new();
        crate::run_artifacts::PlanFile::write(
            &document,
            &mut file,
            crate::run_artifacts::StepsJson(&workflow),
            true,
        )
        .expect("writes");
        let file = String::from_utf8(file).expect("utf-8");
        let value: serde_json::Value = serde_json::from_str(&file).expect("json");
        assert_eq!(file, serde_json::to_string_pretty(&value).expect("json"));
        assert_eq!(value["step_files"], true);
        assert_eq!(value["workflow_steps"][0]["step_id"], "realize_tbl__a");
        assert_eq!(
            value["steps"],
            serde_json::to_value(&document).expect("v")["steps"]
        );
    }
}
