//! Disposable records of a plan or a build under `target/run/`: what was planned, what
//! ran, and how it ended. Each directory is replaced whole (staged, then renamed), so a
//! reader never sees a mix of two runs.

use std::io::Write as _;
use std::path::Path;

use stb_build::execute::Execution;
use stb_plan::workflow::{StepsJson, Workflow, is_template};

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
    publish_with(root, name, |stage| {
        for (name, contents) in files {
            write_file(stage, name, |out| out.write_all(contents.as_bytes()))?;
        }
        Ok(())
    })
}

/// Replaces `target/run/<name>/` with what `write` writes into the directory it is given.
fn publish_with(
    root: &Path,
    name: &str,
    write: impl FnOnce(&Path) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let run = root.join("target").join("run");
    let stage = run.join(format!(".{name}.stage-{}", std::process::id()));
    let old = run.join(format!(".{name}.old-{}", std::process::id()));
    let final_dir = run.join(name);
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(|e| failure(&stage, &e))?;
    write(&stage)?;
    if final_dir.exists() {
        std::fs::rename(&final_dir, &old).map_err(|e| failure(&final_dir, &e))?;
    }
    std::fs::rename(&stage, &final_dir).map_err(|e| failure(&final_dir, &e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Writes `dir/name` through a buffer, as `write` produces it (a large plan's files are
/// streamed, never held whole).
fn write_file(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| failure(parent, &e))?;
    }
    let file = std::fs::File::create(&path).map_err(|e| failure(&path, &e))?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|e| failure(&path, &e))
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
    let mut text = Vec::with_capacity(sql.len() + id.len() + 16);
    let _ = write_step(&mut text, id, sql);
    StepFile {
        name: step_file_name(sequence, id, template),
        text: String::from_utf8(text).unwrap_or_default(),
    }
}

fn step_file_name(sequence: usize, id: &str, template: bool) -> String {
    let extension = if template { "sql.template" } else { "sql" };
    format!("steps/{sequence:04}_{id}.{extension}")
}

/// A step file's text, written as it is made: a deployment's metadata insert is tens of
/// megabytes, and a copy of it per file doubled a large plan's peak memory.
fn write_step(out: &mut impl std::io::Write, id: &str, sql: &str) -> std::io::Result<()> {
    let sql = sql.trim_end();
    // A `;` after a trailing `--` comment would be part of the comment.
    let terminator = if sql.lines().last().is_some_and(|l| l.contains("--")) {
        "\n;"
    } else {
        ";"
    };
    writeln!(out, "-- step: {id}")?;
    out.write_all(sql.as_bytes())?;
    writeln!(out, "{terminator}")
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
    plan: &dyn PlanFile,
) -> Result<(), Failure> {
    let workflow = &planned.workflow;
    let with_step_files = workflow.steps.len() <= plan_step_files_limit();
    publish_with(root, "plan", |stage| {
        write_file(stage, "plan.json", |out| {
            plan.write(&mut *out, StepsJson(workflow), with_step_files)?;
            out.write_all(b"\n")
        })?;
        // Exactly the step files' texts, in order, joined with a blank line.
        write_file(stage, "workflow.template.sql", |out| {
            for (index, step) in workflow.steps.iter().enumerate() {
                if index > 0 {
                    out.write_all(b"\n")?;
                }
                write_step(out, &step.id, &workflow.recorded_sql(step))?;
            }
            Ok(())
        })?;
        if with_step_files {
            for (index, step) in workflow.steps.iter().enumerate() {
                let name = step_file_name(index + 1, &step.id, is_template(&step.action));
                write_file(stage, &name, |out| {
                    write_step(out, &step.id, &workflow.recorded_sql(step))
                })?;
            }
        }
        Ok(())
    })
}

/// A plan as `plan.json` holds it: what `stb plan --json` prints, with the workflow's
/// steps and whether step files were written.
pub(crate) trait PlanFile {
    /// Writes the document (pretty JSON, no trailing newline).
    ///
    /// # Errors
    /// Writing failed.
    fn write(
        &self,
        out: &mut dyn std::io::Write,
        steps: StepsJson<'_>,
        step_files: bool,
    ) -> serde_json::Result<()>;
}

/// A direct plan's JSON value: the workflow's steps go under `steps`, unless the plan has
/// `steps` of its own (a virtual plan's step labels), then under `workflow_steps`.
impl PlanFile for serde_json::Value {
    fn write(
        &self,
        out: &mut dyn std::io::Write,
        steps: StepsJson<'_>,
        step_files: bool,
    ) -> serde_json::Result<()> {
        let steps_key = if self.get("steps").is_some() {
            "workflow_steps"
        } else {
            "steps"
        };
        let document = PlanDocument {
            plan: self,
            steps_key,
            with_step_files: step_files,
            workflow: steps.0,
        };
        serde_json::to_writer_pretty(out, &document)
    }
}

/// A direct plan's document: written as its JSON value is (the workflow's steps among its
/// members, in key order).
impl PlanFile for stb_engine::direct::json::DirectJson<'_> {
    fn write(
        &self,
        out: &mut dyn std::io::Write,
        steps: StepsJson<'_>,
        step_files: bool,
    ) -> serde_json::Result<()> {
        serde_json::to_value(self)?.write(out, steps, step_files)
    }
}

/// `plan.json`: the plan's members and the workflow's steps, serialised as they are
/// written (a 10,000-model plan's steps are tens of megabytes of SQL), keys in the order
/// a JSON value's map keeps them (sorted).
struct PlanDocument<'a> {
    plan: &'a serde_json::Value,
    steps_key: &'static str,
    with_step_files: bool,
    workflow: &'a Workflow,
}

impl serde::Serialize for PlanDocument<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let own = [self.steps_key, "step_files"];
        let members = self.plan.as_object();
        let mut keys: Vec<&str> = members
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
            .filter(|k| !own.contains(k))
            .chain(own)
            .collect();
        keys.sort_unstable();
        let mut map = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            if key == self.steps_key {
                map.serialize_entry(key, &StepsJson(self.workflow))?;
            } else if key == "step_files" {
                map.serialize_entry(key, &self.with_step_files)?;
            } else if let Some(value) = members.and_then(|m| m.get(key)) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use stb_plan::workflow::{Phase, Step};

    /// A workflow of two plain statements, for tests of what is written from one.
    pub(crate) fn workflow() -> Workflow {
        Workflow {
            database: "db".into(),
            steps: vec![
                Step::statement(
                    "realize_tbl__a".into(),
                    Phase::Realization,
                    "CREATE TABLE db.tbl__a (x UInt8) ENGINE = MergeTree ORDER BY x".into(),
                ),
                Step::statement(
                    "drop_b".into(),
                    Phase::Teardown,
                    "DROP TABLE IF EXISTS db.b SYNC -- it said \"b\"".into(),
                ),
            ],
            roots: Vec::new(),
            start_time: None,
            paused_landings: Vec::new(),
            fresh_groups: Vec::new(),
            undo: stb_plan::restore::Undo::default(),
            watermarks: Vec::new(),
            completed_when: None,
            cluster: None,
        }
    }

    /// What `plan.json` was when the steps were put into the plan's JSON value.
    fn as_a_value(mut plan: serde_json::Value, key: &str, workflow: &Workflow) -> String {
        plan["step_files"] = serde_json::json!(true);
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
        serde_json::to_string_pretty(&plan).expect("json")
    }

    #[test]
    fn the_streamed_plan_json_is_the_plans_value_with_its_steps_byte_for_byte() {
        let workflow = workflow();
        // A direct plan (steps go under `steps`) and a virtual one (which has its own).
        let direct = serde_json::json!({
            "mode": "direct", "adapter": "clickhouse", "zeta": [1, {"b": null, "a": "x"}],
            "entries": [{"model": "a", "reason": "all_models"}], "validation": {"checked": 2},
        });
        let virtual_plan = serde_json::json!({"steps": ["stage", "publish"], "deployment_id": "d"});
        for (plan, key) in [(direct, "steps"), (virtual_plan, "workflow_steps")] {
            let streamed = serde_json::to_string_pretty(&PlanDocument {
                plan: &plan,
                steps_key: key,
                with_step_files: true,
                workflow: &workflow,
            })
            .expect("json");
            assert_eq!(streamed, as_a_value(plan.clone(), key, &workflow));
        }
    }
}
