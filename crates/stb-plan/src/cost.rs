//! What a rebuild's replays read, known before anything runs: for each replay root, the
//! rows of its driving input within the replay window and their bytes, for a Kafka
//! landing the window's messages per partition, and a time estimated from the replays this
//! warehouse ran before. `[build] max_replay_rows` and `max_replay_bytes` refuse a build
//! whose replays read more, unless it is told `--allow-large`.
//!
//! The SQL is made here from the shrink guard's probes ([`crate::shrink::WindowSql`]); the
//! edge runs it and hands the answers back to [`assemble`].

use serde::Serialize;

use crate::replay::{OFFSET, PARTITION};
use crate::shrink::Probe;

/// One replay root's cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayCost {
    pub model: String,
    pub driving_input: String,
    /// Rows of the driving input the replay reads (its window, from `--start-time` on).
    pub rows: u64,
    /// Those rows' bytes on disk: the input table's bytes in proportion to the rows its
    /// window takes (exact when the window takes it all). `None` when the input is not a
    /// table whose size the server knows (a view).
    pub bytes: Option<u64>,
    /// Offsets mode: the window's messages in each Kafka partition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionMessages>,
    /// `rows` at the throughput of the earlier replays ([`Throughput`]); `None` without
    /// one.
    pub estimated_seconds: Option<f64>,
    /// Why the window could not be counted (the budget then cannot clear the build).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A Kafka partition's messages in a replay window, from the landing's offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionMessages {
    pub partition: String,
    pub messages: u64,
    pub first_offset: String,
    pub last_offset: String,
}

/// How fast this warehouse replayed before: the rows its last replays read per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    pub rows_per_second: f64,
    /// How many replay statements it was measured over.
    pub replays: u64,
}

impl Throughput {
    /// From the rows a set of replays read and the milliseconds they took; `None` when
    /// there is nothing to go by.
    #[must_use]
    pub fn of(rows: u64, milliseconds: u64, replays: u64) -> Option<Self> {
        (rows > 0 && milliseconds > 0 && replays > 0).then(|| Self {
            rows_per_second: to_f64(rows) * 1000.0 / to_f64(milliseconds),
            replays,
        })
    }
}

pub use stb_model::planning::ReplayBudget;

/// A plan's replays together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostSummary {
    pub rows: u64,
    /// Bytes of the roots whose size is known.
    pub bytes: u64,
    /// Roots whose bytes are unknown (inputs that are views).
    pub roots_without_bytes: usize,
    pub estimated_seconds: Option<f64>,
    pub throughput: Option<Throughput>,
    pub budget: ReplayBudget,
    /// Why the replays are over the budget, one sentence per limit; empty within it.
    pub over_budget: Vec<String>,
}

/// The server's answers for one root, as the edge read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    pub rows: Option<u64>,
    pub input_rows: Option<u64>,
    /// The input table's bytes on disk.
    pub input_bytes: Option<u64>,
    pub partitions: Vec<PartitionMessages>,
    pub error: Option<String>,
}

/// The SQL listing `relation`'s messages per partition within `window` (a predicate).
#[must_use]
pub fn partitions_sql(relation: &str, window: &str) -> String {
    format!(
        "SELECT toString({PARTITION}) AS partition, count() AS messages, toString(min({OFFSET})) AS first_offset, toString(max({OFFSET})) AS last_offset \
         FROM {relation} WHERE {window} GROUP BY {PARTITION} ORDER BY {PARTITION}"
    )
}

/// The roots a cost is measured for: those whose driving input exists (nothing else is
/// read), and not a fan-in replayed from an input this build rebuilds (it reads what that
/// input's own replay writes, not what exists now).
#[must_use]
pub fn measured(probes: &[Probe]) -> Vec<usize> {
    probes
        .iter()
        .enumerate()
        .filter(|(_, probe)| probe.window.is_some() && !probe.replays_rebuilt_input)
        .map(|(index, _)| index)
        .collect()
}

/// Each measured root's cost, from `readings` (by probe index).
#[must_use]
pub fn assemble(
    probes: &[Probe],
    readings: &dyn Fn(usize) -> Reading,
    throughput: Option<Throughput>,
) -> Vec<ReplayCost> {
    measured(probes)
        .into_iter()
        .map(|index| {
            let probe = &probes[index];
            let reading = readings(index);
            let rows = reading.rows.unwrap_or(0);
            let bytes = reading.input_bytes.map(|bytes| {
                match reading.input_rows {
                    // The whole input, or nothing of an empty one.
                    Some(input) if input > rows && input > 0 => {
                        let share = u128::from(bytes) * u128::from(rows) / u128::from(input);
                        u64::try_from(share).unwrap_or(u64::MAX)
                    }
                    _ => bytes,
                }
            });
            let error = reading
                .error
                .or_else(|| reading.rows.is_none().then(|| "not counted".to_owned()));
            ReplayCost {
                model: probe.model.clone(),
                driving_input: probe.driving_input.clone(),
                rows,
                bytes,
                partitions: reading.partitions,
                estimated_seconds: throughput.map(|t| to_f64(rows) / t.rows_per_second),
                error,
            }
        })
        .collect()
}

/// The replays together, against `budget`.
#[must_use]
pub fn summarise(
    costs: &[ReplayCost],
    throughput: Option<Throughput>,
    budget: ReplayBudget,
) -> CostSummary {
    let rows = costs.iter().map(|c| c.rows).fold(0u64, u64::saturating_add);
    let bytes = costs
        .iter()
        .filter_map(|c| c.bytes)
        .fold(0u64, u64::saturating_add);
    let mut over_budget = Vec::new();
    if let Some(max) = budget.max_rows
        && rows > max
    {
        over_budget.push(format!(
            "the replays read {} rows, over max_replay_rows = {}",
            thousands(rows),
            thousands(max)
        ));
    }
    if let Some(max) = budget.max_bytes
        && bytes > max
    {
        over_budget.push(format!(
            "the replays read {}, over max_replay_bytes = {}",
            byte_size(bytes),
            byte_size(max)
        ));
    }
    let unmeasured: Vec<&str> = costs
        .iter()
        .filter(|c| c.error.is_some())
        .map(|c| c.model.as_str())
        .collect();
    if budget.is_set() && !unmeasured.is_empty() {
        over_budget.push(format!(
            "the replay windows of {} could not be counted, so the budget cannot be checked",
            unmeasured.join(", ")
        ));
    }
    let without_size: Vec<&str> = costs
        .iter()
        .filter(|c| c.error.is_none() && c.bytes.is_none())
        .map(|c| c.model.as_str())
        .collect();
    if budget.max_bytes.is_some() && !without_size.is_empty() {
        over_budget.push(format!(
            "the size of what {} read{} is unknown (an input that is not a table), so max_replay_bytes cannot be checked",
            without_size.join(", "),
            if without_size.len() == 1 { "s" } else { "" }
        ));
    }
    CostSummary {
        rows,
        bytes,
        roots_without_bytes: costs.iter().filter(|c| c.bytes.is_none()).count(),
        estimated_seconds: throughput.map(|t| to_f64(rows) / t.rows_per_second),
        throughput,
        budget,
        over_budget,
    }
}

impl ReplayCost {
    /// One line: `model  12,000 rows · 1.2 MiB · ~3 s  (from raw__orders; 3 partitions)`.
    #[must_use]
    pub fn describe(&self) -> String {
        if let Some(error) = &self.error {
            return format!(
                "{}  not counted: {error}  (from {})",
                self.model, self.driving_input
            );
        }
        let mut parts = vec![format!("{} rows", thousands(self.rows))];
        if let Some(bytes) = self.bytes {
            parts.push(byte_size(bytes));
        }
        if let Some(seconds) = self.estimated_seconds {
            parts.push(estimate(seconds));
        }
        let mut from = format!("from {}", self.driving_input);
        if !self.partitions.is_empty() {
            let messages: Vec<String> = self
                .partitions
                .iter()
                .map(|p| format!("p{} {}", p.partition, thousands(p.messages)))
                .collect();
            from.push_str(&format!("; messages {}", messages.join(", ")));
        }
        format!("{}  {}  ({from})", self.model, parts.join(" · "))
    }
}

impl CostSummary {
    /// `12,000 rows · 1.2 MiB · ~3 s at 40,000 rows/s (measured over 5 replays)`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = format!("{} rows · {}", thousands(self.rows), byte_size(self.bytes));
        if self.roots_without_bytes > 0 {
            text.push_str(&format!(
                " (and {} input(s) of unknown size)",
                self.roots_without_bytes
            ));
        }
        match (self.estimated_seconds, self.throughput) {
            (Some(seconds), Some(throughput)) => text.push_str(&format!(
                " · {} at {} rows/s (the last {} replay(s) here)",
                estimate(seconds),
                thousands(whole(throughput.rows_per_second)),
                throughput.replays
            )),
            _ => text.push_str(" · no time estimate (no earlier replay measured here)"),
        }
        text
    }
}

#[allow(clippy::cast_precision_loss)]
fn to_f64(value: u64) -> f64 {
    value as f64
}

/// `1234567` as `1,234,567`.
#[must_use]
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Bytes in binary units with one decimal: `512 B`, `1.5 KiB`, `3.0 GiB`.
#[must_use]
pub fn byte_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = to_f64(bytes);
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A non-negative measure rounded to a whole number (0 for anything else).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(value: f64) -> u64 {
    if value.is_finite() && value > 0.0 {
        value.round() as u64
    } else {
        0
    }
}

/// An estimated time: `~0.4 s`, `~3 min 5 s`, or `under 0.1 s`.
#[must_use]
pub fn estimate(seconds: f64) -> String {
    if seconds < 0.1 {
        "under 0.1 s".to_owned()
    } else {
        format!("~{}", duration(seconds))
    }
}

/// Seconds as `0.4 s`, `42 s`, `3 min 5 s`, `2 h 10 min`.
fn duration(seconds: f64) -> String {
    if seconds < 10.0 {
        return format!("{seconds:.1} s");
    }
    let whole = whole(seconds);
    match whole {
        0..60 => format!("{whole} s"),
        60..3600 => format!("{} min {} s", whole / 60, whole % 60),
        _ => format!("{} h {} min", whole / 3600, whole % 3600 / 60),
    }
}

#[cfg(test)]
mod tests;
