//! Builds started from the API, run in the server's own process: the same
//! [`stb_engine::build::operation::build`] `stb build` calls, with the scope the request
//! carried (parsed once, never turned into flags), on a thread of their own, one at a time.
//! Nobody is asked anything: the reviewed plan's hash, `allowShrink` and the protected
//! pipelines' tokens decide, as `stb build --auto-approve` does. Its events reach the
//! warehouse, where the feed reads them; `stb runs cancel` (or the API's cancel) stops it
//! through those events. When the server stops, a running build is asked to stop at its
//! next statement boundary and given back as it found the target before the server exits.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use stb_engine::EngineError;
use stb_engine::build::operation::{
    Approval, Frontend, Outcome, PhaseResult, Request, unattended_confirm, unattended_shrink,
};
use stb_engine::build::records::{EventHook, WarningHook};
use stb_engine::build::{Ran, RunIdentity, Timings};
use stb_engine::plan::{Plan, Prepared};
use stb_engine::scope::Scope;

use crate::error::ApiError;
use crate::{Compilation, Connect};

/// What a build from the API runs with.
pub struct Job {
    pub compilation: Arc<Compilation>,
    pub connect: Connect,
    pub database: String,
    pub invocation_id: String,
    /// The signed-in user who started it.
    pub owner: String,
    pub scope: Scope,
    /// The reviewed plan's hash.
    pub plan_hash: String,
    /// The pipelines it was authorised for: a plan that grew beyond them is refused.
    pub authorised: Vec<String>,
    pub windows: stb_engine::runs::Windows,
    pub allow_shrink: bool,
    /// Replays over the target's budget go on.
    pub allow_large: bool,
    /// Protected pipelines' confirmation tokens.
    pub tokens: Vec<String>,
}

/// What `GET /api/build/current` says of the last build this server started.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildState {
    pub invocation_id: String,
    pub running: bool,
    pub exit_code: Option<i32>,
    /// What it said beside its events: warnings, and why it stopped (a build that fails
    /// before it records anything says why only here). The last 50 lines.
    pub stderr: Vec<String>,
}

/// Lines of a build's messages kept for `current`.
const KEPT_LINES: usize = 50;

/// A build's messages and end, shared with its thread.
#[derive(Default)]
struct Progress {
    exit_code: Option<i32>,
    lines: Vec<String>,
}

impl Progress {
    fn say(&mut self, line: String) {
        self.lines.push(line);
        let over = self.lines.len().saturating_sub(KEPT_LINES);
        self.lines.drain(..over);
    }
}

struct Started {
    id: String,
    cancel: Arc<AtomicBool>,
    progress: Arc<Mutex<Progress>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Started {
    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

/// The build this server started last, running or ended.
#[derive(Default)]
pub struct Builds {
    current: Mutex<Option<Started>>,
}

impl Builds {
    /// The run this server's build is, while it runs.
    #[must_use]
    pub fn running(&self) -> Option<String> {
        let current = self.current.lock().ok()?;
        let started = current.as_ref()?;
        started.running().then(|| started.id.clone())
    }

    /// The last build this server started, with its messages.
    #[must_use]
    pub fn current(&self) -> Option<BuildState> {
        let current = self.current.lock().ok()?;
        let started = current.as_ref()?;
        let progress = started.progress.lock().ok()?;
        Some(BuildState {
            invocation_id: started.id.clone(),
            running: started.running(),
            exit_code: progress.exit_code,
            stderr: progress.lines.clone(),
        })
    }

    /// Starts `job` on a thread of its own, unless a build this server started still runs.
    ///
    /// # Errors
    /// 409 while another build of this server runs; 500 when the thread cannot start.
    pub fn start(&self, job: Job) -> Result<(), ApiError> {
        let mut current = self
            .current
            .lock()
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "lock poisoned"))?;
        if let Some(running) = current.as_ref().filter(|s| s.running()) {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                detail: serde_json::json!({
                    "message": format!("Run {} started from this server is still running. Wait for it to finish or cancel it from Runs.", running.id),
                    "invocationId": running.id,
                }),
            });
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Mutex::new(Progress::default()));
        let id = job.invocation_id.clone();
        let thread = std::thread::Builder::new()
            .name(format!("build-{id}"))
            .spawn({
                let (cancel, progress) = (Arc::clone(&cancel), Arc::clone(&progress));
                move || run(&job, &cancel, &progress)
            })
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot start the build: {e}"),
                )
            })?;
        *current = Some(Started {
            id,
            cancel,
            progress,
            thread: Some(thread),
        });
        Ok(())
    }

    /// Asks a running build to stop at its next statement boundary and waits until it
    /// has given the target back (the server is stopping).
    pub fn stop(&self) {
        let thread = self.current.lock().ok().and_then(|mut current| {
            let started = current.as_mut()?;
            started
                .cancel
                .store(true, std::sync::atomic::Ordering::SeqCst);
            started.thread.take()
        });
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// The command line a terminal would have run for `scope`, shown with the run.
fn display_command(scope: &Scope) -> String {
    let mut parts = vec!["stb build".to_owned()];
    parts.extend(scope.select.iter().map(|s| format!("--select {s}")));
    if let Some(start) = &scope.start_time {
        parts.push(format!(
            "--start-time '{}'",
            start.as_str().replacen(' ', "T", 1)
        ));
    }
    if let Some(id) = &scope.deployment_id {
        parts.push(format!("--deployment-id {id}"));
    }
    if scope.changed {
        parts.push("--changed".to_owned());
    }
    if scope.full_refresh {
        parts.push("--full-refresh".to_owned());
    }
    parts.push("(dev server)".to_owned());
    parts.join(" ")
}

fn run(job: &Job, cancel: &Arc<AtomicBool>, progress: &Arc<Mutex<Progress>>) {
    let say = |line: String| {
        if let Ok(mut progress) = progress.lock() {
            progress.say(line);
        }
    };
    // A panic ends this build, never the server: it is said, with the exit code a
    // panicking `stb build` would have had.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        build(job, cancel, progress)
    }));
    let exit_code = match built {
        Ok(Ok(exit_code)) => exit_code,
        Ok(Err(error)) => {
            say_error(&say, &error);
            1
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            say(format!("the build stopped unexpectedly: {what}"));
            101
        }
    };
    if let Ok(mut progress) = progress.lock() {
        progress.exit_code = Some(exit_code);
    }
}

/// `error[CODE]: message` and its hint, as `stb build` prints them.
fn say_error(say: &dyn Fn(String), error: &EngineError) {
    say(format!("error[{}]: {}", error.code, error.message));
    if !error.hint.is_empty() {
        say(format!("  hint: {}", error.hint));
    }
}

/// Connects, opens the records and builds; the exit code `stb build` would have ended with.
fn build(
    job: &Job,
    cancel: &Arc<AtomicBool>,
    progress: &Arc<Mutex<Progress>>,
) -> Result<i32, EngineError> {
    let Compilation { project, compiled } = job.compilation.as_ref();
    let client = (job.connect)().map_err(|message| {
        let unreachable = stb_warehouse::ErrorKind::Timeout;
        EngineError::new(
            unreachable.code(),
            format!("no warehouse connection: {message}"),
            unreachable.hint(),
        )
        .of_kind(stb_engine::ErrorKind::Warehouse)
    })?;
    let run = RunIdentity::new(
        Some(job.invocation_id.clone()),
        Some(display_command(&job.scope)),
        Some(job.owner.clone()),
    );
    let opened = std::time::Instant::now();
    stb_engine::build::open(&client, &job.database, project, compiled, &run)?;
    let request = Request {
        project,
        compiled,
        client: Arc::new(client),
        database: job.database.clone(),
        run,
        scope: job.scope.clone(),
        plan_hash: Some(job.plan_hash.clone()),
        allow_large: job.allow_large,
        authorised: Some(job.authorised.clone()),
        windows: job.windows,
        timings: Timings {
            observability_ms: opened.elapsed().as_millis(),
            ..Timings::default()
        },
    };
    let frontend = Unattended { job, progress };
    Ok(
        match stb_engine::build::operation::build(&request, &frontend, cancel) {
            Outcome::Stopped { error, exit_code } => {
                say_error(&|line| frontend.say(line), &error);
                exit_code
            }
            Outcome::Invalid(invalid) => {
                frontend.say(stb_engine::plan::invalid_summary(&invalid));
                1
            }
            Outcome::NothingChanged { message, .. } => {
                frontend.say(message.to_owned());
                0
            }
            Outcome::Declined => 1,
            Outcome::Ran {
                phases, exit_code, ..
            } => {
                for phase in &phases {
                    frontend.said(&phase.result);
                }
                exit_code
            }
        },
    )
}

/// A build nobody is asked about: the request's `allowShrink` and tokens decide.
struct Unattended<'a> {
    job: &'a Job,
    progress: &'a Arc<Mutex<Progress>>,
}

impl Unattended<'_> {
    fn say(&self, line: String) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.say(line);
        }
    }

    /// What `stb build` says of a phase beside its report: its warnings, a failed step,
    /// failed build audits, a phase that did not run.
    fn said(&self, result: &PhaseResult) {
        match result {
            PhaseResult::Ran {
                ran, ended, notes, ..
            } => {
                for note in notes {
                    self.say(format!("warning: {note}"));
                }
                let execution = &ran.execution;
                if execution.status == stb_build::execute::Status::Failed {
                    self.say(format!(
                        "error[{}]: step {} failed: {}",
                        stb_engine::build::FAILED_CODE,
                        execution.failed_step.as_deref().unwrap_or("?"),
                        execution.error_message.as_deref().unwrap_or("")
                    ));
                }
                if !ended.audit_failures.is_empty() {
                    self.say(format!(
                        "error[{}]: build audits failed: {}",
                        stb_engine::build::AUDIT_CODE,
                        ended.audit_failures.join(", ")
                    ));
                }
            }
            PhaseResult::Failed(error) => say_error(&|line| self.say(line), error),
            PhaseResult::Skipped => self.say(stb_engine::build::operation::SKIPPED.to_owned()),
        }
    }
}

impl Frontend for Unattended<'_> {
    fn event_hook(&self) -> Option<EventHook> {
        None
    }

    fn warning_hook(&self) -> WarningHook {
        let progress = Arc::clone(self.progress);
        Box::new(move |message: &str| {
            if let Ok(mut progress) = progress.lock() {
                progress.say(format!("warning: {message}"));
            }
        })
    }

    fn show(&self, _plan: &Plan) {}

    fn accept_shrink(&self, prepared: &Prepared) -> Approval {
        unattended_shrink(prepared, self.job.allow_shrink)
    }

    fn confirm(&self, prepared: &Prepared) -> Approval {
        unattended_confirm(&self.job.compilation.project, prepared, &self.job.tokens)
    }

    fn executing(&self, _cancel: &Arc<AtomicBool>) {}

    fn lock_wait(&self, holder: &str, owner: Option<&str>) {
        self.say(format!(
            "waiting for run {holder}{} to release the target lock",
            owner.map(|o| format!(" ({o})")).unwrap_or_default()
        ));
    }

    fn ran(&self, _prepared: &Prepared, _ran: &Ran) -> Option<String> {
        None
    }
}
