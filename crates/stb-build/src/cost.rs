//! Reads what a plan's replays would cost ([`stb_plan::cost`]): the rows of each replay
//! window, the inputs' sizes, a Kafka landing's messages per partition, and how fast this
//! warehouse replayed before. A fixed number of queries whatever the number of models:
//! the counts fifty distinct ones to a request (roots that share a driving input and a
//! window count it once), one for the sizes, the Kafka windows' partitions fifty to a
//! request, one for the throughput, all sent side by side. Nothing here stops a plan: a
//! count that fails is said on its root (and a budget then refuses the build), a size or a
//! throughput that cannot be read is unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

use stb_plan::cost::{PartitionMessages, Reading, ReplayCost, Throughput};
use stb_plan::shrink::Probe;
use stb_warehouse::{Client, Rows};

/// Distinct counts per request.
const COUNTS_PER_REQUEST: usize = 50;

/// The replays whose throughput estimates a new one's time.
const RECENT_REPLAYS: usize = 20;

/// Each measured root's cost ([`stb_plan::cost::measured`]) and the throughput its time
/// was estimated from; once `stop` is set, no further request is sent (what is missing
/// is unknown).
#[must_use]
pub fn measure(
    client: &Client,
    database: &str,
    probes: &[Probe],
    stop: &AtomicBool,
) -> (Vec<ReplayCost>, Option<Throughput>) {
    let measured = stb_plan::cost::measured(probes);
    if measured.is_empty() {
        return (Vec::new(), None);
    }
    let window = |index: usize| probes[index].window.as_ref();
    let counts: BTreeSet<&str> = measured
        .iter()
        .filter_map(|&index| window(index))
        .flat_map(|w| [w.replay_input.as_str(), w.input_rows.as_str()])
        .collect();
    let counts: Vec<&str> = counts.into_iter().collect();
    let partition_sqls: Vec<&str> = measured
        .iter()
        .filter_map(|&index| window(index)?.partitions.as_deref())
        .collect::<BTreeSet<&str>>()
        .into_iter()
        .collect();
    // Four reads that do not depend on each other, at once.
    let (counted, sizes, partitions, throughput) = std::thread::scope(|scope| {
        let sizes = scope.spawn(|| input_sizes(client, database, probes, &measured, stop));
        let partitions = scope.spawn(|| partitions_all(client, &partition_sqls, stop));
        let throughput = scope.spawn(|| throughput(client, database, stop));
        let counted = count_all(client, &counts, stop);
        (
            counted,
            crate::side_by_side::joined(sizes),
            crate::side_by_side::joined(partitions),
            crate::side_by_side::joined(throughput),
        )
    });
    let readings = |index: usize| {
        let probe = &probes[index];
        let Some(window) = probe.window.as_ref() else {
            return Reading::default();
        };
        let count = |sql: &str| counted.get(sql).cloned().unwrap_or(Err(String::new()));
        let (rows, error) = match count(&window.replay_input) {
            Ok(rows) => (Some(rows), None),
            Err(error) => (None, (!error.is_empty()).then_some(error)),
        };
        Reading {
            rows,
            input_rows: count(&window.input_rows).ok(),
            input_bytes: probe
                .retention_source
                .as_ref()
                .and_then(|input| sizes.get(input).copied()),
            partitions: window
                .partitions
                .as_deref()
                .and_then(|sql| partitions.get(sql).cloned())
                .unwrap_or_default(),
            error,
        }
    };
    (
        stb_plan::cost::assemble(probes, &readings, throughput),
        throughput,
    )
}

/// Each count's value, or why the server refused it.
fn count_all(
    client: &Client,
    sqls: &[&str],
    stop: &AtomicBool,
) -> BTreeMap<String, Result<u64, String>> {
    let batches: Vec<&[&str]> = sqls.chunks(COUNTS_PER_REQUEST).collect();
    crate::side_by_side::each(&batches, |batch| {
        if stopped(stop) {
            return Vec::new();
        }
        count_batch(client, batch)
    })
    .into_iter()
    .flatten()
    .collect()
}

/// One request's counts (each on its own when the server refuses one of them).
fn count_batch(client: &Client, batch: &[&str]) -> Vec<(String, Result<u64, String>)> {
    let union: Vec<String> = batch
        .iter()
        .enumerate()
        .map(|(key, sql)| format!("SELECT {key} AS k, ({sql}) AS n"))
        .collect();
    match client.query(&union.join(" UNION ALL ")) {
        Ok(rows) => (0..rows.data.len())
            .filter_map(|row| {
                let key = number(&rows, row, "k").and_then(|k| usize::try_from(k).ok());
                Some(((*batch.get(key?)?).to_owned(), Ok(number(&rows, row, "n")?)))
            })
            .collect(),
        // No answer at all: the same for each (asked again one by one, each would wait
        // as long).
        Err(error) if error.server_code.is_none() => {
            let message = stb_warehouse::plain_message(&error.to_string());
            batch
                .iter()
                .map(|sql| ((*sql).to_owned(), Err(message.clone())))
                .collect()
        }
        // One refused count refuses the request: each on its own, to say which.
        Err(_) => batch
            .iter()
            .map(|sql| {
                let one = client
                    .query(&format!("SELECT ({sql}) AS n"))
                    .map_err(|e| stb_warehouse::plain_message(&e.to_string()))
                    .and_then(|rows| number(&rows, 0, "n").ok_or_else(|| "no count".to_owned()));
                ((*sql).to_owned(), one)
            })
            .collect(),
    }
}

/// The measured roots' input tables' bytes on disk, by name; inputs that are not tables
/// (views) have none.
fn input_sizes(
    client: &Client,
    database: &str,
    probes: &[Probe],
    measured: &[usize],
    stop: &AtomicBool,
) -> BTreeMap<String, u64> {
    let inputs: BTreeSet<&str> = measured
        .iter()
        .filter_map(|&index| probes[index].retention_source.as_deref())
        .collect();
    if inputs.is_empty() || stopped(stop) {
        return BTreeMap::new();
    }
    let names: Vec<String> = inputs
        .iter()
        .map(|name| stb_ddl::string_literal(name))
        .collect();
    let sql = format!(
        "SELECT name, total_bytes FROM system.tables WHERE database = {} AND name IN ({}) AND total_bytes IS NOT NULL",
        stb_ddl::string_literal(database),
        names.join(", ")
    );
    let Ok(rows) = client.query(&sql) else {
        return BTreeMap::new();
    };
    (0..rows.data.len())
        .filter_map(|row| Some((rows.text(row, "name")?, number(&rows, row, "total_bytes")?)))
        .collect()
}

/// Each Kafka window's messages per partition, fifty windows to a request; a window the
/// server refuses has none (its count says why).
fn partitions_all<'s>(
    client: &Client,
    sqls: &[&'s str],
    stop: &AtomicBool,
) -> BTreeMap<&'s str, Vec<PartitionMessages>> {
    let mut found: BTreeMap<&str, Vec<PartitionMessages>> = BTreeMap::new();
    let batches: Vec<&[&'s str]> = sqls.chunks(COUNTS_PER_REQUEST).collect();
    let answered = crate::side_by_side::each(&batches, |batch| {
        if stopped(stop) {
            return Vec::new();
        }
        let union: Vec<String> = batch
            .iter()
            .enumerate()
            .map(|(key, sql)| format!("SELECT {key} AS k, * FROM ({sql})"))
            .collect();
        match client.query(&union.join(" UNION ALL ")) {
            Ok(rows) => vec![rows],
            // No answer at all: none for each either.
            Err(error) if error.server_code.is_none() => Vec::new(),
            // One refused window refuses the request: each on its own then.
            Err(_) => batch
                .iter()
                .enumerate()
                .filter_map(|(key, sql)| {
                    client
                        .query(&format!("SELECT {key} AS k, * FROM ({sql})"))
                        .ok()
                })
                .collect(),
        }
    });
    for (batch, answers) in batches.iter().zip(answered) {
        for rows in answers {
            for row in 0..rows.data.len() {
                let Some(sql) = number(&rows, row, "k")
                    .and_then(|k| usize::try_from(k).ok())
                    .and_then(|k| batch.get(k))
                else {
                    continue;
                };
                found.entry(sql).or_default().push(PartitionMessages {
                    partition: rows.text(row, "partition").unwrap_or_default(),
                    messages: number(&rows, row, "messages").unwrap_or(0),
                    first_offset: rows.text(row, "first_offset").unwrap_or_default(),
                    last_offset: rows.text(row, "last_offset").unwrap_or_default(),
                });
            }
        }
    }
    // A union keeps no order between its parts: partitions in their own order.
    for partitions in found.values_mut() {
        partitions.sort_by(
            |a, b| match (a.partition.parse::<i64>(), b.partition.parse::<i64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                _ => a.partition.cmp(&b.partition),
            },
        );
    }
    found
}

/// How fast the last replays of `database` read; `None` when there were none, or the
/// server's query log cannot be read.
fn throughput(client: &Client, database: &str, stop: &AtomicBool) -> Option<Throughput> {
    if stopped(stop) {
        return None;
    }
    let read =
        stb_warehouse::runs::recent_replay_reads(client, database, RECENT_REPLAYS).ok()??;
    Throughput::of(read.rows, read.milliseconds, read.statements)
}

/// The plan stopped measuring (the shrink guard's reads failed): the rest is not asked.
fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::SeqCst)
}

fn number(rows: &Rows, row: usize, column: &str) -> Option<u64> {
    rows.text(row, column).and_then(|text| text.parse().ok())
}
