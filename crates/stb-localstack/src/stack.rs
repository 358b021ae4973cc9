//! `up`, `down` and `status` for the whole stack, with its state and env files.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clickhouse::{self, ClickHouseOptions};
use crate::error::Component;
use crate::layout::{Layout, ensure_dir};
use crate::{LocalStackError, Progress, kafka, probe, process, python};

/// Ports and engine options for `up`.
#[derive(Debug, Clone)]
pub struct StackOptions {
    pub clickhouse: ClickHouseOptions,
    /// 0 picks a free port.
    pub kafka_port: u16,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            clickhouse: ClickHouseOptions::default(),
            kafka_port: 9092,
        }
    }
}

/// What `stack.json` records about the services this stack started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StateFile {
    clickhouse: Option<ClickHouseRecord>,
    kafka: Option<KafkaRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClickHouseRecord {
    pid: u32,
    port: u16,
    user: String,
    version: String,
    /// [`clickhouse::server_fingerprint`] of the code the server runs.
    #[serde(default)]
    server_fingerprint: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct KafkaRecord {
    pid: u32,
    port: u16,
}

/// The stack as `status` reports it (and as `--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct StackStatus {
    pub state_dir: PathBuf,
    pub env_file: PathBuf,
    pub clickhouse: ServiceStatus,
    pub kafka: ServiceStatus,
}

impl StackStatus {
    #[must_use]
    pub fn all_running(&self) -> bool {
        self.clickhouse.running && self.kafka.running
    }
}

/// One service's state.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    pub component: Component,
    pub running: bool,
    pub pid: Option<u32>,
    pub port: Option<u16>,
    /// `http://127.0.0.1:PORT` for ClickHouse, `127.0.0.1:PORT` for Kafka.
    pub address: Option<String>,
    pub user: Option<String>,
    pub version: Option<String>,
    pub log: PathBuf,
}

/// Starts whatever part of the stack is not running. Idempotent; safe to call from
/// several processes at once (they serialise on a lock file).
pub fn up(
    layout: &Layout,
    options: &StackOptions,
    progress: &mut dyn Progress,
) -> Result<StackStatus, LocalStackError> {
    ensure_dir(&layout.state_dir)?;
    let _lock = lock(layout)?;
    let mut state = read_state(layout)?;
    let marker = marker(layout);
    let mut clickhouse_alive = state
        .clickhouse
        .as_ref()
        .is_some_and(|r| process::is_running(r.pid, &marker));
    // A server started by another stb runs other code (a fix it lacks, a protocol detail):
    // replace it, on the same port so addresses already handed out stay right.
    let mut clickhouse_options = options.clickhouse.clone();
    if let Some(record) = state.clickhouse.as_ref().filter(|_| clickhouse_alive)
        && record.server_fingerprint != clickhouse::server_fingerprint()
    {
        progress.step("the ClickHouse server runs code from another stb version: restarting it");
        stop_one(Component::ClickHouse, record.pid, &marker, progress)?;
        if clickhouse_options.port == 0 {
            clickhouse_options.port = record.port;
        }
        state.clickhouse = None;
        write_state(layout, &state)?;
        clickhouse_alive = false;
    }
    let kafka_alive = state
        .kafka
        .as_ref()
        .is_some_and(|r| process::is_running(r.pid, &marker));
    if clickhouse_alive && kafka_alive {
        progress.step("the local stack is already running");
        return Ok(status_of(layout, &state));
    }
    python::ensure_environment(layout, progress)?;
    if !kafka_alive {
        let started = kafka::start(layout, options.kafka_port, progress)?;
        state.kafka = Some(KafkaRecord {
            pid: started.pid,
            port: started.port,
        });
        write_state(layout, &state)?;
    }
    if !clickhouse_alive {
        let started = clickhouse::start(layout, &clickhouse_options, progress)?;
        state.clickhouse = Some(ClickHouseRecord {
            pid: started.pid,
            port: started.port,
            user: clickhouse_options.user.clone(),
            version: started.version,
            server_fingerprint: clickhouse::server_fingerprint(),
        });
        write_state(layout, &state)?;
    }
    let status = status_of(layout, &state);
    write_env_file(layout, &status)?;
    Ok(status)
}

/// Stops both services (only the processes this stack started, by PID). Idempotent.
pub fn down(layout: &Layout, progress: &mut dyn Progress) -> Result<StackStatus, LocalStackError> {
    if !layout.state_dir.exists() {
        return Ok(status_of(layout, &StateFile::default()));
    }
    let _lock = lock(layout)?;
    let mut state = read_state(layout)?;
    let marker = marker(layout);
    if let Some(record) = state.clickhouse.take() {
        stop_one(Component::ClickHouse, record.pid, &marker, progress)?;
        write_state(layout, &state)?;
    }
    if let Some(record) = state.kafka.take() {
        stop_one(Component::Kafka, record.pid, &marker, progress)?;
        write_state(layout, &state)?;
    }
    let _ = fs::remove_file(layout.env_file());
    Ok(status_of(layout, &state))
}

/// Reads the state file and checks each recorded process. Starts and stops nothing.
pub fn status(layout: &Layout) -> Result<StackStatus, LocalStackError> {
    let state = read_state(layout)?;
    Ok(status_of(layout, &state))
}

fn stop_one(
    component: Component,
    pid: u32,
    marker: &str,
    progress: &mut dyn Progress,
) -> Result<(), LocalStackError> {
    if !process::is_running(pid, marker) {
        return Ok(());
    }
    progress.step(&format!("stopping the {component} (pid {pid})"));
    // The ClickHouse server flushes parts and logs on SIGTERM: give it time.
    process::stop(pid, marker, Duration::from_secs(20))
        .map_err(|_| LocalStackError::StopFailed { component, pid })
}

fn status_of(layout: &Layout, state: &StateFile) -> StackStatus {
    let marker = marker(layout);
    let clickhouse = state.clickhouse.as_ref();
    let clickhouse_running =
        clickhouse.is_some_and(|r| process::is_running(r.pid, &marker) && probe::port_open(r.port));
    let kafka = state.kafka.as_ref();
    let kafka_running =
        kafka.is_some_and(|r| process::is_running(r.pid, &marker) && probe::port_open(r.port));
    StackStatus {
        state_dir: layout.state_dir.clone(),
        env_file: layout.env_file(),
        clickhouse: ServiceStatus {
            component: Component::ClickHouse,
            running: clickhouse_running,
            pid: clickhouse.filter(|_| clickhouse_running).map(|r| r.pid),
            port: clickhouse.filter(|_| clickhouse_running).map(|r| r.port),
            address: clickhouse
                .filter(|_| clickhouse_running)
                .map(|r| format!("http://127.0.0.1:{}", r.port)),
            user: clickhouse
                .filter(|_| clickhouse_running)
                .map(|r| r.user.clone()),
            version: clickhouse
                .filter(|_| clickhouse_running)
                .map(|r| r.version.clone()),
            log: clickhouse::log_file(layout),
        },
        kafka: ServiceStatus {
            component: Component::Kafka,
            running: kafka_running,
            pid: kafka.filter(|_| kafka_running).map(|r| r.pid),
            port: kafka.filter(|_| kafka_running).map(|r| r.port),
            address: kafka
                .filter(|_| kafka_running)
                .map(|r| format!("127.0.0.1:{}", r.port)),
            user: None,
            version: kafka
                .filter(|_| kafka_running)
                .map(|_| "tansu 0.6.0".to_owned()),
            log: kafka::log_file(layout),
        },
    }
}

/// The `KEY=value` lines of `stack.env`. No secrets: the password stays in the caller's
/// environment.
#[must_use]
pub fn env_lines(status: &StackStatus) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    if let (Some(port), Some(user)) = (status.clickhouse.port, &status.clickhouse.user) {
        lines.push((
            "STB_LOCAL_CLICKHOUSE_URL".to_owned(),
            format!("http://127.0.0.1:{port}"),
        ));
        lines.push((
            "STB_LOCAL_CLICKHOUSE_HOST".to_owned(),
            "127.0.0.1".to_owned(),
        ));
        lines.push(("STB_LOCAL_CLICKHOUSE_PORT".to_owned(), port.to_string()));
        lines.push(("STB_LOCAL_CLICKHOUSE_USER".to_owned(), user.clone()));
    }
    if let Some(port) = status.kafka.port {
        lines.push((
            "STB_LOCAL_KAFKA_BROKERS".to_owned(),
            format!("127.0.0.1:{port}"),
        ));
    }
    lines
}

fn write_env_file(layout: &Layout, status: &StackStatus) -> Result<(), LocalStackError> {
    let text: String = env_lines(status)
        .iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect();
    write_atomically(&layout.env_file(), text.as_bytes())
}

fn read_state(layout: &Layout) -> Result<StateFile, LocalStackError> {
    let path = layout.state_file();
    match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| LocalStackError::CorruptState {
            path,
            detail: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile::default()),
        Err(e) => Err(LocalStackError::io("reading", path, e)),
    }
}

fn write_state(layout: &Layout, state: &StateFile) -> Result<(), LocalStackError> {
    let text = serde_json::to_vec_pretty(state).unwrap_or_default();
    write_atomically(&layout.state_file(), &text)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), LocalStackError> {
    let temporary = path.with_extension("tmp");
    fs::write(&temporary, bytes).map_err(|e| LocalStackError::io("writing", &temporary, e))?;
    fs::rename(&temporary, path).map_err(|e| LocalStackError::io("replacing", path, e))
}

fn lock(layout: &Layout) -> Result<File, LocalStackError> {
    let path = layout.lock_file();
    let file = File::create(&path).map_err(|e| LocalStackError::io("creating lock", &path, e))?;
    file.lock()
        .map_err(|e| LocalStackError::io("locking", &path, e))?;
    Ok(file)
}

fn marker(layout: &Layout) -> String {
    layout.state_dir.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_of_an_empty_state_dir_is_all_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::with_state_dir(dir.path());
        let status = status(&layout).expect("status");
        assert!(!status.clickhouse.running);
        assert!(!status.kafka.running);
        assert!(env_lines(&status).is_empty());
    }

    #[test]
    fn a_corrupt_state_file_is_reported_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::with_state_dir(dir.path());
        fs::write(layout.state_file(), "{not json").expect("write");
        let error = status(&layout).expect_err("corrupt");
        assert_eq!(error.code(), "STB-LOCAL-007");
        assert!(error.to_string().contains("stack.json"));
    }

    #[test]
    fn a_dead_recorded_pid_counts_as_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::with_state_dir(dir.path());
        let state = StateFile {
            clickhouse: Some(ClickHouseRecord {
                pid: u32::MAX - 1,
                port: 1,
                user: "default".to_owned(),
                version: "26.9.2.1".to_owned(),
                server_fingerprint: String::new(),
            }),
            kafka: None,
        };
        write_state(&layout, &state).expect("write");
        let status = status(&layout).expect("status");
        assert!(!status.clickhouse.running);
        assert_eq!(status.clickhouse.port, None);
    }
}
