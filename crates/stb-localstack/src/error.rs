//! Errors of the local stack, each with a stable code and a hint for the user.

use std::fmt;
use std::path::PathBuf;

/// What went wrong while managing the local stack.
#[derive(Debug, thiserror::Error)]
pub enum LocalStackError {
    #[error("no usable Python interpreter: {detail}")]
    PythonMissing { detail: String },
    #[error("could not install the Python packages of the local stack: {detail}")]
    InstallFailed { detail: String, log: PathBuf },
    #[error("port {port} on 127.0.0.1 is already in use")]
    PortInUse { port: u16, component: Component },
    #[error("the local {component} did not become ready: {detail}")]
    NotReady {
        component: Component,
        detail: String,
        log: PathBuf,
    },
    #[error("{action} failed for {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the local {component} (pid {pid}) did not stop")]
    StopFailed { component: Component, pid: u32 },
    #[error("the state file {path} is unreadable: {detail}")]
    CorruptState { path: PathBuf, detail: String },
    #[error("the embedded engine is not installed: {} is missing", venv.display())]
    EngineMissing { venv: PathBuf },
    #[error("the embedded engine did not start: {detail}")]
    ScratchFailed { detail: String },
}

/// One of the two services of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Component {
    ClickHouse,
    Kafka,
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ClickHouse => "ClickHouse server",
            Self::Kafka => "Kafka broker",
        })
    }
}

impl LocalStackError {
    /// The stable code users and scripts can match on.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::PythonMissing { .. } => "STB-LOCAL-001",
            Self::InstallFailed { .. } => "STB-LOCAL-002",
            Self::PortInUse { .. } => "STB-LOCAL-003",
            Self::NotReady { .. } => "STB-LOCAL-004",
            Self::Io { .. } => "STB-LOCAL-005",
            Self::StopFailed { .. } => "STB-LOCAL-006",
            Self::CorruptState { .. } => "STB-LOCAL-007",
            Self::EngineMissing { .. } => "STB-LOCAL-009",
            Self::ScratchFailed { .. } => "STB-LOCAL-004",
        }
    }

    /// What the user can do about it.
    #[must_use]
    pub fn hint(&self) -> String {
        match self {
            Self::PythonMissing { .. } => {
                "install Python 3.9 or newer with venv support (Debian: apt-get install python3 python3-venv), or set STB_PYTHON to an interpreter".to_owned()
            }
            Self::InstallFailed { log, .. } => format!(
                "read {} for pip's output; check that PyPI is reachable, then run `stb local up` again",
                log.display()
            ),
            Self::PortInUse { component, .. } => {
                let flag = match component {
                    Component::ClickHouse => "--clickhouse-port",
                    Component::Kafka => "--kafka-port",
                };
                format!("stop whatever listens there, or pass {flag} <PORT> (0 picks a free port)")
            }
            Self::NotReady { log, .. } => format!(
                "read {} for the service's own output; `stb local down` cleans up",
                log.display()
            ),
            Self::Io { .. } => "check that the state directory is writable (set it with --state-dir or STB_LOCAL_HOME)".to_owned(),
            Self::StopFailed { pid, .. } => format!(
                "the process ignored SIGTERM and SIGKILL; inspect it with `ps -p {pid}`"
            ),
            Self::CorruptState { path, .. } => format!(
                "stop any services listed in it by hand, then delete {}",
                path.display()
            ),
            Self::ScratchFailed { .. } => "check that `stb local up` starts the same engine (its log says more); a Python environment without chDB is reinstalled by `stb local up`".to_owned(),
            Self::EngineMissing { venv } => format!(
                "run `stb local up` once: it installs the engine (about 1 GB) into {}; or point STB_VENV at an environment that has it",
                venv.display()
            ),
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
