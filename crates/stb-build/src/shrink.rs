//! Reads what the shrink guard needs (see `stb_plan::shrink`): per batch of roots (one
//! batch for most projects), one query for the live counts, then, once every live count is
//! read, one for the windows; the driving inputs' retentions beside them. Only when a
//! window query fails is it repeated root by root, so one unreadable root does not hide
//! the others' numbers, and a root whose new query fails still has its loss measured
//! through the query that filled it.

use std::collections::BTreeMap;

use stb_plan::shrink::{
    Probe, Readings, ReplayWindow, WindowColumns, WindowCounts, assess, live_query, window_query,
};
use stb_warehouse::{Client, Rows, WarehouseError};

/// What the guard read of every probe, before it is judged ([`GuardReadings::assess`]).
pub struct GuardReadings {
    retentions: Vec<Option<String>>,
    counted: Counted,
}

/// Reads what the guard judges: each driving input's retention beside the counts.
///
/// # Errors
/// The live counts could not be read (the warehouse is unreachable or refuses plain
/// `count()` reads), or the inputs' definitions; a failing window is reported per root
/// instead.
pub fn read(
    client: &Client,
    database: &str,
    probes: &[Probe],
) -> Result<GuardReadings, WarehouseError> {
    let (retentions, counted) = std::thread::scope(|scope| {
        let retentions = scope.spawn(|| retentions(client, database, probes));
        let counted = counts(client, probes);
        (crate::side_by_side::joined(retentions), counted)
    });
    Ok(GuardReadings {
        retentions: retentions?,
        counted: counted?,
    })
}

impl GuardReadings {
    /// Each probe's window, judged from what was read; the retentions read are filled
    /// into the probes (they were read for these).
    #[must_use]
    pub fn assess(self, probes: &mut [Probe]) -> Vec<ReplayWindow> {
        for (probe, retention) in probes.iter_mut().zip(self.retentions) {
            probe.retention = retention;
        }
        let counted = self.counted;
        let key = |index: usize| u64::try_from(index).unwrap_or(u64::MAX);
        assess(
            probes,
            &Readings {
                live: &|index| counted.live.get(&key(index)).copied(),
                windows: &|index| counted.windows.get(&key(index)).copied(),
                errors: &|index| counted.errors.get(&index).cloned(),
                new_query_errors: &|index| counted.new_query_errors.get(&index).cloned(),
            },
        )
    }
}

/// What the guard's queries counted, by probe.
struct Counted {
    live: BTreeMap<u64, u64>,
    windows: BTreeMap<u64, WindowCounts>,
    errors: BTreeMap<usize, String>,
    new_query_errors: BTreeMap<usize, String>,
}

/// The live counts, then (once every one is read: a table fed meanwhile only makes the
/// windows larger, never a loss that is not there) the windows.
fn counts(client: &Client, probes: &[Probe]) -> Result<Counted, WarehouseError> {
    let batches = stb_plan::shrink::batches(probes);
    let mut live = BTreeMap::new();
    for batch in &batches {
        let Some(sql) = live_query(probes, batch) else {
            continue;
        };
        let rows = client.query(&sql)?;
        for row in 0..rows.data.len() {
            if let (Some(root), Some(count)) =
                (number(&rows, row, "root"), number(&rows, row, "live_rows"))
            {
                live.insert(root, count);
            }
        }
    }
    let mut windows = BTreeMap::new();
    let mut errors = BTreeMap::new();
    let mut new_query_errors = BTreeMap::new();
    let failed: Vec<usize> = batches
        .iter()
        .filter(|batch| {
            window_query(probes, batch, WindowColumns::All).is_some_and(|sql| {
                client
                    .query(&sql)
                    .map(|rows| read_windows(&rows, &mut windows))
                    .is_err()
            })
        })
        .flatten()
        .copied()
        .collect();
    for index in failed {
        let Some(sql) = window_query(probes, &[index], WindowColumns::All) else {
            continue;
        };
        let Err(error) = client
            .query(&sql)
            .map(|rows| read_windows(&rows, &mut windows))
        else {
            continue;
        };
        let history =
            window_query(probes, &[index], WindowColumns::History).map(|sql| client.query(&sql));
        match history {
            Some(Ok(rows)) => {
                read_windows(&rows, &mut windows);
                new_query_errors.insert(index, error.to_string());
            }
            Some(Err(history_error)) => {
                errors.insert(index, history_error.to_string());
            }
            None => {
                errors.insert(index, error.to_string());
            }
        }
    }
    Ok(Counted {
        live,
        windows,
        errors,
        new_query_errors,
    })
}

fn number(rows: &Rows, row: usize, column: &str) -> Option<u64> {
    rows.text(row, column).and_then(|text| text.parse().ok())
}

fn read_windows(rows: &Rows, into: &mut BTreeMap<u64, WindowCounts>) {
    for row in 0..rows.data.len() {
        let Some(root) = number(rows, row, "root") else {
            continue;
        };
        into.insert(
            root,
            WindowCounts {
                input_rows: number(rows, row, "input_rows").unwrap_or(0),
                history_rows: number(rows, row, "history_rows").unwrap_or(0),
                retained_rows: number(rows, row, "retained_rows").unwrap_or(0),
                replayable_rows: number(rows, row, "replayable_rows").unwrap_or(0),
            },
        );
    }
}

/// Each probe's retention, from its driving input's live definition: one query for every
/// input, only the inputs' definitions (the plan's catalog read none of them).
fn retentions(
    client: &Client,
    database: &str,
    probes: &[Probe],
) -> Result<Vec<Option<String>>, WarehouseError> {
    let inputs: Vec<String> = probes
        .iter()
        .filter_map(|p| p.retention_source.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if inputs.is_empty() {
        return Ok(vec![None; probes.len()]);
    }
    let definitions = client.definitions(database, &inputs)?;
    Ok(probes
        .iter()
        .map(|probe| {
            probe
                .retention_source
                .as_ref()
                .and_then(|input| definitions.get(input))
                .and_then(|(_, create)| stb_plan::shrink::retention(create))
        })
        .collect())
}
