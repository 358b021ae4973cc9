//! Python macros: one long-lived `python3` worker per invocation, spoken to in JSON lines.
//!
//! The worker script is embedded in the binary and needs only the standard library. It is
//! started only when the project has macro files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value as Json, json};

pub use crate::python_worker::{PYTHON_ENV, PythonError, PythonWorkerError as MacroError};
use crate::python_worker::{PythonWorker, python_files};

const WORKER: &str = include_str!("../python/macro_worker.py");

/// Environment variable bounding one macro call, in milliseconds (default 10000).
pub const TIMEOUT_ENV: &str = "STB_MACRO_TIMEOUT_MS";

/// A macro the worker registered.
#[derive(Debug, Clone, Deserialize)]
pub struct MacroInfo {
    pub name: String,
    pub file: String,
    pub line: u32,
    pub params: Vec<MacroParam>,
    #[serde(default)]
    pub doc: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MacroParam {
    pub name: String,
    pub annotation: Option<String>,
    pub kind: String,
}

/// What a call returned: its Python type name and value.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub type_name: String,
    pub value: Json,
}

pub struct MacroRuntime {
    worker: PythonWorker,
    timeout: Duration,
    pub macros: Vec<MacroInfo>,
}

impl MacroRuntime {
    /// Starts the worker and loads `files` (absolute path, project-relative path).
    ///
    /// # Errors
    /// Python missing, or a file that fails to load.
    pub fn start(files: &[(PathBuf, String)]) -> Result<Self, MacroError> {
        let worker = PythonWorker::start(WORKER, "macro")?;
        let timeout = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis);
        let mut runtime = Self {
            worker,
            timeout,
            macros: Vec::new(),
        };
        let files: Vec<Json> = files
            .iter()
            .map(|(path, relative)| json!({"path": path, "relative": relative}))
            .collect();
        // Starting Python and executing the files is not a macro call: it gets a generous
        // bound of its own, so a short call timeout does not fail a slow machine's start.
        let load_timeout = runtime.timeout.max(Duration::from_secs(60));
        let reply = runtime.request(&json!({"op": "load", "files": files}), load_timeout)?;
        runtime.macros = serde_json::from_value(reply.get("macros").cloned().unwrap_or_default())
            .map_err(|e| MacroError::Worker(format!("bad worker reply: {e}")))?;
        Ok(runtime)
    }

    #[must_use]
    pub fn find(&self, name: &str) -> Option<&MacroInfo> {
        self.macros.iter().find(|m| m.name == name)
    }

    /// Calls a pipeline naming macro with its immutable context.
    ///
    /// # Errors
    /// The macro raised or timed out, or the worker died.
    pub fn call_naming(&mut self, name: &str, context: &Json) -> Result<CallResult, MacroError> {
        self.call_with(&json!({"op": "call", "macro": name, "naming_context": context}))
    }

    /// Calls a macro with literal positional arguments.
    ///
    /// # Errors
    /// The macro raised or timed out, or the worker died.
    pub fn call(&mut self, name: &str, args: &[Json]) -> Result<CallResult, MacroError> {
        self.call_with(&json!({"op": "call", "macro": name, "args": args}))
    }

    /// Runs `@name(<args>)` from SQL with the invocation's context; the result is SQL text.
    ///
    /// # Errors
    /// Invalid arguments, a raising or slow macro, a non-string result, or a dead worker.
    pub fn expand(&mut self, name: &str, args: &str, context: &Json) -> Result<String, MacroError> {
        let reply = self.request(
            &json!({"op": "expand", "macro": name, "args": args, "context": context}),
            self.timeout,
        )?;
        Ok(reply
            .get("value")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned())
    }

    fn call_with(&mut self, request: &Json) -> Result<CallResult, MacroError> {
        let reply = self.request(request, self.timeout)?;
        Ok(CallResult {
            type_name: reply
                .get("type")
                .and_then(Json::as_str)
                .unwrap_or("NoneType")
                .to_owned(),
            value: reply.get("value").cloned().unwrap_or(Json::Null),
        })
    }

    fn request(&mut self, request: &Json, timeout: Duration) -> Result<Json, MacroError> {
        self.worker.request(request, timeout)
    }
}

/// Public macro files: `macros/**/*.py`, without `__init__.py` or any path component that
/// starts with `_`; sorted by path components.
#[must_use]
pub fn macro_files(project_dir: &Path) -> Vec<(PathBuf, String)> {
    python_files(project_dir, "macros", |inner| {
        !inner.iter().any(|part| part.starts_with('_'))
    })
}
