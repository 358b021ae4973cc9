//! Reads what the shrink guard needs (see `stb_plan::shrink`): one query for every root's
//! live count, then one for every root's window. Only when the window query fails is it
//! repeated root by root, so one unreadable root does not hide the others' numbers.

use std::collections::BTreeMap;

use stb_plan::shrink::{Probe, ReplayWindow, WindowCounts, assess, live_query, window_query};
use stb_warehouse::{Client, Rows, WarehouseError};

/// Measures every probe.
///
/// # Errors
/// The live counts could not be read (the warehouse is unreachable or refuses plain
/// `count()` reads); a failing window is reported per root instead.
pub fn measure(client: &Client, probes: &[Probe]) -> Result<Vec<ReplayWindow>, WarehouseError> {
    let mut live = BTreeMap::new();
    if let Some(sql) = live_query(probes) {
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
    if let Some(sql) = window_query(probes, None) {
        match client.query(&sql) {
            Ok(rows) => read_windows(&rows, &mut windows),
            Err(_) => {
                for index in 0..probes.len() {
                    let Some(sql) = window_query(probes, Some(index)) else {
                        continue;
                    };
                    match client.query(&sql) {
                        Ok(rows) => read_windows(&rows, &mut windows),
                        Err(error) => {
                            errors.insert(index, error.to_string());
                        }
                    }
                }
            }
        }
    }
    let to_index = |index: usize| u64::try_from(index).unwrap_or(u64::MAX);
    Ok(assess(
        probes,
        &|index| live.get(&to_index(index)).copied(),
        &|index| windows.get(&to_index(index)).copied(),
        &|index| errors.get(&index).cloned(),
    ))
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
                retained_rows: number(rows, row, "retained_rows").unwrap_or(0),
                replayable_rows: number(rows, row, "replayable_rows").unwrap_or(0),
            },
        );
    }
}
