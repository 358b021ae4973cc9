//! A throwaway engine: the local stack's ClickHouse server (chDB) started on a free port in
//! a temporary state directory, for work that needs the engine but no warehouse (`stb
//! compile --validate` checks the project's SQL on it). It keeps no system logs, and it is
//! stopped, its directory removed, when the handle is dropped.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clickhouse::{ClickHouseOptions, SystemLogs};
use crate::{Layout, LocalStackError, Progress, process};

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
    /// No environment (`STB-LOCAL-009`), or the server did not start.
    pub fn start(progress: &mut dyn Progress) -> Result<Self, LocalStackError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let state_dir: PathBuf =
            std::env::temp_dir().join(format!("stb-scratch-{}-{nanos}", std::process::id()));
        let layout = Layout::with_state_dir(state_dir);
        if !layout.python().exists() {
            return Err(LocalStackError::EngineMissing {
                venv: layout.venv_dir.clone(),
            });
        }
        let options = ClickHouseOptions {
            port: 0,
            system_logs: SystemLogs::None,
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
