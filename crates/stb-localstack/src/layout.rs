//! Where the local stack keeps its state, logs and Python environment.

use std::env;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the state directory.
pub const STATE_DIR_ENV: &str = "STB_LOCAL_HOME";
/// Environment variable that overrides the Python virtual environment.
pub const VENV_ENV: &str = "STB_VENV";

/// The files of one stack instance, all under one state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub state_dir: PathBuf,
    pub venv_dir: PathBuf,
}

impl Layout {
    /// The user's default stack: `$STB_LOCAL_HOME`, else `$XDG_STATE_HOME/streambuild/local`,
    /// else `~/.local/state/streambuild/local`.
    #[must_use]
    pub fn default_for_user() -> Self {
        let state_dir = env::var_os(STATE_DIR_ENV).map_or_else(
            || xdg_dir("XDG_STATE_HOME", ".local/state").join("streambuild/local"),
            PathBuf::from,
        );
        Self::with_state_dir(state_dir)
    }

    /// A stack in `state_dir`, sharing the user's cached virtual environment.
    #[must_use]
    pub fn with_state_dir(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            state_dir: absolute(state_dir.into()),
            venv_dir: default_venv_dir(),
        }
    }

    #[must_use]
    pub fn state_file(&self) -> PathBuf {
        self.state_dir.join("stack.json")
    }

    /// `KEY=value` lines for shells and other tools.
    #[must_use]
    pub fn env_file(&self) -> PathBuf {
        self.state_dir.join("stack.env")
    }

    #[must_use]
    pub fn lock_file(&self) -> PathBuf {
        self.state_dir.join("stack.lock")
    }

    #[must_use]
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }

    #[must_use]
    pub fn clickhouse_dir(&self) -> PathBuf {
        self.state_dir.join("clickhouse")
    }

    #[must_use]
    pub fn kafka_dir(&self) -> PathBuf {
        self.state_dir.join("kafka")
    }

    #[must_use]
    pub fn server_source_dir(&self) -> PathBuf {
        self.state_dir.join("server")
    }

    #[must_use]
    pub fn python(&self) -> PathBuf {
        self.venv_dir.join("bin/python")
    }
}

/// The cached virtual environment: `$STB_VENV`, else `$XDG_CACHE_HOME/streambuild/venv`,
/// else `~/.cache/streambuild/venv`. It lives outside any checkout so fresh clones reuse it.
#[must_use]
pub fn default_venv_dir() -> PathBuf {
    env::var_os(VENV_ENV).map_or_else(
        || xdg_dir("XDG_CACHE_HOME", ".cache").join("streambuild/venv"),
        PathBuf::from,
    )
}

fn xdg_dir(variable: &str, fallback_under_home: &str) -> PathBuf {
    match env::var_os(variable) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home_dir().join(fallback_under_home),
    }
}

fn home_dir() -> PathBuf {
    env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
}

fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    env::current_dir().map_or(path.clone(), |cwd| cwd.join(&path))
}

/// Creates `dir` and its parents.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), crate::LocalStackError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::LocalStackError::io("creating directory", dir, e))
}
