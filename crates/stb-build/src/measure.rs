//! Everything a plan measures about its replays, read at once: the shrink guard's counts
//! ([`crate::shrink`]) beside the replays' costs ([`crate::cost`]). Both only read the
//! probes (the retentions the guard reads are filled in after), so the two run side by
//! side and a plan waits for the longer one, not for both in turn.

use std::sync::atomic::{AtomicBool, Ordering};

use stb_plan::cost::{ReplayCost, Throughput};
use stb_plan::shrink::{Probe, ReplayWindow};
use stb_warehouse::{Client, WarehouseError};

/// What [`replays`] read.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Per probe: what its table holds and what its replay window restores.
    pub windows: Vec<ReplayWindow>,
    /// Each measured root's cost.
    pub costs: Vec<ReplayCost>,
    /// How fast this warehouse replayed before.
    pub throughput: Option<Throughput>,
}

/// Measures every probe's window (filling its retention) and every replay's cost.
///
/// # Errors
/// As [`crate::shrink::read`]: the live counts could not be read (the cost reads still
/// under way then stop at their next request).
pub fn replays(
    client: &Client,
    database: &str,
    probes: &mut [Probe],
) -> Result<Measured, WarehouseError> {
    let stop = AtomicBool::new(false);
    let (guard, (costs, throughput)) = {
        let probes: &[Probe] = probes;
        std::thread::scope(|scope| {
            let costs = scope.spawn(|| crate::cost::measure(client, database, probes, &stop));
            let guard = crate::shrink::read(client, database, probes);
            if guard.is_err() {
                stop.store(true, Ordering::SeqCst);
            }
            (guard, crate::side_by_side::joined(costs))
        })
    };
    Ok(Measured {
        windows: guard?.assess(probes),
        costs,
        throughput,
    })
}
