//! What `stb build` says while it queues behind another run's target lock, and how a
//! build that never got the lock is recorded.

use std::io::Write;

use stb_build::execute::Observer as _;
use stb_engine::build::records::BuildObserver;

use crate::output::Failure;

/// Tells the user (stderr) and the run's events (`lock_waiting`) which run this build
/// waits for.
pub(super) fn tell(observer: &BuildObserver, holder: &str, owner: Option<&str>) {
    observer.event(
        "lock_waiting",
        None,
        serde_json::json!({"holderInvocationId": holder, "holderOwner": owner}),
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "Waiting for run {holder}{} to release the target lock (it does not touch this build's models); Ctrl-C stops waiting",
        owner.map(|o| format!(" ({o})")).unwrap_or_default()
    );
}

/// The outcome and exit code of a build that ended before it held the lock.
pub(super) fn outcome(failure: &Failure) -> (&'static str, i32) {
    match failure.code {
        stb_engine::admission::WAIT_INTERRUPTED_CODE => {
            ("cancelled", stb_engine::build::EXIT_INTERRUPTED)
        }
        stb_engine::admission::OVERLAP_CODE => ("refused", 1),
        _ => ("failed", 1),
    }
}
