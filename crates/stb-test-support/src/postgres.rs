//! The PostgreSQL server of the control-store tests, started once by
//! `scripts/test-postgres.sh` (which `scripts/test.sh` also calls) and shared by every test
//! process: each test makes a database of its own.

use std::sync::OnceLock;

/// The server's URL (`postgresql://stb@127.0.0.1:PORT/postgres`): from
/// `STB_TEST_POSTGRES_URL` when set, else the script starts the cluster or finds it running.
///
/// # Panics
/// When the server cannot be started: the tests that need it fail, never skip.
#[must_use]
pub fn postgres_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("STB_TEST_POSTGRES_URL")
            && !url.trim().is_empty()
        {
            return url.trim().to_owned();
        }
        let script = crate::package_dir().join("../../scripts/test-postgres.sh");
        let output = std::process::Command::new(&script)
            .arg("start")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "the test PostgreSQL server did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    })
}

/// The URL of database `name` on the test server.
#[must_use]
pub fn postgres_database_url(name: &str) -> String {
    let base = postgres_url();
    let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
    format!("{server}/{name}")
}
