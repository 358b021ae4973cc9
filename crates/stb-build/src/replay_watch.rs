//! Watches an offsets replay's target while its `INSERT ... SELECT` runs: the newest
//! offset per captured partition, merged so it never goes backwards, gives the share of
//! the replay window written and an ETA (`stb_plan::replay_progress`). Read at most every
//! two seconds: a `max` over the rows written so far is cheap but not free.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use stb_plan::replay::{Capture, OFFSET, OffsetRun, PARTITION};
use stb_plan::replay_progress::{OffsetsDone, merge_frontier, offsets_done};
use stb_plan::workflow::{Action, Step, Workflow};
use stb_warehouse::Client;

/// How often the target is read.
const PROBE_EVERY: Duration = Duration::from_secs(2);

pub(crate) struct ReplayWatch<'a> {
    client: &'a Client,
    relation: &'a str,
    runs: &'a [OffsetRun],
    frontier: RefCell<BTreeMap<i128, i128>>,
    probed: Cell<Option<Instant>>,
    last: Cell<Option<OffsetsDone>>,
}

impl<'a> ReplayWatch<'a> {
    /// A watch for `step` when it replays offsets runs the capture found.
    pub(crate) fn of(
        client: &'a Client,
        workflow: &'a Workflow,
        step: &Step,
        captures: &'a [Option<Capture>],
    ) -> Option<Self> {
        let Action::Replay(root) = step.action else {
            return None;
        };
        let Some(Capture::Offsets { runs, .. }) = captures.get(root)?.as_ref() else {
            return None;
        };
        Some(Self {
            client,
            relation: &workflow.roots.get(root)?.template.target,
            runs,
            frontier: RefCell::new(BTreeMap::new()),
            probed: Cell::new(None),
            last: Cell::new(None),
        })
    }

    /// The share written so far: read again when the last reading is old enough, else the
    /// last one. A failed read keeps the last reading.
    pub(crate) fn reading(&self) -> Option<OffsetsDone> {
        if self
            .probed
            .get()
            .is_some_and(|at| at.elapsed() < PROBE_EVERY)
        {
            return self.last.get();
        }
        self.probed.set(Some(Instant::now()));
        if let Some(now) = self.frontier_now() {
            let mut frontier = self.frontier.borrow_mut();
            merge_frontier(&mut frontier, &now);
            self.last.set(Some(offsets_done(self.runs, &frontier)));
        }
        self.last.get()
    }

    fn frontier_now(&self) -> Option<BTreeMap<i128, i128>> {
        let rows = self
            .client
            .query(&format!(
                "SELECT toString({PARTITION}) AS p, toString(max({OFFSET})) AS o FROM {} GROUP BY {PARTITION}",
                self.relation
            ))
            .ok()?;
        Some(
            (0..rows.data.len())
                .filter_map(|r| {
                    let number = |c: &str| rows.text(r, c).and_then(|v| v.parse::<i128>().ok());
                    Some((number("p")?, number("o")?))
                })
                .collect(),
        )
    }
}
