//! Lineage activity evidence: when rows last arrived in each relation, from the best
//! evidence the warehouse keeps (`system.query_views_log`, then `system.part_log`, then
//! part modification times, marked approximate), and freshness from the data itself (the
//! newest row's time against the source's declared expectation). Reads here, decisions
//! in [`judge`].

pub mod judge;

use std::collections::BTreeMap;

use stb_warehouse::{Client, Rows, WarehouseError};

use judge::{Capabilities, Evidence, NewParts, Newest, PartTimes, ViewRuns};

fn text(rows: &Rows, row: usize, column: &str) -> Option<String> {
    rows.text(row, column).filter(|t| !t.is_empty())
}

/// A time the warehouse answered for "no such row" (`max` over nothing).
fn real_time(value: Option<String>) -> Option<String> {
    value.filter(|t| !t.starts_with("1970-01-01"))
}

/// Which activity logs the warehouse keeps.
///
/// # Errors
/// The catalog could not be read.
pub fn capabilities(client: &Client) -> Result<Capabilities, WarehouseError> {
    let rows = client.query(
        "SELECT name FROM system.tables WHERE database = 'system' AND name IN ('query_views_log', 'part_log')",
    )?;
    let names: Vec<String> = (0..rows.data.len())
        .filter_map(|r| text(&rows, r, "name"))
        .collect();
    Ok(Capabilities {
        query_views_log: names.iter().any(|n| n == "query_views_log"),
        part_log: names.iter().any(|n| n == "part_log"),
    })
}

/// The activity evidence for `tables` of `database` over the last `window_seconds`: one
/// query per log the warehouse keeps (system parts only when it keeps neither). A failed
/// read marks every table's evidence as unreadable.
#[must_use]
pub fn evidence(
    client: &Client,
    database: &str,
    tables: &[String],
    capabilities: Capabilities,
    window_seconds: u64,
) -> BTreeMap<String, Evidence> {
    let mut found: BTreeMap<String, Evidence> = tables
        .iter()
        .map(|t| (t.clone(), Evidence::default()))
        .collect();
    let read = read_logs(client, database, capabilities, window_seconds, &mut found);
    if let Err(error) = read {
        for evidence in found.values_mut() {
            evidence.read_error = Some(error.message.clone());
        }
    }
    found
}

fn read_logs(
    client: &Client,
    database: &str,
    capabilities: Capabilities,
    window_seconds: u64,
    found: &mut BTreeMap<String, Evidence>,
) -> Result<(), WarehouseError> {
    let db = stb_ddl::string_literal(database);
    if capabilities.query_views_log {
        // view_target is `database.table`.
        let rows = client.query(&format!(
            "SELECT substring(view_target, length({db}) + 2) AS target, \
             toString(max(event_time)) AS last_triggered, \
             toString(maxIf(event_time, status = 'QueryFinish' AND written_rows > 0)) AS last_write, \
             toString(sum(written_rows)) AS written, \
             toString(argMax(status, event_time_microseconds)) AS latest_status \
             FROM system.query_views_log \
             WHERE view_type = 'Materialized' AND startsWith(view_target, concat({db}, '.')) \
             AND event_time >= now() - INTERVAL {window_seconds} SECOND \
             GROUP BY view_target"
        ))?;
        for r in 0..rows.data.len() {
            if let Some(evidence) = text(&rows, r, "target").and_then(|t| found.get_mut(&t)) {
                evidence.views = Some(ViewRuns {
                    last_triggered_at: real_time(text(&rows, r, "last_triggered")),
                    last_write_at: real_time(text(&rows, r, "last_write")),
                    rows_written: number(&rows, r, "written"),
                    latest_status: text(&rows, r, "latest_status").unwrap_or_default(),
                });
            }
        }
    }
    if capabilities.part_log {
        // A week of the log is plenty to say when rows last came; the window counts them.
        let rows = client.query(&format!(
            "SELECT table, toString(max(event_time)) AS last_write, \
             toString(sumIf(rows, event_time >= now() - INTERVAL {window_seconds} SECOND)) AS written \
             FROM system.part_log \
             WHERE database = {db} AND event_type = 'NewPart' AND event_date >= today() - 7 \
             GROUP BY table"
        ))?;
        for r in 0..rows.data.len() {
            if let Some(evidence) = text(&rows, r, "table").and_then(|t| found.get_mut(&t)) {
                evidence.new_parts = Some(NewParts {
                    last_write_at: real_time(text(&rows, r, "last_write")),
                    rows_in_window: number(&rows, r, "written"),
                });
            }
        }
    }
    if !capabilities.query_views_log && !capabilities.part_log {
        let rows = client.query(&format!(
            "SELECT table, toString(max(modification_time)) AS modified, \
             toString(dateDiff('second', max(modification_time), now())) AS age \
             FROM system.parts WHERE database = {db} AND active GROUP BY table"
        ))?;
        for r in 0..rows.data.len() {
            if let Some(evidence) = text(&rows, r, "table").and_then(|t| found.get_mut(&t)) {
                evidence.parts = Some(PartTimes {
                    modified_at: real_time(text(&rows, r, "modified")),
                    seconds_ago: text(&rows, r, "age").and_then(|v| v.parse().ok()),
                });
            }
        }
    }
    Ok(())
}

fn number(rows: &Rows, row: usize, column: &str) -> u64 {
    text(rows, row, column)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The newest row of each `(table, time column)` of `database`, by the warehouse clock:
/// one `UNION ALL` query; when that fails (a column that is not a time, a table dropped
/// meanwhile), one query per table, and the tables that cannot be read get no entry
/// (their freshness is then unknown).
#[must_use]
pub fn newest(
    client: &Client,
    database: &str,
    targets: &[(String, String)],
) -> BTreeMap<String, Newest> {
    if let Ok(found) = newest_of(client, database, targets) {
        return found;
    }
    targets
        .iter()
        .filter_map(|target| newest_of(client, database, std::slice::from_ref(target)).ok())
        .flatten()
        .collect()
}

fn newest_of(
    client: &Client,
    database: &str,
    targets: &[(String, String)],
) -> Result<BTreeMap<String, Newest>, WarehouseError> {
    if targets.is_empty() {
        return Ok(BTreeMap::new());
    }
    let selects: Vec<String> = targets
        .iter()
        .map(|(table, column)| {
            let column_sql = stb_ddl::identifier(column);
            format!(
                "SELECT {} AS relation, toString(max({column_sql})) AS newest, \
                 toString(dateDiff('second', max({column_sql}), now64(3, 'UTC'))) AS lag, \
                 toString(count()) AS n FROM {}",
                stb_ddl::string_literal(table),
                stb_ddl::QualifiedName::new(database, table)
            )
        })
        .collect();
    let rows = client.query(&selects.join(" UNION ALL "))?;
    let mut found = BTreeMap::new();
    for r in 0..rows.data.len() {
        let Some(table) = text(&rows, r, "relation") else {
            continue;
        };
        let column = targets
            .iter()
            .find(|(t, _)| *t == table)
            .map(|(_, c)| c.clone());
        let has_rows = number(&rows, r, "n") > 0;
        found.insert(
            table,
            Newest {
                column,
                newest_at: text(&rows, r, "newest"),
                lag_seconds: text(&rows, r, "lag").and_then(|v| v.parse().ok()),
                has_rows,
            },
        );
    }
    Ok(found)
}
