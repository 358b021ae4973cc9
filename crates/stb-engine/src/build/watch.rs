//! A build notices `stb runs cancel` (or the dev server) asking it to stop: a
//! `cancellation_requested` event in its own stream sets the same flag Ctrl-C sets, so the
//! build kills its statement in flight, stops at that boundary, resumes what it paused
//! and records itself `cancelled`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use stb_warehouse::Client;
use stb_warehouse::events::cancellation_requested;

/// How often a build looks for a cancellation request.
const POLL: Duration = Duration::from_millis(500);

/// Watches while it lives; dropping it stops the watch at once (the watch waits on a
/// channel its owner holds, not in a sleep the end of every build would wait out).
pub struct CancellationWatch {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for CancellationWatch {
    fn drop(&mut self) {
        // Disconnects the channel: the watch wakes from its wait and returns.
        drop(self.stop.take());
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
    watch_every(POLL, client, database, invocation, interrupt)
}

fn watch_every(
    poll: Duration,
    client: Arc<Client>,
    database: &str,
    invocation: &str,
    interrupt: Arc<AtomicBool>,
) -> CancellationWatch {
    let (stop, stopped) = channel::<()>();
    let database = database.to_owned();
    let invocation = invocation.to_owned();
    let thread = std::thread::spawn(move || {
        while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(poll) {
            if cancellation_requested(&client, &database, &invocation).unwrap_or(false) {
                interrupt.store(true, Ordering::SeqCst);
                return;
            }
        }
    });
    CancellationWatch {
        stop: Some(stop),
        thread: Some(thread),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build that ends ends now: with a poll of an hour, dropping the watch would hang
    /// for that hour if the watch slept between its reads.
    #[test]
    fn dropping_the_watch_stops_it_without_waiting_for_the_next_poll() {
        let client =
            Arc::new(Client::new(stb_warehouse::ConnectionConfig::default()).expect("a client"));
        let interrupt = Arc::new(AtomicBool::new(false));
        let watch = watch_every(
            Duration::from_secs(3600),
            client,
            "db",
            "run",
            Arc::clone(&interrupt),
        );
        drop(watch);
        assert!(
            !interrupt.load(Ordering::SeqCst),
            "nothing asked it to stop"
        );
    }
}
