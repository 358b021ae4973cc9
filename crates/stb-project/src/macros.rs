//! Python macros: one long-lived `python3` worker per invocation, spoken to in JSON lines.
//!
//! The worker script is embedded in the binary and needs only the standard library. It is
//! started only when the project has macro files.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value as Json, json};

const WORKER: &str = include_str!("../python/macro_worker.py");

/// Environment variable naming the interpreter (default `python3`).
pub const PYTHON_ENV: &str = "STB_PYTHON";
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

/// A failure inside Python, located in the user's macro file when possible.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct PythonError {
    pub message: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    #[serde(default)]
    pub collision: bool,
    /// `arguments`, `call` or `result` for SQL macro expansion failures.
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Debug)]
pub enum MacroError {
    /// Python could not be started or died.
    Worker(String),
    /// The call did not return in time; the worker was stopped.
    Timeout(Duration),
    /// The macro (or loading a file) raised.
    Python(PythonError),
}

/// What a call returned: its Python type name and value.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub type_name: String,
    pub value: Json,
}

pub struct MacroRuntime {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    timeout: Duration,
    pub macros: Vec<MacroInfo>,
}

impl MacroRuntime {
    /// Starts the worker and loads `files` (absolute path, project-relative path).
    ///
    /// # Errors
    /// Python missing, or a file that fails to load.
    pub fn start(files: &[(PathBuf, String)]) -> Result<Self, MacroError> {
        let interpreter = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned());
        let mut child = Command::new(&interpreter)
            // Isolated mode: the user's PYTHON* variables and user site-packages do not leak in.
            .args(["-I", "-c", WORKER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| MacroError::Worker(format!("cannot start {interpreter}: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| MacroError::Worker("no stdin".to_owned()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| MacroError::Worker("no stdout".to_owned()))?;
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let timeout = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis);
        let mut runtime = Self {
            child,
            stdin,
            lines,
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
        let died = |detail: String| {
            MacroError::Worker(format!("the Python macro worker stopped: {detail}"))
        };
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| died(e.to_string()))?;
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                return Err(MacroError::Timeout(timeout));
            }
            Err(RecvTimeoutError::Disconnected) => return Err(died("no reply".to_owned())),
        };
        let reply: Json =
            serde_json::from_str(&line).map_err(|e| died(format!("unreadable reply: {e}")))?;
        if reply.get("ok").and_then(Json::as_bool) == Some(true) {
            return Ok(reply);
        }
        let error: PythonError =
            serde_json::from_value(reply.get("error").cloned().unwrap_or_default())
                .map_err(|e| died(format!("unreadable error: {e}")))?;
        Err(MacroError::Python(error))
    }
}

impl Drop for MacroRuntime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Public macro files: `macros/**/*.py`, without `__init__.py` or any path component that
/// starts with `_`; sorted by path components.
#[must_use]
pub fn macro_files(project_dir: &Path) -> Vec<(PathBuf, String)> {
    let root = project_dir.join("macros");
    let mut found = Vec::new();
    collect(&root, &mut found);
    found.sort();
    found
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(project_dir).ok()?.to_path_buf();
            let private = relative
                .components()
                .skip(1)
                .any(|c| c.as_os_str().to_string_lossy().starts_with('_'));
            (!private).then(|| (path.clone(), relative.to_string_lossy().replace('\\', "/")))
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "py") {
            out.push(path);
        }
    }
}
