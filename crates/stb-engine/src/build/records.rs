//! Where a build reports while it runs and when it ends: run events (and, through a hook,
//! `--events` lines), re-recorded statements, the manifest and the terminal invocation
//! row.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stb_build::execute::Observer;
use stb_plan::workflow::Step;
use stb_warehouse::events::RunEventSink;
use stb_warehouse::records::{Invocation, Manifest, OwnedResource, write_invocation};
use stb_warehouse::statements::{PlannedStatement, persist_statements};
use stb_warehouse::{Client, WarehouseError};

use super::RunIdentity;

/// The project's manifest row: its pipelines and every relation it owns.
pub fn manifest<'p>(
    project: &'p stb_project::Project,
    compiled: &'p stb_compile::Compiled,
    invocation_id: &'p str,
    fingerprint: &'p str,
) -> Manifest<'p> {
    let mut resources: Vec<OwnedResource<'p>> = compiled
        .plan_models
        .iter()
        .flat_map(|model| {
            model
                .relations
                .iter()
                .map(move |(kind, relation)| OwnedResource {
                    pipeline: &model.pipeline,
                    logical_type: "model",
                    logical_name: &model.name,
                    role: kind.as_str(),
                    relation,
                })
        })
        .collect();
    for source in &compiled.plan_sources {
        if let Some(landing) = &source.landing {
            for (role, relation) in [
                ("kafka_table", landing.kafka_table.as_str()),
                ("landing_table", landing.raw_table.as_str()),
                ("landing_view", landing.view.as_str()),
            ] {
                resources.push(OwnedResource {
                    pipeline: "",
                    logical_type: "source",
                    logical_name: &source.name,
                    role,
                    relation,
                });
            }
        }
    }
    Manifest {
        invocation_id,
        project_identity: &project.name,
        target_name: &project.target,
        fingerprint,
        pipelines: project.pipelines.iter().map(|p| p.name.as_str()).collect(),
        resources,
    }
}

/// Writes the run's events (and prints them with `--events`); persistence failures warn
/// once and never stop the build. Events are queued for the sink's writer thread (started
/// by `RunEventSink::heartbeat`) and written synchronously when none runs.
pub struct BuildObserver {
    pub sink: Arc<RunEventSink>,
    pub client: Arc<Client>,
    pub database: String,
    pub invocation_id: String,
    /// Called with each event as a JSON line would carry it (`stb build --events` prints
    /// them); the events are written to the warehouse either way.
    pub on_event: Option<EventHook>,
    /// Told once when events cannot be written (the build goes on).
    pub on_warning: WarningHook,
    pub warned: AtomicBool,
}

/// What a caller does with each event a build emits.
pub type EventHook = Box<dyn Fn(&serde_json::Value) + Send + Sync>;
/// What a caller does with a warning (the CLI prints it on stderr).
pub type WarningHook = Box<dyn Fn(&str) + Send + Sync>;

impl BuildObserver {
    /// The run's last event, written before this returns (with anything still queued).
    pub fn completed(&self, outcome: &str, exit_code: i32, error: Option<&str>) {
        self.event(
            "run_completed",
            None,
            serde_json::json!({"outcome": outcome, "exitCode": exit_code, "errorMessage": error}),
        );
        if self.sink.flush().is_err() {
            self.warn_once();
        }
    }

    fn warn_once(&self) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            (self.on_warning)("run observation failed; continuing execution and retrying");
        }
    }
}

impl Observer for BuildObserver {
    fn event(&self, kind: &str, step: Option<&Step>, payload: serde_json::Value) {
        let step_id = step.map(|s| s.id.as_str());
        let phase = step.map(|s| s.phase.as_str());
        // Queued for the writer thread: a build does not wait a round trip per event. The
        // start of a plain statement (DDL: milliseconds) may wait for company; a capture's,
        // a replay's or a seed's goes out at once, so `stb unlock` can kill it by its id
        // after a kill of this process.
        let short = kind == "statement_started"
            && step.is_some_and(|s| matches!(s.action, stb_plan::workflow::Action::Statement(_)));
        let sequence = if short {
            self.sink.queue_lazy(kind, step_id, phase, &payload)
        } else {
            self.sink.queue(kind, step_id, phase, &payload)
        };
        if self.sink.take_failure() {
            self.warn_once();
        }
        if let Some(hook) = &self.on_event {
            let mut line = serde_json::json!({
                "event": kind,
                "invocationId": self.invocation_id,
                "sequence": sequence,
                "stepId": step_id,
                "phase": phase,
            });
            if let (Some(target), serde_json::Value::Object(fields)) =
                (line.as_object_mut(), payload)
            {
                target.extend(fields);
            }
            hook(&line);
        }
    }

    fn checkpoint(&self) -> Result<(), WarehouseError> {
        self.sink.flush()
    }

    fn run_id(&self) -> Option<&str> {
        Some(&self.invocation_id)
    }

    fn statements_changed(
        &self,
        statements: &[PlannedStatement],
        revision: u64,
    ) -> Result<(), WarehouseError> {
        persist_statements(
            &self.client,
            &self.database,
            &self.invocation_id,
            statements,
            revision,
        )
        .map(|_| ())
    }
}

/// Writes the terminal invocation row; a failure is reported, never fatal.
pub struct Recorder<'a> {
    pub client: Arc<Client>,
    pub database: String,
    pub project: &'a stb_project::Project,
    pub run: &'a RunIdentity,
    /// Set once the run is known to stage a virtual deployment: the invocation is then
    /// recorded with mode `virtual_environment` and the deployment's id.
    pub deployment: std::sync::OnceLock<String>,
}

/// How an invocation ended.
pub struct Ending<'a> {
    pub outcome: &'a str,
    pub exit_code: i32,
    pub materialized: Option<&'a str>,
    pub workflow_id: Option<&'a str>,
    pub error: Option<&'a str>,
    pub selected: usize,
    pub summary: &'a str,
}

impl<'a> Ending<'a> {
    /// Ended before the warehouse's relations were touched.
    pub fn early(outcome: &'a str, error: Option<&'a str>, selected: usize) -> Self {
        Self {
            outcome,
            exit_code: 1,
            materialized: None,
            workflow_id: None,
            error,
            selected,
            summary: "{}",
        }
    }
}

impl Recorder<'_> {
    pub fn invocation_id(&self) -> &str {
        &self.run.invocation_id
    }

    /// Writes the terminal invocation row.
    ///
    /// # Errors
    /// Why it could not be written (the build's outcome stands; the caller warns).
    pub fn finish(&self, ending: &Ending<'_>) -> Result<(), String> {
        let Ending {
            outcome,
            exit_code,
            materialized,
            workflow_id,
            error,
            selected,
            summary,
        } = *ending;
        let result = write_invocation(
            &self.client,
            &self.database,
            &Invocation {
                invocation_id: &self.run.invocation_id,
                project_identity: &self.project.name,
                target_identity: &self.project.target,
                command: "build",
                mode: Some(if self.deployment.get().is_some() {
                    "virtual_environment"
                } else {
                    "direct"
                }),
                outcome,
                exit_code,
                materialized_outcome: materialized,
                deployment_id: self.deployment.get().map(String::as_str),
                workflow_id,
                selected_node_count: selected,
                started_at_ms: self.run.started_at_ms,
                duration_ms: self.run.clock.elapsed().as_millis(),
                error_message: error,
                summary_json: summary,
            },
        );
        result.map_err(|error| format!("the invocation was not recorded: {error}"))
    }
}
