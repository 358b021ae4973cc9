//! A ClickHouse server of a test's own, for tests that restart it or change its users.

use std::time::{Duration, Instant};

use stb_localstack::clickhouse::{self, ClickHouseOptions, StartedClickHouse, SystemLogs};
use stb_localstack::{Layout, LocalStackError, Silent, probe, process};

/// A private server in a temporary state directory, stopped when dropped.
pub struct PrivateClickHouse {
    _dir: tempfile::TempDir,
    pub layout: Layout,
    pub options: ClickHouseOptions,
    pub started: StartedClickHouse,
}

impl PrivateClickHouse {
    /// Starts a server on a free port with `user` / `password`.
    ///
    /// # Panics
    /// When the server cannot start.
    #[must_use]
    pub fn start(user: &str, password: Option<&str>) -> Self {
        Self::start_with(ClickHouseOptions {
            port: 0,
            user: user.to_owned(),
            password: password.map(str::to_owned),
            ..ClickHouseOptions::default()
        })
    }

    /// Starts a server for the `default` user that keeps only `logs`.
    ///
    /// # Panics
    /// When the server cannot start.
    #[must_use]
    pub fn with_system_logs(logs: SystemLogs) -> Self {
        Self::start_with(ClickHouseOptions {
            port: 0,
            system_logs: logs,
            ..ClickHouseOptions::default()
        })
    }

    fn start_with(options: ClickHouseOptions) -> Self {
        // Shares the cached Python environment; the test stack has made sure it exists.
        let _ = crate::stack();
        let dir = tempfile::tempdir().expect("a temporary state directory");
        let layout = Layout::with_state_dir(dir.path());
        let started = clickhouse::start(&layout, &options, &mut Silent).unwrap_or_else(|e| {
            panic!(
                "private server: error[{}]: {e}\n  hint: {}",
                e.code(),
                e.hint()
            )
        });
        Self {
            _dir: dir,
            layout,
            options,
            started,
        }
    }

    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.started.port)
    }

    /// Stops the server (SIGTERM, as `stb local down` does) and starts it again on the same
    /// data directory, on the same port when it is free again.
    ///
    /// The port is free for a moment between the two, so another test's server that asks
    /// the kernel for any port may be given it; then this one moves to another port (the
    /// data directory is what a restart is about) rather than fail the test.
    ///
    /// # Panics
    /// When the server does not stop or does not come back.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.started.port;
        let deadline = Instant::now() + Duration::from_secs(10);
        while probe::port_open(port) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let on = |port| ClickHouseOptions {
            port,
            ..self.options.clone()
        };
        let started = match clickhouse::start(&self.layout, &on(port), &mut Silent) {
            Err(LocalStackError::PortInUse { .. }) => {
                clickhouse::start(&self.layout, &on(0), &mut Silent)
            }
            other => other,
        };
        self.started = started
            .unwrap_or_else(|e| panic!("restarting the private server: error[{}]: {e}", e.code()));
    }

    fn stop(&self) {
        let marker = self.layout.state_dir.to_string_lossy().into_owned();
        process::stop(self.started.pid, &marker, Duration::from_secs(20)).unwrap_or_else(|_| {
            panic!("the private server (pid {}) did not stop", self.started.pid)
        });
    }
}

impl Drop for PrivateClickHouse {
    fn drop(&mut self) {
        let marker = self.layout.state_dir.to_string_lossy().into_owned();
        let _ = process::stop(self.started.pid, &marker, Duration::from_secs(20));
    }
}
