//! A virtual plan as text (its JSON is [`stb_engine::staged::json`], which `plan.json`
//! extends with the workflow's steps here).

use std::fmt::Write as _;
use std::io::Write as _;

use stb_engine::staged::Planned;
use stb_engine::staged::json::{VirtualJson, json, mode_label, steps};
use stb_plan::virtual_plan::ChangeType;

impl crate::run_artifacts::PlanFile for VirtualJson<'_> {
    fn write(
        &self,
        out: &mut dyn std::io::Write,
        steps: stb_plan::workflow::StepsJson<'_>,
        step_files: bool,
    ) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.with_workflow(steps, step_files))
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
            stb_plan::workflow::StepsJson(&workflow),
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
