//! What a build shows while it runs: with `--events`, every event as a JSON line on
//! stdout; at a terminal, a live line on stderr for a long statement (rows read of the
//! warehouse's estimate, the share done, for an offsets replay the share of its window
//! written and an ETA, and the time so far).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use stb_engine::build::records::EventHook;

/// The hook for `args`: JSON lines, a progress line, or nothing (`--json`, or no
/// terminal).
pub(super) fn event_hook(events: bool, json: bool) -> Option<EventHook> {
    if events {
        return Some(Box::new(|line: &serde_json::Value| {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }));
    }
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    // A progress line is open until its statement completes.
    let open = AtomicBool::new(false);
    Some(Box::new(move |line: &serde_json::Value| {
        let mut err = std::io::stderr().lock();
        match line["event"].as_str() {
            Some("statement_progress") => {
                let percent = line["percent"]
                    .as_f64()
                    .map(|p| format!(" ({p:.0}%)"))
                    .unwrap_or_default();
                let _ = write!(
                    err,
                    "\r\x1b[K  {}: {} of ~{} rows read{percent}{}, {:.0} s",
                    line["displayName"].as_str().unwrap_or("statement"),
                    line["readRows"],
                    line["totalRowsApprox"],
                    replayed(line),
                    line["elapsedMs"].as_f64().unwrap_or(0.0) / 1000.0
                );
                let _ = err.flush();
                open.store(true, Ordering::SeqCst);
            }
            Some("statement_completed") if open.swap(false, Ordering::SeqCst) => {
                let _ = writeln!(err);
            }
            _ => {}
        }
    }))
}

/// `, 38% of the replay window written, ETA 4 s` for an offsets replay's progress.
fn replayed(line: &serde_json::Value) -> String {
    let Some(percent) = line["replayPercent"].as_f64() else {
        return String::new();
    };
    let eta = line["etaMs"]
        .as_f64()
        .map(|ms| format!(", ETA {:.0} s", ms / 1000.0))
        .unwrap_or_default();
    format!(", {percent:.0}% of the replay window written{eta}")
}
