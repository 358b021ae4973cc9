//! Harness for integration tests against the real local stack.
//!
//! - [`stack`] starts the test stack once per test run (or reuses a running one) and hands
//!   every test its addresses. Test processes serialise on the stack's lock file, so
//!   `cargo nextest` (one process per test) and `cargo test` (threads) both work.
//! - [`unique_name`] and [`TestDatabase`] give each test its own database and topic names,
//!   so tests run in parallel without seeing each other's data.
//! - A stack that cannot start fails the test with the stack's own error code and hint: an
//!   integration test never silently skips.

pub mod kafka;
mod postgres;
mod private_server;
pub mod reference;

pub use postgres::{postgres_database_url, postgres_url};
pub use private_server::PrivateClickHouse;
pub use stb_localstack::clickhouse::SystemLogs;

use std::sync::OnceLock;
use std::time::Duration;

use stb_localstack::clickhouse::ClickHouseOptions;
use stb_localstack::{Layout, StackOptions};

/// Environment variable that overrides the test stack's state directory.
pub const TEST_STACK_DIR_ENV: &str = "STB_TEST_STACK_DIR";

/// Addresses of the running test stack.
#[derive(Debug, Clone)]
pub struct TestStack {
    pub layout: Layout,
    pub clickhouse_port: u16,
    /// `http://127.0.0.1:PORT`
    pub clickhouse_url: String,
    /// `127.0.0.1:PORT`
    pub kafka_brokers: String,
}

/// The state directory of the test stack: `$STB_TEST_STACK_DIR`, else
/// `~/.cache/streambuild/test-stack` (kept apart from the user's own `stb local` stack).
#[must_use]
pub fn test_layout() -> Layout {
    let state_dir = std::env::var_os(TEST_STACK_DIR_ENV).map_or_else(
        || {
            stb_localstack::layout::default_venv_dir()
                .parent()
                .map_or_else(
                    || std::path::PathBuf::from("/tmp/streambuild-test-stack"),
                    |cache| cache.join("test-stack"),
                )
        },
        std::path::PathBuf::from,
    );
    Layout::with_state_dir(state_dir)
}

/// The shared test stack, started on first use.
///
/// # Panics
/// When the stack cannot start: the test fails with the stack's error code and hint.
pub fn stack() -> &'static TestStack {
    static STACK: OnceLock<TestStack> = OnceLock::new();
    STACK.get_or_init(|| {
        let layout = test_layout();
        let options = StackOptions {
            clickhouse: ClickHouseOptions {
                port: 0,
                ..ClickHouseOptions::default()
            },
            kafka_port: 0,
        };
        let status = match stb_localstack::up(&layout, &options, &mut stb_localstack::Silent) {
            Ok(status) => status,
            Err(error) => panic!(
                "the local test stack could not start (CI={}): error[{}]: {error}\n  hint: {}",
                std::env::var("CI").unwrap_or_default(),
                error.code(),
                error.hint()
            ),
        };
        let (Some(clickhouse_port), Some(kafka_port)) = (status.clickhouse.port, status.kafka.port)
        else {
            panic!("the test stack reported no ports: {status:?}");
        };
        TestStack {
            layout,
            clickhouse_port,
            clickhouse_url: format!("http://127.0.0.1:{clickhouse_port}"),
            kafka_brokers: format!("127.0.0.1:{kafka_port}"),
        }
    })
}

/// The directory of the package whose test is running, as cargo and nextest give it when
/// they run the test. Not `env!("CARGO_MANIFEST_DIR")`: that is fixed when the test is
/// compiled, and a test binary compiled from another checkout sharing the target directory
/// (a CI clone, since deleted) would read that checkout's files.
///
/// # Panics
/// Outside `cargo test` / `cargo nextest`, which always set it.
#[must_use]
pub fn package_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .expect("cargo sets CARGO_MANIFEST_DIR when it runs a test")
}

/// `prefix_` followed by 12 random hex digits: unique across tests and runs.
#[must_use]
pub fn unique_name(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}_{}", &id[..12])
}

/// A blocking HTTP client for raw ClickHouse requests.
#[must_use]
pub fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("an HTTP client")
}

/// Runs `sql` on the test stack and returns the body.
///
/// # Panics
/// When the server answers with anything but 200: the test cannot go on.
pub fn execute(sql: &str) -> String {
    execute_at(&stack().clickhouse_url, sql)
}

/// Runs `sql` on the ClickHouse server at `url` and returns the body.
///
/// # Panics
/// When the server answers with anything but 200: the test cannot go on.
pub fn execute_at(url: &str, sql: &str) -> String {
    let response = http()
        .post(url)
        .body(sql.to_owned())
        .send()
        .unwrap_or_else(|e| panic!("request failed for {sql}: {e}"));
    let status = response.status();
    let body = response.text().unwrap_or_default();
    assert!(status.is_success(), "{sql} failed with {status}: {body}");
    body
}

/// A database of its own for one test, dropped when the test ends.
#[derive(Debug)]
pub struct TestDatabase {
    pub name: String,
}

impl TestDatabase {
    /// Creates `t_<prefix>_<random>` on the test stack.
    #[must_use]
    pub fn create(prefix: &str) -> Self {
        let name = unique_name(&format!("t_{prefix}"));
        execute(&format!("CREATE DATABASE {name}"));
        Self { name }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Best effort: a failing test should show its own failure, not a cleanup error.
        let _ = http()
            .post(&stack().clickhouse_url)
            .body(format!("DROP DATABASE IF EXISTS {} SYNC", self.name))
            .send();
    }
}

/// Polls `condition` every 100 ms until it holds or `limit` passes. Returns whether it held.
pub fn wait_for(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A temporary project directory holding `files` (project-relative path, text).
///
/// # Panics
/// When the files cannot be written.
#[must_use]
pub fn project_dir<P: AsRef<str>, T: AsRef<str>>(files: &[(P, T)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let full = dir.path().join(path.as_ref());
        std::fs::create_dir_all(full.parent().expect("a parent directory")).expect("mkdir");
        std::fs::write(full, text.as_ref()).expect("write");
    }
    dir
}

/// The environment that points `stb` at the test stack's ClickHouse.
#[must_use]
pub fn warehouse_env() -> [(&'static str, String); 2] {
    [
        ("STREAMBUILD_CLICKHOUSE_HOST", "127.0.0.1".to_owned()),
        (
            "STREAMBUILD_CLICKHOUSE_PORT",
            stack().clickhouse_port.to_string(),
        ),
    ]
}

/// Runs this workspace's `stb` on the project in `dir` against the test stack, with
/// `input` as its standard input (answers to its questions). Builds wait on evidence for
/// inserts that began before their views, as they do by default.
#[must_use]
pub fn stb_on_project(dir: &std::path::Path, args: &[&str], input: &str) -> std::process::Output {
    stb_on_project_with(dir, args, input, &[])
}

/// [`stb_on_project`] with `env` set too.
#[must_use]
pub fn stb_on_project_with(
    dir: &std::path::Path,
    args: &[&str],
    input: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    assert_cmd::Command::cargo_bin("stb")
        .expect("the stb binary")
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(warehouse_env())
        .env_remove("STREAMBUILD_LIVE_STABILIZATION_SECONDS")
        .envs(env.iter().copied())
        .write_stdin(input)
        .output()
        .expect("stb runs")
}

/// The environment that makes a run silent for two seconds count as stopped (the signal
/// window is 45 s otherwise): tests that kill builds recover them without waiting 45 s.
/// The 45 s default itself is tested where the window is the subject.
pub const SHORT_SIGNAL_WINDOW: [(&str, &str); 1] = [("STREAMBUILD_RUN_SIGNAL_WINDOW_SECONDS", "2")];

/// How long after its last event a killed run counts as stopped under
/// [`SHORT_SIGNAL_WINDOW`], with a margin for the warehouse's clock.
pub const SHORT_SIGNAL_SILENCE: Duration = Duration::from_millis(2_500);

/// Starts this workspace's `stb` with `args` on the project in `dir` in the background, as
/// run `invocation`, with a one-second timed stabilisation (a statement a test can stop
/// a build in).
#[must_use]
pub fn spawn_on_project(
    dir: &std::path::Path,
    args: &[&str],
    invocation: &str,
) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(warehouse_env())
        .env("STREAMBUILD_LIVE_STABILIZATION_SECONDS", "1")
        .env("STREAMBUILD_RUN_INVOCATION_ID", invocation)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns")
}

/// `work` for each of `points`, two at a time side by side (a kill-at-every-statement test
/// prepares and kills one target per point), the results in the points' order.
pub fn two_at_a_time<T: Send>(points: &[u64], work: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let mut done = Vec::with_capacity(points.len());
    for chunk in points.chunks(2) {
        std::thread::scope(|scope| {
            let running: Vec<_> = chunk
                .iter()
                .map(|&point| {
                    let work = &work;
                    scope.spawn(move || work(point))
                })
                .collect();
            for one in running {
                done.push(one.join().expect("a point's work"));
            }
        });
    }
    done
}

/// The files in `dir` (a run's `steps/`), sorted by name: the order they run in.
#[must_use]
pub fn sorted_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    files
}

/// Waits until run `invocation` in `database` has completed `k` statements, by its own
/// events (at most 60 s).
pub fn wait_for_statements(database: &str, invocation: &str, k: u64) {
    let started = std::time::Instant::now();
    // Once the table exists it stays: each poll after that is one query, not two (this
    // loop polls every few milliseconds, so its queries are a load of their own).
    let mut exists = false;
    loop {
        exists = exists
            || execute(&format!(
                "SELECT count() FROM system.tables WHERE database = '{database}' AND name = '_streambuild_run_events' FORMAT TSV"
            ))
            .trim()
                != "0";
        let done = if !exists {
            0
        } else {
            execute(&format!(
                "SELECT countIf(event_kind = 'statement_completed') FROM {database}._streambuild_run_events WHERE invocation_id = '{invocation}' FORMAT TSV"
            ))
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
        };
        if done >= k {
            return;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "statement {k} never completed"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A cluster's statement in the form the one-server local engine accepts: without
/// ` ON CLUSTER <cluster>`, and a replicated engine in its plain form (its coordination
/// path and replica dropped): the engine cannot be a replica (docs/clusters.md).
#[must_use]
pub fn on_one_server(statement: &str, cluster: &str) -> String {
    let plain = statement.replace(&format!(" ON CLUSTER {cluster}"), "");
    let Some(at) = plain.find("ENGINE = Replicated") else {
        return plain;
    };
    let rest = &plain[at + "ENGINE = Replicated".len()..];
    let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else {
        return plain;
    };
    let arguments: Vec<&str> = rest[open + 1..close].splitn(3, ", ").collect();
    let kept = arguments.get(2).copied().unwrap_or_default();
    format!(
        "{}ENGINE = {}({kept}){}",
        &plain[..at],
        &rest[..open],
        &rest[close + 1..]
    )
}
