//! A build notices `stb runs cancel` (or the dev server) asking it to stop: a
//! `cancellation_requested` event in its own stream sets the same flag Ctrl-C sets, so the
//! build kills its statement in flight, stops at that boundary, resumes what it paused
//! and records itself `cancelled`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use stb_warehouse::Client;
use stb_warehouse::events::cancellation_requested;

/// How often a build looks for a cancellation request.
const POLL: Duration = Duration::from_millis(500);

/// Watches while it lives; dropping it stops the watch.
pub struct CancellationWatch {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for CancellationWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Sets `interrupt` once run `invocation` of `database` is asked to stop. A read that
/// fails is tried again at the next poll: a flaky warehouse only delays the stop.
#[must_use]
pub fn watch_cancellation(
    client: Arc<Client>,
    database: &str,
    invocation: &str,
    interrupt: Arc<AtomicBool>,
) -> CancellationWatch {
    let done = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let database = database.to_owned();
    let invocation = invocation.to_owned();
    let thread = std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(POLL);
            if cancellation_requested(&client, &database, &invocation).unwrap_or(false) {
                interrupt.store(true, Ordering::SeqCst);
                return;
            }
        }
    });
    CancellationWatch {
        done,
        thread: Some(thread),
    }
}
