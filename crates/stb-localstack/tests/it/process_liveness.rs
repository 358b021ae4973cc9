//! A service counts as running until every one of its threads is gone, not only its main
//! thread: the others may still hold its listening socket.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stb_localstack::process;

/// The main thread ends (the kernel shows it as a zombie) while a second thread lives on
/// until its standard input is closed.
const MAIN_THREAD_ENDS_FIRST: &str = "\
import ctypes, sys, threading
threading.Thread(target=sys.stdin.read).start()
ctypes.CDLL('libc.so.6').pthread_exit(None)
";

#[test]
fn a_process_whose_main_thread_ended_is_running_until_its_last_thread_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().to_string_lossy().into_owned();
    let mut child = Command::new("python3")
        .current_dir(dir.path())
        .args(["-c", MAIN_THREAD_ENDS_FIRST])
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let pid = child.id();
    let leader_stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(60);
    let main_thread_ended = loop {
        let stat = std::fs::read_to_string(&leader_stat).unwrap_or_default();
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        if state.is_some_and(|s| s.starts_with('Z')) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(main_thread_ended, "the main thread never ended");
    let second_thread_alive = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task list")
        .count()
        > 1;
    assert!(
        second_thread_alive,
        "the second thread ended before its input closed"
    );
    assert!(
        process::is_running(pid, &marker),
        "a process with a live thread must count as running"
    );
    drop(child.stdin.take());
    let status = child.wait().expect("python3 ends");
    assert!(status.success(), "{status}");
    assert!(!process::is_running(pid, &marker));
}
