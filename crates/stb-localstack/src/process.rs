//! Background service processes: spawning, liveness, and stopping by PID.
//!
//! A PID alone can be reused by an unrelated process after ours died, so every check also
//! requires the process to belong to this stack: its working directory lies under the
//! stack's state directory, or its command line mentions it.

use std::fs::{self, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::LocalStackError;

/// Starts `command` in its own process group (so a Ctrl-C aimed at `stb` does not reach it)
/// with stdout and stderr appended to `log`. Returns its PID.
pub(crate) fn spawn_service(mut command: Command, log: &Path) -> Result<u32, LocalStackError> {
    let open = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| LocalStackError::io("opening log", log, e))
    };
    let child = command
        .stdin(Stdio::null())
        .stdout(open()?)
        .stderr(open()?)
        .process_group(0)
        .spawn()
        .map_err(|e| LocalStackError::io("starting", log, e))?;
    // The child is never waited for: it outlives this process by design. When this process
    // ends first, init reaps it.
    Ok(child.id())
}

/// True if `pid` is a live process whose working directory starts with `marker` or whose
/// command line contains it.
///
/// A process is live while any of its threads is: when its main thread has ended
/// (`/proc/PID/stat` says zombie) the others may still be closing its files, its
/// listening socket among them, so a port is only free once every thread is gone.
#[must_use]
pub fn is_running(pid: u32, marker: &str) -> bool {
    let proc_dir = Path::new("/proc").join(pid.to_string());
    if task_is_ours(&proc_dir, marker) {
        return true;
    }
    let Ok(tasks) = fs::read_dir(proc_dir.join("task")) else {
        return false;
    };
    tasks
        .flatten()
        .any(|task| task_is_ours(&task.path(), marker))
}

/// True if the task (process or thread) at `dir` is neither a zombie nor dead and its
/// working directory or command line names `marker`.
fn task_is_ours(dir: &Path, marker: &str) -> bool {
    let Ok(stat) = fs::read_to_string(dir.join("stat")) else {
        return false;
    };
    // The state letter follows the parenthesised command name, which may itself hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some('Z' | 'X') | None) {
        return false;
    }
    if fs::read_link(dir.join("cwd")).is_ok_and(|cwd| cwd.starts_with(marker)) {
        return true;
    }
    fs::read(dir.join("cmdline")).is_ok_and(|cmdline| {
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        text.contains(marker)
    })
}

/// A process survived SIGTERM and SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("process {pid} is still running")]
pub struct StillRunning {
    pub pid: u32,
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILL. Ok once the process is gone.
pub fn stop(pid: u32, marker: &str, grace: Duration) -> Result<(), StillRunning> {
    if !is_running(pid, marker) {
        return Ok(());
    }
    let Some(target) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return Err(StillRunning { pid });
    };
    let _ = kill_process(target, Signal::TERM);
    if wait_for_exit(pid, marker, grace) {
        return Ok(());
    }
    let _ = kill_process(target, Signal::KILL);
    if wait_for_exit(pid, marker, Duration::from_secs(5)) {
        Ok(())
    } else {
        Err(StillRunning { pid })
    }
}

fn wait_for_exit(pid: u32, marker: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !is_running(pid, marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !is_running(pid, marker)
}

/// The last `count` lines of a log file, for error messages.
#[must_use]
pub fn log_tail(log: &Path, count: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_with_its_own_name_as_marker() {
        let exe = std::env::current_exe().expect("current exe");
        let name = exe
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 name");
        assert!(is_running(std::process::id(), name));
        assert!(!is_running(std::process::id(), "no-such-marker-in-cmdline"));
    }

    #[test]
    fn a_missing_pid_is_not_running() {
        assert!(!is_running(u32::MAX - 1, ""));
    }

    #[test]
    fn stop_terminates_a_spawned_service() {
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().to_string_lossy().into_owned();
        // Identified by its working directory, as the services are: `sh -c` may exec
        // `sleep` directly, which drops the marker from the command line.
        let mut command = Command::new("sh");
        command.current_dir(dir.path()).args(["-c", "sleep 30"]);
        let pid = spawn_service(command, &dir.path().join("log")).expect("spawn");
        assert!(is_running(pid, &marker));
        stop(pid, &marker, Duration::from_secs(5)).expect("stopped");
        assert!(!is_running(pid, &marker));
    }
}
