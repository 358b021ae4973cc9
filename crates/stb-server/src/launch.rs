//! The one piece of work the server still hands to the `stb` binary itself: a build (`stb
//! build --auto-approve --events`, one at a time), as a child process pinned to the
//! server's project, target and database. The child is the same code the CLI runs, so a
//! build from the API keeps every guarantee of one from a terminal: admission, the target
//! lock, the records. Everything else (plan previews, deployments, promotions, the
//! janitor) runs in the server's own process.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;

use axum::http::StatusCode;

use crate::error::ApiError;

/// How to run `stb` for this server's project.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The `stb` binary (the server's own executable).
    pub exe: PathBuf,
    pub project_dir: PathBuf,
    pub target: String,
    pub database: String,
    /// `--vars` as given to `stb dev`.
    pub vars: Option<String>,
    /// Connection settings for the child, as `STREAMBUILD_CLICKHOUSE_*` variables (never
    /// argv: a password would show in the process list).
    pub env: Vec<(String, String)>,
}

/// The last build this server started: its invocation id, process, where its stderr goes
/// and, once it ended, its exit code.
struct Launched {
    id: String,
    child: std::process::Child,
    stderr: PathBuf,
    exit: Option<i32>,
}

/// The build this server started last, running or ended.
#[derive(Default)]
pub struct Builds {
    current: Mutex<Option<Launched>>,
}

/// What `GET /api/build/current` says of that build.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildState {
    pub invocation_id: String,
    pub running: bool,
    pub exit_code: Option<i32>,
    /// The last 50 lines it wrote to stderr (a build that fails before it records anything
    /// says why only there).
    pub stderr: Vec<String>,
}

/// Lines of a child's stderr kept for the feed.
const STDERR_TAIL: usize = 50;

impl Launcher {
    fn command(&self, args: &[String]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.exe);
        command.args(args);
        command.arg("--project-dir").arg(&self.project_dir).args([
            "--target",
            &self.target,
            "--database",
            &self.database,
        ]);
        if let Some(vars) = &self.vars {
            command.args(["--vars", vars]);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Starts `stb build --auto-approve --events <args>` as run `invocation_id`, owned by
    /// `owner`, unless a build this server started is still running.
    ///
    /// # Errors
    /// 409 while another build of this server runs; the child could not start.
    pub fn start_build(
        &self,
        builds: &Builds,
        invocation_id: &str,
        owner: &str,
        authorised_pipelines: &[String],
        args: &[String],
    ) -> Result<(), ApiError> {
        let mut current = builds
            .current
            .lock()
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "lock poisoned"))?;
        if let Some(Launched {
            id: running, child, ..
        }) = current.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                detail: serde_json::json!({
                    "message": format!("Run {running} started from this server is still running. Wait for it to finish or cancel it from Runs."),
                    "invocationId": running,
                }),
            });
        }
        let mut all = vec![
            "build".to_owned(),
            "--auto-approve".to_owned(),
            "--events".to_owned(),
        ];
        all.extend(args.iter().cloned());
        let display = format!("stb {}", all.join(" "));
        if let Some(previous) = current.take() {
            let _ = std::fs::remove_file(&previous.stderr);
        }
        let stderr = std::env::temp_dir().join(format!("stb-dev-build-{invocation_id}.log"));
        let stderr_file = std::fs::File::create(&stderr).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot create {}: {e}", stderr.display()),
            )
        })?;
        let child = self
            .command(&all)
            .env("STREAMBUILD_RUN_INVOCATION_ID", invocation_id)
            .env("STREAMBUILD_RUN_OWNER", owner)
            .env("STREAMBUILD_RUN_DISPLAY_COMMAND", display)
            // The child refuses to build beyond what was authorised (its own re-plan may
            // have grown since the server's).
            .env(
                "STREAMBUILD_EXPECTED_BUILD_PIPELINE_SCOPE",
                serde_json::to_string(authorised_pipelines).unwrap_or_else(|_| "[]".into()),
            )
            // Its events reach the warehouse; the feed reads them there. Its stderr says
            // why a build that never recorded anything did not start.
            .stdout(Stdio::null())
            .stderr(stderr_file)
            .spawn()
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot start stb build: {e}"),
                )
            })?;
        *current = Some(Launched {
            id: invocation_id.to_owned(),
            child,
            stderr,
            exit: None,
        });
        Ok(())
    }
}

impl Builds {
    /// The run this server's build child is, while it runs.
    #[must_use]
    pub fn running(&self) -> Option<String> {
        let mut current = self.current.lock().ok()?;
        let launched = current.as_mut()?;
        matches!(launched.child.try_wait(), Ok(None)).then(|| launched.id.clone())
    }

    /// Collects a finished child's exit code (so it leaves no zombie); the record stays for
    /// `current`.
    pub fn reap(&self) {
        if let Ok(mut current) = self.current.lock()
            && let Some(launched) = current.as_mut()
            && let Ok(Some(status)) = launched.child.try_wait()
        {
            launched.exit = Some(status.code().unwrap_or(-1));
        }
    }

    /// The last build this server started, with the tail of its stderr; `hide` is removed
    /// from it (the warehouse password, were it ever printed).
    #[must_use]
    pub fn current(&self, hide: &[&str]) -> Option<BuildState> {
        self.reap();
        let current = self.current.lock().ok()?;
        let launched = current.as_ref()?;
        let text = std::fs::read_to_string(&launched.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(STDERR_TAIL)..]
            .iter()
            .map(|line| {
                hide.iter()
                    .filter(|secret| !secret.is_empty())
                    .fold((*line).to_owned(), |line, secret| {
                        line.replace(secret, "<redacted>")
                    })
            })
            .collect();
        Some(BuildState {
            invocation_id: launched.id.clone(),
            running: launched.exit.is_none(),
            exit_code: launched.exit,
            stderr: tail,
        })
    }
}
