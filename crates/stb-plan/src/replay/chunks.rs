//! Chunked replays: a root's captured window cut into pieces of about `[build]
//! replay_chunk_rows` rows, each replayed by its own `INSERT ... SELECT`.
//!
//! The pieces never overlap and leave nothing out, so together they replay exactly the
//! rows the single statement would:
//! - offsets: each partition's offsets up to its cutoff are cut into consecutive ranges
//!   (`lower ..= upper`); a partition's first range keeps the single statement's open
//!   floor (no `>=` unless a start time sets one), and small partitions share a chunk, so
//!   a topic of many partitions is not one statement per partition. Rows landing after
//!   the capture have higher offsets than any cutoff: a live writer adds nothing to any
//!   chunk.
//! - timestamps, landing times and cursors: the window is cut at positions read from the
//!   window itself (approximate quantiles: only the chunks' sizes depend on them) into
//!   half-open ranges `[start_k, start_k+1)`, the first open below and the last closed at
//!   the cutoff, each intersected with the whole window's predicate.

use super::{BoundaryMode, Capture, offset_range, partition_bounds, position_literal, predicate};
use crate::options::StartTime;

/// One contiguous range of a partition's offsets in a chunk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OffsetRange {
    pub partition: i128,
    /// The first offset (`None`: open below, as the single statement's window is).
    pub lower: Option<i128>,
    /// The last offset, inclusive.
    pub upper: i128,
}

/// What part of the window a chunk replays, for its events and records.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChunkSpan {
    Offsets {
        ranges: Vec<OffsetRange>,
    },
    /// `from` inclusive (`None`: the window's own start), `to` exclusive unless it is the
    /// window's cutoff (`to_inclusive`).
    Scalar {
        from: Option<String>,
        to: String,
        to_inclusive: bool,
    },
}

/// One statement's share of a root's window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    /// The predicate on the driving input's lineage columns.
    pub predicate: String,
    pub span: ChunkSpan,
}

impl ChunkSpan {
    /// As run events and records show it: offsets and partitions as text (they may not
    /// fit a JSON reader's numbers).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Offsets { ranges } => serde_json::json!({
                "ranges": ranges.iter().map(|r| serde_json::json!({
                    "partition": r.partition.to_string(),
                    "lowerOffset": r.lower.map(|l| l.to_string()),
                    "upperOffset": r.upper.to_string(),
                })).collect::<Vec<_>>(),
            }),
            Self::Scalar {
                from,
                to,
                to_inclusive,
            } => serde_json::json!({"from": from, "to": to, "toInclusive": to_inclusive}),
        }
    }
}

/// How many chunks a window of `rows` rows is cut into (at least one).
#[must_use]
pub fn chunk_count(rows: u128, chunk_rows: u64) -> u64 {
    let chunk_rows = u128::from(chunk_rows.max(1));
    u64::try_from(rows.div_ceil(chunk_rows).max(1)).unwrap_or(u64::MAX)
}

/// The chunks of an offsets capture: consecutive offset ranges of at most `chunk_rows`
/// offsets each (fewer rows where a partition has gaps), partitions packed in capture
/// order. `start`: the window has a start time, so each partition's first offset bounds
/// it below, as it does the single statement.
#[must_use]
pub fn offset_chunks(capture: &Capture, start: bool, chunk_rows: u64) -> Vec<Chunk> {
    let Capture::Offsets { runs, .. } = capture else {
        return Vec::new();
    };
    let chunk_rows = i128::from(chunk_rows.max(1));
    let mut chunks: Vec<Vec<OffsetRange>> = Vec::new();
    let mut current: Vec<OffsetRange> = Vec::new();
    let mut room = chunk_rows;
    for (partition, first, cutoff) in partition_bounds(runs) {
        let mut next = first;
        while next <= cutoff {
            let take = room.min(cutoff - next + 1);
            let lower = (next != first || start).then_some(next);
            current.push(OffsetRange {
                partition,
                lower,
                upper: next + take - 1,
            });
            next += take;
            room -= take;
            if room == 0 {
                chunks.push(std::mem::take(&mut current));
                room = chunk_rows;
            }
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
        .into_iter()
        .map(|ranges| Chunk {
            predicate: ranges
                .iter()
                .map(|range| offset_range(range.partition, range.lower, range.upper))
                .collect::<Vec<_>>()
                .join(" OR "),
            span: ChunkSpan::Offsets { ranges },
        })
        .collect()
}

/// The read that finds where a scalar window is cut into `chunks` pieces: one row per
/// distinct cut position, in order, as text (column `start`). Approximate quantiles (a
/// sample): only the chunks' sizes depend on them, never which rows a chunk holds.
#[must_use]
pub fn starts_sql(
    relation: &str,
    mode: BoundaryMode,
    capture: &Capture,
    start: Option<&StartTime>,
    chunks: u64,
) -> String {
    let column = mode.scalar_column();
    let window = predicate(mode, capture, start);
    let levels = (1..chunks.max(1))
        .map(|k| format!("{}", k as f64 / chunks as f64))
        .collect::<Vec<_>>()
        .join(", ");
    // Positions go through numbers: a cursor's sampled quantile is a float (its floor is
    // a position as good as any), a time's is taken in milliseconds and printed as the
    // time literals the predicates are written with.
    let (value, shown) = if mode == BoundaryMode::Cursor {
        (
            format!("toFloat64({column})"),
            "toString(toInt128(floor(q)))",
        )
    } else {
        (
            format!("toFloat64(toUnixTimestamp64Milli(toDateTime64({column}, 3, 'UTC')))"),
            "toString(fromUnixTimestamp64Milli(toInt64(floor(q)), 'UTC'))",
        )
    };
    if levels.is_empty() {
        return "SELECT '' AS start WHERE 0".to_owned();
    }
    format!(
        "SELECT arrayJoin(starts) AS start FROM (\
         SELECT arrayMap(q -> {shown}, arraySort(arrayDistinct(quantiles({levels})({value})))) AS starts \
         FROM {relation} WHERE {window})"
    )
}

/// The chunks of a scalar capture cut at `starts` (the answer of [`starts_sql`], in
/// order): `[start_k, start_k+1)`, the first open below, the last closed at the cutoff,
/// each within the whole window. A start that is not a position of the mode's kind (an
/// integer cursor, a `YYYY-MM-DD HH:MM:SS[.fff]` time) or out of order is an error: it
/// would be spliced into a statement.
///
/// # Errors
/// A start that cannot be a position, or starts out of order.
pub fn scalar_chunks(
    mode: BoundaryMode,
    capture: &Capture,
    start: Option<&StartTime>,
    starts: &[String],
) -> Result<Vec<Chunk>, String> {
    let Capture::Scalar {
        cutoff: Some(cutoff),
        ..
    } = capture
    else {
        return Ok(Vec::new());
    };
    let column = mode.scalar_column();
    let literal = |value: &str| -> Result<String, String> {
        let checked = if mode == BoundaryMode::Cursor {
            value
                .parse::<i128>()
                .map(|v| v.to_string())
                .map_err(|_| format!("a chunk's start '{value}' is not an integer"))
        } else {
            super::check_time(value)
        };
        checked.map(|position| position_literal(mode, &position))
    };
    let literals = starts
        .iter()
        .map(|s| literal(s))
        .collect::<Result<Vec<_>, _>>()?;
    if mode == BoundaryMode::Cursor {
        let numbers: Vec<i128> = literals.iter().filter_map(|l| l.parse().ok()).collect();
        if numbers.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err("the chunks' starts are not in increasing order".to_owned());
        }
    } else if starts.windows(2).any(|pair| pair[0] >= pair[1]) {
        // The times have one format, so their text orders as they do.
        return Err("the chunks' starts are not in increasing order".to_owned());
    }
    let window = predicate(mode, capture, start);
    let count = literals.len() + 1;
    Ok((0..count)
        .map(|k| {
            let from = k.checked_sub(1).map(|i| literals[i].clone());
            let to = literals.get(k).cloned();
            let mut parts = vec![format!("({window})")];
            if let Some(from) = &from {
                parts.push(format!("{column} >= {from}"));
            }
            if let Some(to) = &to {
                parts.push(format!("{column} < {to}"));
            }
            let span = ChunkSpan::Scalar {
                from: k.checked_sub(1).map(|i| starts[i].clone()),
                to: starts.get(k).cloned().unwrap_or_else(|| cutoff.clone()),
                to_inclusive: to.is_none(),
            };
            Chunk {
                predicate: parts.join(" AND "),
                span,
            }
        })
        .collect())
}

/// The rows a capture's window holds, as the chunks are counted: the scalar capture's
/// count, or the offsets' spans (rows where offsets have no gaps).
#[must_use]
pub fn window_rows(capture: &Capture) -> u128 {
    match capture {
        Capture::Scalar { rows, .. } => *rows,
        Capture::Offsets { runs, .. } => runs
            .iter()
            .map(|run| u128::try_from(run.upper - run.lower + 1).unwrap_or(0))
            .sum(),
    }
}

/// Whether a root's replay may be cut into chunks: a row-wise query writes the same rows
/// whatever the pieces, and so does an aggregate into an engine that merges partial
/// states or sums (its view writes one partial row per inserted block anyway). Any other
/// aggregate is replayed in one statement: its rows would differ by how the window is cut.
#[must_use]
pub fn chunkable(aggregate: bool, engine: &str) -> bool {
    let engine = engine.trim_start_matches("Replicated");
    !aggregate
        || engine.starts_with("AggregatingMergeTree")
        || engine.starts_with("SummingMergeTree")
}

/// The key columns of a chunk's already-written check (see
/// [`super::ReplayTemplate::skip_existing`]): the chunk's own predicate reads only them, so
/// the target is searched for the chunk's keys only, not every key written so far.
#[must_use]
pub fn reads_only_keys(mode: BoundaryMode) -> bool {
    matches!(mode, BoundaryMode::Offsets | BoundaryMode::Cursor)
}

#[cfg(test)]
mod tests;
