//! Disposable records of a plan or a build under `target/run/`: what was planned, what
//! ran, and how it ended. Each directory is replaced whole (staged, then renamed), so a
//! reader never sees a mix of two runs.

use std::path::Path;

use stb_build::execute::Execution;
use stb_plan::workflow::{Action, Workflow};

use crate::output::Failure;
use crate::plan::Prepared;

fn failure(path: &Path, error: &std::io::Error) -> Failure {
    Failure {
        code: "STB-RUN-001",
        message: format!("could not write {}: {error}", path.display()),
        hint: "check that the project's target/ directory is writable".to_owned(),
    }
}

/// Replaces `target/run/<name>/` with `files` (relative path, contents).
pub(crate) fn publish(root: &Path, name: &str, files: &[(String, String)]) -> Result<(), Failure> {
    let run = root.join("target").join("run");
    let stage = run.join(format!(".{name}.stage-{}", std::process::id()));
    let old = run.join(format!(".{name}.old-{}", std::process::id()));
    let final_dir = run.join(name);
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(|e| failure(&stage, &e))?;
    for (name, contents) in files {
        let path = stage.join(name);
        std::fs::write(&path, contents).map_err(|e| failure(&path, &e))?;
    }
    if final_dir.exists() {
        std::fs::rename(&final_dir, &old).map_err(|e| failure(&final_dir, &e))?;
    }
    std::fs::rename(&stage, &final_dir).map_err(|e| failure(&final_dir, &e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

fn joined(statements: impl Iterator<Item = (String, String)>) -> String {
    let mut text = String::new();
    for (id, sql) in statements {
        text.push_str(&format!("-- step: {id}\n{};\n\n", sql.trim_end()));
    }
    text
}

/// `target/run/plan/`: `plan.json` (the plan and every step of the workflow: id, phase,
/// intent, statement) and `workflow.template.sql` (the statements in order; replays are
/// templates until their boundary is captured). One file per statement, as the reference
/// writes, costs a file creation each: 5 s for the 8,000 statements of a 2,000-model
/// rebuild on a busy disk here, against a plan that otherwise takes under one second.
pub(crate) fn write_plan(root: &Path, prepared: &Prepared) -> Result<(), Failure> {
    let workflow = &prepared.workflow;
    let mut plan = prepared.output.json();
    plan["steps"] = workflow
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            serde_json::json!({
                "sequence": index + 1,
                "step_id": step.id,
                "phase": step.phase.as_str(),
                "intent": step.intent(),
                "template": matches!(step.action, Action::Replay(_)),
                "sql": workflow.recorded_sql(step),
            })
        })
        .collect();
    let files = vec![
        (
            "plan.json".to_owned(),
            format!(
                "{}\n",
                serde_json::to_string_pretty(&plan).unwrap_or_default()
            ),
        ),
        (
            "workflow.template.sql".to_owned(),
            joined(
                workflow
                    .steps
                    .iter()
                    .map(|s| (s.id.clone(), workflow.recorded_sql(s))),
            ),
        ),
    ];
    publish(root, "plan", &files)
}

/// `target/run/build/`: `workflow.sql` (what ran, replays rendered) and `execution.json`.
pub(crate) fn write_build(
    root: &Path,
    workflow: &Workflow,
    workflow_id: &str,
    execution: &Execution,
) -> Result<(), Failure> {
    let mut record = serde_json::to_value(execution).unwrap_or_default();
    record["workflow_id"] = serde_json::json!(workflow_id);
    record["database"] = serde_json::json!(workflow.database);
    let files = vec![
        (
            "workflow.sql".to_owned(),
            joined(
                execution
                    .statements
                    .iter()
                    .map(|s| (s.step_id.clone(), s.sql.clone())),
            ),
        ),
        (
            "execution.json".to_owned(),
            format!(
                "{}\n",
                serde_json::to_string_pretty(&record).unwrap_or_default()
            ),
        ),
    ];
    publish(root, "build", &files)
}
