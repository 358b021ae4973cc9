//! The local ClickHouse server: our Python HTTP front end (`localstack/chhttp`) over chDB.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::Component;
use crate::layout::{Layout, ensure_dir};
use crate::{LocalStackError, Progress, probe, process};

/// The server's sources, embedded so the `stb` binary works from any directory.
const SOURCES: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../localstack/chhttp/__init__.py"),
    ),
    (
        "__main__.py",
        include_str!("../../../localstack/chhttp/__main__.py"),
    ),
    (
        "compression.py",
        include_str!("../../../localstack/chhttp/compression.py"),
    ),
    (
        "config.py",
        include_str!("../../../localstack/chhttp/config.py"),
    ),
    (
        "engine.py",
        include_str!("../../../localstack/chhttp/engine.py"),
    ),
    (
        "errors.py",
        include_str!("../../../localstack/chhttp/errors.py"),
    ),
    (
        "execute.py",
        include_str!("../../../localstack/chhttp/execute.py"),
    ),
    (
        "request.py",
        include_str!("../../../localstack/chhttp/request.py"),
    ),
    (
        "server.py",
        include_str!("../../../localstack/chhttp/server.py"),
    ),
    (
        "sqltext.py",
        include_str!("../../../localstack/chhttp/sqltext.py"),
    ),
];

/// Identifies the embedded server code, so `up` can replace a server started by an older
/// `stb` (FNV-1a over every source file; stable across builds and platforms).
#[must_use]
pub fn server_fingerprint() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, text) in SOURCES {
        for byte in name.bytes().chain([0]).chain(text.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Environment variable the server reads its password from (never a command-line argument).
pub const PASSWORD_ENV: &str = "STB_LOCAL_CLICKHOUSE_PASSWORD";

/// The engine's first start imports a 500 MB library; give a cold disk time.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ClickHouseOptions {
    /// 0 lets the server pick a free port.
    pub port: u16,
    pub user: String,
    /// The user's password; handed to the server through its environment, never argv.
    pub password: Option<String>,
    /// How often Kafka engine tables push rows into their materialized views.
    pub stream_flush_interval_ms: u32,
    /// Which system logs the engine keeps.
    pub system_logs: SystemLogs,
    /// A scratch server: stop once this process is gone, and delete this directory once
    /// stopped.
    pub scratch: Option<(u32, std::path::PathBuf)>,
}

/// The system logs a server keeps: all of them for the local stack; less for tests of how
/// StreamBuild does on a server configured to keep less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SystemLogs {
    /// `query_log`, `part_log` and `query_views_log`.
    #[default]
    All,
    /// `query_log` and `part_log`, no `query_views_log`.
    PartLog,
    /// None.
    None,
}

impl SystemLogs {
    fn as_arg(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::PartLog => "part_log",
            Self::None => "none",
        }
    }
}

impl Default for ClickHouseOptions {
    fn default() -> Self {
        Self {
            port: 8123,
            user: "default".to_owned(),
            password: None,
            stream_flush_interval_ms: 500,
            system_logs: SystemLogs::All,
            scratch: None,
        }
    }
}

/// A server that answered its readiness probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedClickHouse {
    pub pid: u32,
    pub port: u16,
    pub version: String,
}

#[derive(Deserialize)]
struct ReadyFile {
    port: u16,
    pid: u32,
    version: String,
}

/// Starts the server for `layout` and waits until it answers `/ping`.
pub fn start(
    layout: &Layout,
    options: &ClickHouseOptions,
    progress: &mut dyn Progress,
) -> Result<StartedClickHouse, LocalStackError> {
    if options.port != 0 && probe::port_open(options.port) {
        return Err(LocalStackError::PortInUse {
            port: options.port,
            component: Component::ClickHouse,
        });
    }
    let dir = layout.clickhouse_dir();
    ensure_dir(&dir)?;
    ensure_dir(&layout.logs_dir())?;
    write_sources(&layout.server_source_dir().join("chhttp"))?;
    let ready_file = dir.join("ready.json");
    let _ = fs::remove_file(&ready_file);
    let log = log_file(layout);
    progress.step(&format!(
        "starting the ClickHouse server (chDB), log: {}",
        log.display()
    ));

    let mut command = Command::new(layout.python());
    command
        .current_dir(&dir)
        .env("PYTHONPATH", layout.server_source_dir())
        .env("PYTHONUNBUFFERED", "1")
        .env(PASSWORD_ENV, options.password.as_deref().unwrap_or(""))
        .args(["-m", "chhttp", "--host", "127.0.0.1"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--port")
        .arg(options.port.to_string())
        .arg("--user")
        .arg(&options.user)
        .arg("--ready-file")
        .arg(&ready_file)
        .arg("--engine-log")
        .arg(layout.logs_dir().join("clickhouse-engine.log"))
        .arg("--stream-flush-interval-ms")
        .arg(options.stream_flush_interval_ms.to_string())
        .arg("--system-logs")
        .arg(options.system_logs.as_arg());
    if let Some((parent, remove)) = &options.scratch {
        command
            .arg("--exit-with-pid")
            .arg(parent.to_string())
            .arg("--remove-on-exit")
            .arg(remove);
    }
    let pid = process::spawn_service(command, &log)?;
    let marker = layout.state_dir.to_string_lossy().into_owned();
    wait_until_ready(pid, &marker, &ready_file, &log).inspect_err(|_| {
        // Never leave a half-started server behind: nothing records it yet.
        let _ = process::stop(pid, &marker, Duration::from_secs(10));
    })
}

fn wait_until_ready(
    pid: u32,
    marker: &str,
    ready_file: &Path,
    log: &Path,
) -> Result<StartedClickHouse, LocalStackError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let not_ready = |detail: String| LocalStackError::NotReady {
        component: Component::ClickHouse,
        detail,
        log: log.to_path_buf(),
    };
    loop {
        if let Some(ready) = read_ready_file(ready_file).filter(|ready| ready.pid == pid) {
            return match probe::http_get(ready.port, "/ping") {
                Ok((200, body)) if body == "Ok.\n" => Ok(StartedClickHouse {
                    pid,
                    port: ready.port,
                    version: ready.version,
                }),
                Ok((status, body)) => Err(not_ready(format!("/ping answered {status}: {body}"))),
                Err(error) => Err(not_ready(format!("/ping failed: {error}"))),
            };
        }
        if !process::is_running(pid, marker) {
            return Err(not_ready(format!(
                "the process exited; last lines of its log:\n{}",
                process::log_tail(log, 12)
            )));
        }
        if Instant::now() > deadline {
            return Err(not_ready(format!(
                "no answer within {}s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_ready_file(path: &Path) -> Option<ReadyFile> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn write_sources(dir: &Path) -> Result<(), LocalStackError> {
    ensure_dir(dir)?;
    for (name, text) in SOURCES {
        let path = dir.join(name);
        if fs::read_to_string(&path).is_ok_and(|existing| existing == *text) {
            continue;
        }
        fs::write(&path, text).map_err(|e| LocalStackError::io("writing", &path, e))?;
    }
    Ok(())
}

/// Where the server's own output goes.
#[must_use]
pub fn log_file(layout: &Layout) -> std::path::PathBuf {
    layout.logs_dir().join("clickhouse.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_hex() {
        let fingerprint = server_fingerprint();
        assert_eq!(fingerprint.len(), 16);
        assert_eq!(fingerprint, server_fingerprint());
    }

    #[test]
    fn every_server_module_is_embedded() {
        let on_disk: std::collections::BTreeSet<String> =
            fs::read_dir(stb_test_support::package_dir().join("../../localstack/chhttp"))
                .expect("server sources")
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".py"))
                .collect();
        let embedded: std::collections::BTreeSet<String> =
            SOURCES.iter().map(|(name, _)| (*name).to_owned()).collect();
        assert_eq!(on_disk, embedded);
    }
}
