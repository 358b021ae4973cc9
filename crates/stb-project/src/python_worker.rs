//! A long-lived `python3` process spoken to in JSON lines: one request per line on its
//! stdin, one reply per line on its stdout (`{"ok": true, ...}` or `{"ok": false, "error":
//! {...}}`). The macro worker and the sensor worker are two scripts over this one channel.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value as Json;

/// Environment variable naming the interpreter (default `python3`).
pub const PYTHON_ENV: &str = "STB_PYTHON";

/// stb's own secrets, never handed to user code: the warehouse's password and the control
/// store's URL (it may hold a password).
const WITHHELD: &[&str] = &[
    "STREAMBUILD_CLICKHOUSE_PASSWORD",
    "STREAMBUILD_CONTROL_STORE_URL",
];

/// A failure inside Python, located in the user's file when possible.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct PythonError {
    pub message: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    #[serde(default)]
    pub collision: bool,
    /// What failed: `arguments`, `call` or `result` for SQL macro expansion failures;
    /// `load` or `collision` for sensor and provider files.
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Debug)]
pub enum PythonWorkerError {
    /// Python could not be started or died.
    Worker(String),
    /// The request was not answered in time; the worker was stopped.
    Timeout(Duration),
    /// The user's code (or loading a file) raised.
    Python(PythonError),
}

pub(crate) struct PythonWorker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// What the worker is, for messages: "macro", "sensor".
    role: &'static str,
}

impl PythonWorker {
    /// Starts `script` under the interpreter `STB_PYTHON` names (else `python3`).
    pub(crate) fn start(script: &str, role: &'static str) -> Result<Self, PythonWorkerError> {
        let interpreter = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_owned());
        let mut child = Command::new(&interpreter)
            // Isolated mode: the user's PYTHON* variables and user site-packages do not leak in.
            .args(["-I", "-c", script])
            .env_clear()
            .envs(std::env::vars_os().filter(|(name, _)| {
                !WITHHELD
                    .iter()
                    .any(|withheld| name.as_os_str() == *withheld)
            }))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| PythonWorkerError::Worker(format!("cannot start {interpreter}: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| PythonWorkerError::Worker("no stdin".to_owned()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| PythonWorkerError::Worker("no stdout".to_owned()))?;
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
            role,
        })
    }

    /// Sends one request and waits up to `timeout` for its reply; a worker that does not
    /// answer in time is stopped.
    pub(crate) fn request(
        &mut self,
        request: &Json,
        timeout: Duration,
    ) -> Result<Json, PythonWorkerError> {
        self.request_with(request, timeout, &mut |_| {
            Err("this request takes no questions".to_owned())
        })
    }

    /// [`Self::request`] for a worker that may ask questions before it replies: each line
    /// with an `ask` key goes to `answer`, whose answer (`{"ok": true, ...}`, or `{"ok":
    /// false, "error": {"message"}}` for an `Err`) is written back. `timeout` bounds the
    /// whole exchange.
    pub(crate) fn request_with(
        &mut self,
        request: &Json,
        timeout: Duration,
        answer: &mut dyn FnMut(&Json) -> Result<Json, String>,
    ) -> Result<Json, PythonWorkerError> {
        let role = self.role;
        let died = |detail: String| {
            PythonWorkerError::Worker(format!("the Python {role} worker stopped: {detail}"))
        };
        let now = std::time::Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(366 * 24 * 3600));
        self.send(request).map_err(|e| died(e.to_string()))?;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    return Err(PythonWorkerError::Timeout(timeout));
                }
                Err(RecvTimeoutError::Disconnected) => return Err(died("no reply".to_owned())),
            };
            let reply: Json =
                serde_json::from_str(&line).map_err(|e| died(format!("unreadable reply: {e}")))?;
            if let Some(question) = reply.get("ask") {
                let said = match answer(question) {
                    Ok(said) => said,
                    Err(message) => serde_json::json!({"ok": false, "error": {"message": message}}),
                };
                self.send(&said).map_err(|e| died(e.to_string()))?;
                continue;
            }
            if reply.get("ok").and_then(Json::as_bool) == Some(true) {
                return Ok(reply);
            }
            let error: PythonError =
                serde_json::from_value(reply.get("error").cloned().unwrap_or_default())
                    .map_err(|e| died(format!("unreadable error: {e}")))?;
            return Err(PythonWorkerError::Python(error));
        }
    }

    fn send(&mut self, message: &Json) -> std::io::Result<()> {
        writeln!(self.stdin, "{message}")?;
        self.stdin.flush()
    }
}

impl Drop for PythonWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `.py` files under `project_dir/directory`, sorted by path, that `public` keeps
/// (it sees the project-relative path's components after the directory's own); each with
/// its project-relative path in `/` form.
pub(crate) fn python_files(
    project_dir: &Path,
    directory: &str,
    public: impl Fn(&[String]) -> bool,
) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    collect(&project_dir.join(directory), &mut found);
    found.sort();
    found
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(project_dir).ok()?.to_path_buf();
            let inner: Vec<String> = relative
                .components()
                .skip(1)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            public(&inner).then(|| (path.clone(), relative.to_string_lossy().replace('\\', "/")))
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
