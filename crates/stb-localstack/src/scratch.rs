//! A throwaway engine: the local stack's ClickHouse server (chDB) started on a free port in
//! a temporary state directory, for work that needs the engine but no warehouse (`stb
//! compile --validate` checks the project's SQL on it). It keeps no system logs. It is
//! stopped, and its directory removed, when the handle is dropped; and because a process
//! killed outright drops nothing, the server also stops by itself once the process that
//! started it is gone, and deletes its directory then.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clickhouse::{ClickHouseOptions, SystemLogs};
use crate::{Layout, LocalStackError, Progress, process};

/// Scratch directories are `stb-scratch-<pid>-<nanos>` under the temporary directory.
const PREFIX: &str = "stb-scratch-";

/// A running scratch server.
#[derive(Debug)]
pub struct ScratchEngine {
    pub port: u16,
    pub version: String,
    pid: u32,
    layout: Layout,
}

impl ScratchEngine {
    /// Starts one. The Python environment must exist already (`stb local up` makes it):
    /// a check should not install a gigabyte unasked.
    ///
    /// # Errors
    /// No environment (`STB-LOCAL-009`), or the server did not start (`STB-LOCAL-004`,
    /// with the end of its log).
    pub fn start(progress: &mut dyn Progress) -> Result<Self, LocalStackError> {
        let temp = std::env::temp_dir();
        remove_abandoned(&temp);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let me = std::process::id();
        let layout = Layout::with_state_dir(temp.join(format!("{PREFIX}{me}-{nanos}")));
        if !layout.python().exists() {
            return Err(LocalStackError::EngineMissing {
                venv: layout.venv_dir.clone(),
            });
        }
        let options = ClickHouseOptions {
            port: 0,
            system_logs: SystemLogs::None,
            scratch: Some((me, layout.state_dir.clone())),
            ..ClickHouseOptions::default()
        };
        match crate::clickhouse::start(&layout, &options, progress) {
            Ok(started) => Ok(Self {
                port: started.port,
                version: started.version,
                pid: started.pid,
                layout,
            }),
            Err(error) => {
                // A server that did not answer is said with the end of its log, read
                // before its directory goes.
                let error = match error {
                    LocalStackError::NotReady { detail, log, .. } => {
                        let detail = if detail.contains("last lines of its log") {
                            detail
                        } else {
                            format!(
                                "{detail}; last lines of its log:\n{}",
                                process::log_tail(&log, 12)
                            )
                        };
                        LocalStackError::ScratchFailed { detail }
                    }
                    other => other,
                };
                let _ = std::fs::remove_dir_all(&layout.state_dir);
                Err(error)
            }
        }
    }
}

impl Drop for ScratchEngine {
    fn drop(&mut self) {
        let marker = self.layout.state_dir.to_string_lossy().into_owned();
        let _ = process::stop(self.pid, &marker, Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&self.layout.state_dir);
    }
}

/// Deletes scratch directories whose `stb` is gone and whose server no longer runs (one
/// that lost its process before it could start its watch, for instance).
fn remove_abandoned(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let dir: PathBuf = entry.path();
        let marker = dir.to_string_lossy().into_owned();
        let owner_alive = Path::new("/proc").join(owner.to_string()).exists();
        if !owner_alive && !server_running(&dir, &marker) {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Whether the server a scratch directory names (its ready file) still runs.
fn server_running(dir: &Path, marker: &str) -> bool {
    std::fs::read_to_string(dir.join("clickhouse/ready.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|ready| ready["pid"].as_u64())
        .and_then(|pid| u32::try_from(pid).ok())
        .is_some_and(|pid| process::is_running(pid, marker))
}
