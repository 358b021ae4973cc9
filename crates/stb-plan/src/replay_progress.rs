//! How far an offsets replay is, from what its target already holds: per captured
//! partition, the newest offset written so far (the frontier) against the offset runs the
//! capture found. Data, not the warehouse's row estimate: it says how much of the replay
//! window is in the table.

use std::collections::BTreeMap;

use crate::replay::OffsetRun;

/// The offsets a replay has to write and how many it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetsDone {
    pub done: u128,
    pub total: u128,
}

impl OffsetsDone {
    /// The share done, in percent; `None` for an empty window.
    #[must_use]
    pub fn percent(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        let share = self.done as f64 / self.total as f64 * 100.0;
        (self.total > 0).then_some(share)
    }

    /// Milliseconds left at the rate so far (`elapsed_ms` for what is done); `None` until
    /// something is done.
    #[must_use]
    pub fn eta_ms(&self, elapsed_ms: u64) -> Option<u64> {
        if self.done == 0 || self.total == 0 {
            return None;
        }
        let left = self.total.saturating_sub(self.done);
        u64::try_from(u128::from(elapsed_ms) * left / self.done).ok()
    }
}

/// How much of `runs` lies at or below each partition's frontier (the newest offset its
/// target holds). A run's offsets are inclusive; a frontier below a run counts nothing of
/// it, one above counts all of it; partitions without a frontier count nothing.
#[must_use]
pub fn offsets_done(runs: &[OffsetRun], frontier: &BTreeMap<i128, i128>) -> OffsetsDone {
    let mut done: u128 = 0;
    let mut total: u128 = 0;
    for run in runs {
        let span = run.upper.saturating_sub(run.lower).saturating_add(1).max(0);
        total = total.saturating_add(span.unsigned_abs());
        if let Some(newest) = frontier.get(&run.partition) {
            let covered = newest
                .saturating_sub(run.lower)
                .saturating_add(1)
                .clamp(0, span);
            done = done.saturating_add(covered.unsigned_abs());
        }
    }
    OffsetsDone { done, total }
}

/// Merges a new reading into the frontier so far: never backwards (a reading can lag one
/// taken before it while parts are written).
pub fn merge_frontier(frontier: &mut BTreeMap<i128, i128>, reading: &BTreeMap<i128, i128>) {
    for (partition, offset) in reading {
        let newest = frontier.entry(*partition).or_insert(*offset);
        *newest = (*newest).max(*offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(partition: i128, lower: i128, upper: i128) -> OffsetRun {
        OffsetRun {
            partition,
            lower,
            upper,
        }
    }

    #[test]
    fn the_share_done_counts_each_run_up_to_its_partitions_frontier() {
        // Partition 0: offsets 0..=99 and, after a gap, 200..=299; partition 1: 10..=19.
        let runs = [run(0, 0, 99), run(0, 200, 299), run(1, 10, 19)];
        let nothing = offsets_done(&runs, &BTreeMap::new());
        assert_eq!(
            nothing,
            OffsetsDone {
                done: 0,
                total: 210
            }
        );
        assert_eq!(nothing.percent(), Some(0.0));
        assert_eq!(nothing.eta_ms(5_000), None);
        // Partition 0 up to 249: the first run whole and half the second; partition 1
        // below its run: nothing of it.
        let frontier = BTreeMap::from([(0, 249), (1, 5)]);
        let half = offsets_done(&runs, &frontier);
        assert_eq!(
            half,
            OffsetsDone {
                done: 150,
                total: 210
            }
        );
        // 150 in 3 s: 60 left take 1.2 s.
        assert_eq!(half.eta_ms(3_000), Some(1_200));
        let all = offsets_done(&runs, &BTreeMap::from([(0, 299), (1, 19), (2, 7)]));
        assert_eq!(all.percent(), Some(100.0));
        assert_eq!(all.eta_ms(3_000), Some(0));
        assert_eq!(offsets_done(&[], &frontier).percent(), None);
    }

    #[test]
    fn the_frontier_never_goes_backwards() {
        let mut frontier = BTreeMap::from([(0, 50)]);
        merge_frontier(&mut frontier, &BTreeMap::from([(0, 40), (1, 3)]));
        assert_eq!(frontier, BTreeMap::from([(0, 50), (1, 3)]));
        merge_frontier(&mut frontier, &BTreeMap::from([(0, 70)]));
        assert_eq!(frontier[&0], 70);
    }
}
