//! Disposable records of a plan or a build under `target/run/`: what was planned, what
//! ran, and how it ended. Each directory is replaced whole (staged, then renamed), so a
//! reader never sees a mix of two runs.

use std::path::Path;

use stb_build::execute::Execution;
use stb_plan::workflow::{Action, Workflow};

use crate::output::Failure;
use stb_engine::direct::Planned;

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
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| failure(parent, &e))?;
        }
        std::fs::write(&path, contents).map_err(|e| failure(&path, &e))?;
    }
    if final_dir.exists() {
        std::fs::rename(&final_dir, &old).map_err(|e| failure(&final_dir, &e))?;
    }
    std::fs::rename(&stage, &final_dir).map_err(|e| failure(&final_dir, &e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// One step's file: `steps/NNNN_<step>.sql` (`.sql.template` for a statement rendered only
/// at run time), headed by `-- step: <step>` and holding its statement, so a DBA can run a
/// build by hand, in order. Secrets stay redacted (`***`): Kafka credentials must be filled
/// in by hand.
struct StepFile {
    name: String,
    text: String,
}

fn step_file(sequence: usize, id: &str, sql: &str, template: bool) -> StepFile {
    let extension = if template { "sql.template" } else { "sql" };
    let sql = sql.trim_end();
    // A `;` after a trailing `--` comment would be part of the comment.
    let terminator = if sql.lines().last().is_some_and(|l| l.contains("--")) {
        "\n;"
    } else {
        ";"
    };
    StepFile {
        name: format!("steps/{sequence:04}_{id}.{extension}"),
        text: format!("-- step: {id}\n{sql}{terminator}\n"),
    }
}

/// `workflow.sql` / `workflow.template.sql`: exactly the step files' texts, in order,
/// joined with a blank line.
fn joined(steps: &[StepFile]) -> String {
    steps
        .iter()
        .map(|step| step.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Plans with more statements than this write only `workflow.template.sql`, not one file
/// per statement: file creation dominates a large plan (measured in docs/benchmarks.md).
/// `STB_PLAN_STEP_FILES_LIMIT` overrides it.
const PLAN_STEP_FILES_LIMIT: usize = 1_000;

fn plan_step_files_limit() -> usize {
    std::env::var("STB_PLAN_STEP_FILES_LIMIT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(PLAN_STEP_FILES_LIMIT)
}

/// `target/run/plan/`: `plan.json` (the plan and every step of the workflow: id, phase,
/// intent, statement), `workflow.template.sql` (the statements in order; replays are
/// templates until their boundary is captured) and, up to [`PLAN_STEP_FILES_LIMIT`]
/// statements, `steps/NNNN_<step>.sql`. One file per statement costs a file creation
/// each, which at 2,000 models (8,000 statements) takes longer than the plan itself.
/// `plan` is what `stb plan --json` prints (a direct plan's, or a virtual plan's
/// deployment); the steps are `planned`'s workflow either way (under `steps`, or
/// `workflow_steps` when the plan has `steps` of its own). A mixed plan writes none, as
/// the reference's does not.
pub(crate) fn write_plan(
    root: &Path,
    planned: &Planned,
    mut plan: serde_json::Value,
) -> Result<(), Failure> {
    let workflow = &planned.workflow;
    let with_step_files = workflow.steps.len() <= plan_step_files_limit();
    plan["step_files"] = serde_json::json!(with_step_files);
    // A virtual plan's own `steps` are the reference's step labels: the workflow's go
    // beside them.
    let key = if plan.get("steps").is_some() {
        "workflow_steps"
    } else {
        "steps"
    };
    plan[key] = workflow
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            serde_json::json!({
                "sequence": index + 1,
                "step_id": step.id,
                "phase": step.phase.as_str(),
                "intent": step.intent(),
                "template": is_template(&step.action),
                "sql": workflow.recorded_sql(step),
            })
        })
        .collect();
    let steps: Vec<StepFile> = workflow
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            step_file(
                index + 1,
                &step.id,
                &workflow.recorded_sql(step),
                is_template(&step.action),
            )
        })
        .collect();
    let mut files = vec![
        (
            "plan.json".to_owned(),
            format!(
                "{}\n",
                serde_json::to_string_pretty(&plan).unwrap_or_default()
            ),
        ),
        ("workflow.template.sql".to_owned(), joined(&steps)),
    ];
    if with_step_files {
        files.extend(steps.into_iter().map(|step| (step.name, step.text)));
    }
    publish(root, "plan", &files)
}

/// A statement a plan can only show as a template: its boundary is captured at run time.
fn is_template(action: &Action) -> bool {
    matches!(
        action,
        Action::Replay(_) | Action::Seed(_) | Action::Watermark(_)
    )
}

/// `target/run/build/`: `workflow.sql` (what ran, replays rendered), the same statements
/// as `steps/NNNN_<step>.sql` (a build's own time dwarfs the file creations), and
/// `execution.json`.
pub(crate) fn write_build(
    root: &Path,
    workflow: &Workflow,
    workflow_id: &str,
    execution: &Execution,
) -> Result<(), Failure> {
    let mut record = serde_json::to_value(execution).unwrap_or_default();
    record["workflow_id"] = serde_json::json!(workflow_id);
    record["database"] = serde_json::json!(workflow.database);
    let steps: Vec<StepFile> = execution
        .statements
        .iter()
        .enumerate()
        .map(|(index, statement)| step_file(index + 1, &statement.step_id, &statement.sql, false))
        .collect();
    let mut files = vec![
        ("workflow.sql".to_owned(), joined(&steps)),
        (
            "execution.json".to_owned(),
            format!(
                "{}\n",
                serde_json::to_string_pretty(&record).unwrap_or_default()
            ),
        ),
    ];
    files.extend(steps.into_iter().map(|step| (step.name, step.text)));
    publish(root, "build", &files)
}
