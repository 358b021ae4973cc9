//! Everything a plan measures about its replays, read at once: the shrink guard's counts
//! ([`crate::shrink`]) beside the replays' costs ([`crate::cost`]). Neither reads what the
//! other writes into the probes (the costs need no retention), so the two run side by side
//! and a plan waits for the longer one, not for both in turn.

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

/// Measures every probe's window (filling its retention first) and every replay's cost.
///
/// # Errors
/// As [`crate::shrink::measure`]: the live counts could not be read.
pub fn replays(
    client: &Client,
    database: &str,
    probes: &mut [Probe],
) -> Result<Measured, WarehouseError> {
    // The costs read their own copy: the shrink guard fills the retentions in meanwhile.
    let unfilled = probes.to_vec();
    std::thread::scope(|scope| {
        let costs = scope.spawn(|| crate::cost::measure(client, database, &unfilled));
        let windows = crate::shrink::measure(client, database, probes);
        let (costs, throughput) = crate::side_by_side::joined(costs);
        Ok(Measured {
            windows: windows?,
            costs,
            throughput,
        })
    })
}
