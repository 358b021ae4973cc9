//! Sensors and providers: the reference's automation, authored in Python under `sensors/`
//! and `providers/` and loaded at compile time, as the reference loads them. The sensor
//! worker (`python/sensor_worker.py`) imports the files with the reference's public
//! modules (`streambuild.sensors`, `.events`, `.providers`) in place and describes every
//! declared sensor and provider; a file that fails to load, a declaration against the
//! rules or a name used twice is a located diagnostic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use stb_diagnostics::{Diagnostic, Diagnostics, Location, Position};

use crate::codes;
use crate::python_worker::{PythonWorker, PythonWorkerError, python_files};

const WORKER: &str = include_str!("../python/sensor_worker.py");

/// Starting Python and importing the files: generous, as the macro worker's load is.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a tick may run, whatever its sensor declares.
const MAX_TICK: Duration = Duration::from_secs(366 * 24 * 3600);

/// What an event sensor reacts to, or that a sensor polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SensorKind {
    Event,
    Polling,
}

/// `SensorRetryPolicy(max_attempts, backoff_seconds)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"))]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff_seconds: f64,
}

/// One sensor as its decorator declared it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"))]
pub struct SensorDefinition {
    pub name: String,
    pub kind: SensorKind,
    /// The first paragraph of the handler's docstring.
    pub description: Option<String>,
    /// Project-relative, `/`-separated.
    pub file: String,
    pub line: Option<u32>,
    /// SHA-256 of name, file and the file's text: changes whenever the definition may have.
    pub fingerprint: String,
    /// `running` or `stopped`.
    pub default_status: String,
    pub retry_policy: RetryPolicy,
    pub timeout_seconds: f64,
    /// The providers its handler takes, by parameter name.
    pub providers: Vec<String>,
    /// Event sensors: `AuditCompleted` or `RunCompleted`.
    #[serde(default)]
    pub event_type: Option<String>,
    /// Event sensors: the targets and triggers it is limited to (`None`: any).
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    #[serde(default)]
    pub triggers: Option<Vec<String>>,
    #[serde(default)]
    pub maximum_event_age_seconds: Option<f64>,
    /// Polling sensors: the least time between two ticks.
    #[serde(default)]
    pub minimum_interval_seconds: Option<f64>,
}

/// A provider class under `providers/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderDefinition {
    /// The name handlers take it by.
    pub name: String,
    pub class: String,
    pub file: String,
    pub line: Option<u32>,
}

/// `[sensors]` for the target: each key from the local file's target, else the project
/// file's target, else the project file's top level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SensorSettings {
    pub enabled: bool,
    /// Ticks and steps older than this many days are deleted (0 keeps them all).
    pub tick_retention_days: u64,
    /// Events older than this are not delivered (a sensor's own limit wins).
    pub maximum_event_age_seconds: Option<u64>,
}

/// The project's automation: its settings, sensors and providers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sensors {
    pub settings: SensorSettings,
    pub definitions: Vec<SensorDefinition>,
    pub providers: Vec<ProviderDefinition>,
    /// SHA-256 over every `.py` file under `sensors/` and `providers/` (private helpers
    /// too): a dispatcher whose worker loaded other code is replaced.
    #[serde(skip)]
    pub sources: String,
}

impl Sensors {
    #[must_use]
    pub fn find(&self, name: &str) -> Option<&SensorDefinition> {
        self.definitions.iter().find(|s| s.name == name)
    }
}

/// `sensors/**/*.py` without any path component (below `sensors/`) that starts with `_`.
#[must_use]
pub fn sensor_files(project_dir: &Path) -> Vec<(PathBuf, String)> {
    python_files(project_dir, "sensors", |inner| {
        !inner.iter().any(|part| part.starts_with('_'))
    })
}

/// `providers/**/*.py` without files whose name starts with `_` (`__init__.py` among them);
/// the reference looks at the file name only here.
#[must_use]
pub fn provider_files(project_dir: &Path) -> Vec<(PathBuf, String)> {
    python_files(project_dir, "providers", |inner| {
        inner.last().is_some_and(|name| !name.starts_with('_'))
    })
}

/// SHA-256 over the path and text of every `.py` file under `sensors/` and `providers/`,
/// the private ones included (a sensor may import a helper).
#[must_use]
pub fn sources_fingerprint(project_dir: &Path) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for directory in ["providers", "sensors"] {
        for (path, relative) in python_files(project_dir, directory, |_| true) {
            hasher.update(relative.as_bytes());
            hasher.update([0]);
            hasher.update(std::fs::read(&path).unwrap_or_default());
            hasher.update([0]);
        }
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[derive(Deserialize)]
struct Loaded {
    sensors: Vec<SensorDefinition>,
    providers: Vec<ProviderDefinition>,
}

/// Loads the project's sensors and providers (nothing, and no Python, when it has none).
pub fn load_definitions(
    project_dir: &Path,
    diagnostics: &mut Diagnostics,
) -> (Vec<SensorDefinition>, Vec<ProviderDefinition>) {
    let providers = provider_files(project_dir);
    let sensors = sensor_files(project_dir);
    if providers.is_empty() && sensors.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let entries = |files: &[(PathBuf, String)]| -> Vec<serde_json::Value> {
        files
            .iter()
            .map(|(path, relative)| json!({"path": path, "relative": relative}))
            .collect()
    };
    let request = json!({
        "op": "load",
        "project_dir": project_dir,
        "providers": entries(&providers),
        "sensors": entries(&sensors),
    });
    let reply = PythonWorker::start(WORKER, "sensor")
        .and_then(|mut worker| worker.request(&request, LOAD_TIMEOUT));
    match reply.map(serde_json::from_value::<Loaded>) {
        Ok(Ok(loaded)) => (loaded.sensors, loaded.providers),
        Ok(Err(error)) => {
            diagnostics.push(python_missing(&format!(
                "the sensor worker answered what stb cannot read: {error}"
            )));
            (Vec::new(), Vec::new())
        }
        Err(PythonWorkerError::Python(error)) => {
            let file = error.file.clone().unwrap_or_else(|| "sensors".to_owned());
            let location = error.line.map_or_else(
                || Location::file(&file),
                |line| Location::at(&file, Position::new(line, 1)),
            );
            let hint = if error.message.contains("pydantic-settings") {
                "install pydantic-settings into the Python stb runs (STB_PYTHON, else python3)"
            } else {
                "fix the file; sensors and providers are executed as ordinary Python at compile time"
            };
            diagnostics.push(
                Diagnostic::new(codes::DISCOVER_SENSOR_LOAD, error.message, hint).at(location),
            );
            (Vec::new(), Vec::new())
        }
        Err(PythonWorkerError::Timeout(limit)) => {
            diagnostics.push(
                Diagnostic::new(
                    codes::DISCOVER_SENSOR_LOAD,
                    format!(
                        "loading the sensor and provider files did not finish within {}s",
                        limit.as_secs()
                    ),
                    "a sensor or provider file runs something slow at import; move it into the handler",
                )
                .at(Location::file("sensors")),
            );
            (Vec::new(), Vec::new())
        }
        Err(PythonWorkerError::Worker(detail)) => {
            diagnostics.push(python_missing(&detail));
            (Vec::new(), Vec::new())
        }
    }
}

fn python_missing(detail: &str) -> Diagnostic {
    Diagnostic::new(
        codes::DISCOVER_PYTHON,
        format!("the project has sensors or providers but Python cannot load them: {detail}"),
        "install python3 (3.9+) or set STB_PYTHON to an interpreter",
    )
    .at(Location::file("sensors"))
}

/// A durable step marker as the worker reads and writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepMarker {
    pub step_key: String,
    pub policy: String,
    pub status: String,
    pub attempt: i64,
    pub result_json: Option<String>,
    pub error_message: Option<String>,
}

/// A polling sensor's state going into a tick.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PollingState {
    /// The cursor its last successful tick returned.
    pub cursor: Option<String>,
    /// When that tick started (`YYYY-MM-DD HH:MM:SS.mmm` UTC).
    pub last_success_at: Option<String>,
}

/// One tick to run.
#[derive(Debug, Clone)]
pub struct Evaluation<'a> {
    pub sensor: &'a SensorDefinition,
    /// The named target (never the physical database).
    pub target: &'a str,
    /// Event sensors: the event, its fields as the reference names them, `kind` its type.
    pub event: Option<serde_json::Value>,
    pub polling: Option<PollingState>,
    /// The markers recorded for this event so far.
    pub steps: Vec<StepMarker>,
}

/// How a tick ended: `succeeded`, `skipped` or `failed`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct TickOutcome {
    pub status: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub skip_reason: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
}

impl TickOutcome {
    fn failed(error: String) -> Self {
        Self {
            status: "failed".to_owned(),
            error: Some(error),
            ..Self::default()
        }
    }
}

/// The long-lived sensor worker of a dispatcher: loads the project's files once and runs
/// ticks; a tick that overruns its sensor's timeout stops the worker (Python cannot stop
/// a thread), and the next tick starts a fresh one.
pub struct SensorRuntime {
    project_dir: PathBuf,
    worker: Option<PythonWorker>,
}

impl SensorRuntime {
    #[must_use]
    pub fn new(project_dir: &Path) -> Self {
        Self {
            project_dir: project_dir.to_path_buf(),
            worker: None,
        }
    }

    /// Starts the worker and loads the project's files, unless it runs already: a
    /// dispatcher checks this before it claims a tick, so a worker that cannot start (a
    /// file broken since the last compile, no Python) is the pass's failure, not an
    /// attempt of an event.
    ///
    /// # Errors
    /// Why the worker could not start or load the files.
    pub fn ready(&mut self) -> Result<(), String> {
        self.worker().map(|_| ())
    }

    fn worker(&mut self) -> Result<&mut PythonWorker, String> {
        if self.worker.is_none() {
            let entries = |files: Vec<(PathBuf, String)>| -> Vec<serde_json::Value> {
                files
                    .into_iter()
                    .map(|(path, relative)| json!({"path": path, "relative": relative}))
                    .collect()
            };
            let request = json!({
                "op": "load",
                "project_dir": self.project_dir,
                "providers": entries(provider_files(&self.project_dir)),
                "sensors": entries(sensor_files(&self.project_dir)),
            });
            let mut worker = PythonWorker::start(WORKER, "sensor").map_err(|e| describe(&e))?;
            worker
                .request(&request, LOAD_TIMEOUT)
                .map_err(|e| describe(&e))?;
            self.worker = Some(worker);
        }
        self.worker
            .as_mut()
            .ok_or_else(|| "the sensor worker is not running".to_owned())
    }

    /// Runs one tick. Every step marker the handler makes goes to `record_step`, which
    /// makes it durable before the handler goes on (an `Err` fails the step, and so the
    /// tick). A handler that raises, overruns its timeout or kills its worker is a failed
    /// tick, never an error of the dispatcher.
    pub fn evaluate(
        &mut self,
        evaluation: &Evaluation<'_>,
        record_step: &mut dyn FnMut(&StepMarker) -> Result<(), String>,
    ) -> TickOutcome {
        let sensor = evaluation.sensor;
        let steps: serde_json::Map<String, serde_json::Value> = evaluation
            .steps
            .iter()
            .map(|step| (step.step_key.clone(), json!(step)))
            .collect();
        let request = json!({
            "op": "evaluate",
            "sensor": sensor.name,
            "target": evaluation.target,
            "event": evaluation.event,
            "polling": evaluation.polling,
            "steps": steps,
        });
        // Declared in Python as any positive number: a year bounds what a tick may take.
        let timeout = Duration::try_from_secs_f64(sensor.timeout_seconds.max(0.001))
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK);
        let worker = match self.worker() {
            Ok(worker) => worker,
            Err(error) => return TickOutcome::failed(error),
        };
        let mut answer = |question: &serde_json::Value| -> Result<serde_json::Value, String> {
            let marker: StepMarker = serde_json::from_value(question["step"].clone())
                .map_err(|e| format!("an unreadable step marker: {e}"))?;
            record_step(&marker).map(|()| json!({"ok": true}))
        };
        match worker.request_with(&request, timeout, &mut answer) {
            Ok(reply) => serde_json::from_value(reply).unwrap_or_else(|e| {
                TickOutcome::failed(format!("an unreadable tick outcome: {e}"))
            }),
            Err(PythonWorkerError::Timeout(_)) => {
                self.worker = None;
                TickOutcome::failed(format!(
                    "Sensor '{}' timed out after {} seconds",
                    sensor.name, sensor.timeout_seconds
                ))
            }
            Err(error) => {
                self.worker = None;
                TickOutcome::failed(describe(&error))
            }
        }
    }
}

fn describe(error: &PythonWorkerError) -> String {
    match error {
        PythonWorkerError::Worker(detail) => detail.clone(),
        PythonWorkerError::Timeout(limit) => {
            format!(
                "the sensor worker did not answer within {}s",
                limit.as_secs()
            )
        }
        PythonWorkerError::Python(error) => error.message.clone(),
    }
}

/// Sensors share the namespace of pipelines, models and sources.
pub(crate) fn check_names(
    sensors: &[SensorDefinition],
    taken: &[(&str, Location)],
    diagnostics: &mut Diagnostics,
) {
    for sensor in sensors {
        let Some((_, first)) = taken.iter().find(|(name, _)| *name == sensor.name) else {
            continue;
        };
        let here = sensor.line.map_or_else(
            || Location::file(&sensor.file),
            |line| Location::at(&sensor.file, Position::new(line, 1)),
        );
        diagnostics.push(
            Diagnostic::new(
                codes::DISCOVER_SENSOR_NAME,
                format!(
                    "Sensor name '{}' collides with another project resource; sensor names are unique alongside pipelines, models and sources",
                    sensor.name
                ),
                "rename the sensor (`@event_sensor(name=...)`) or the other resource",
            )
            .at(here)
            .with_related("also defined here", first.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn private_sensor_paths_and_provider_file_names_are_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        for file in [
            "sensors/quality.py",
            "sensors/_helpers.py",
            "sensors/_private/inner.py",
            "sensors/team/alerts.py",
            "providers/console.py",
            "providers/__init__.py",
            "providers/_base.py",
            "providers/_shared/slack.py",
        ] {
            write(dir.path(), file, "");
        }
        let names = |files: Vec<(PathBuf, String)>| -> Vec<String> {
            files.into_iter().map(|(_, relative)| relative).collect()
        };
        assert_eq!(
            names(sensor_files(dir.path())),
            ["sensors/quality.py", "sensors/team/alerts.py"]
        );
        // The reference filters provider files by their own name only.
        assert_eq!(
            names(provider_files(dir.path())),
            ["providers/_shared/slack.py", "providers/console.py"]
        );
    }

    #[test]
    fn definitions_show_in_the_api_s_camel_case() {
        let definition = SensorDefinition {
            name: "quality_alerts".into(),
            kind: SensorKind::Event,
            description: None,
            file: "sensors/quality.py".into(),
            line: Some(3),
            fingerprint: "f".into(),
            default_status: "running".into(),
            retry_policy: RetryPolicy {
                max_attempts: 3,
                backoff_seconds: 5.0,
            },
            timeout_seconds: 60.0,
            providers: vec![],
            event_type: Some("AuditCompleted".into()),
            targets: None,
            triggers: None,
            maximum_event_age_seconds: None,
            minimum_interval_seconds: None,
        };
        let shown = serde_json::to_value(&definition).expect("json");
        assert_eq!(shown["defaultStatus"], "running");
        assert_eq!(shown["retryPolicy"]["maxAttempts"], 3);
        assert_eq!(shown["retryPolicy"]["backoffSeconds"], 5.0);
        assert_eq!(shown["eventType"], "AuditCompleted");
        assert_eq!(shown["kind"], "event");
    }
}
