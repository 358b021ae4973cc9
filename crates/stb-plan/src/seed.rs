//! Seeded deployments: a virtual copy bounded by `--start-time` replays retained history
//! from the start only, and takes the rows before it from the active copy, which may hold
//! history the source no longer does. The seed is the replay's complement, rendered from
//! the same capture: offsets before each partition's lower bound (and every row of a
//! partition the source no longer holds), or positions before the start.
//!
//! Exactly once: rows before the bound were settled before the copy's view went live
//! (offsets and cursors only grow; a landing time is stamped when a row lands), so the
//! live view cannot write them again; rows the copy holds already are left out by their
//! lineage key where the copy has one (a partition the source no longer holds may still
//! receive rows). An event time is neither: a late event older than the start that lands
//! while the build runs reaches the copy live and may be copied again; the plan says so.

use crate::options::StartTime;
use crate::replay::{
    BoundaryMode, CURSOR, Capture, OFFSET, PARTITION, partition_bounds, time_literal,
};

/// Copies the active copy's rows before a replay's lower bound into the new copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seed {
    /// The active copy, qualified.
    pub source: String,
    /// The new copy (the root's table), qualified.
    pub target: String,
    /// The columns both have, in the new copy's order (added columns take their defaults).
    pub columns: Vec<String>,
    pub mode: BoundaryMode,
    pub start: StartTime,
    /// The lineage key the copy keeps, when the mode has one: rows the copy holds
    /// already are not copied again.
    #[serde(deserialize_with = "crate::replay::lineage_names::keys")]
    pub skip_existing: Option<&'static [&'static str]>,
}

impl Seed {
    /// The rows to copy, as the capture bounds the replay.
    #[must_use]
    pub fn predicate(&self, capture: &Capture) -> String {
        match (self.mode, capture) {
            (_, Capture::Offsets { runs, .. }) => {
                let partitions = partition_bounds(runs);
                if partitions.is_empty() {
                    return "1".to_owned();
                }
                let mut before: Vec<String> = partitions
                    .iter()
                    .map(|(partition, lower, _)| {
                        format!("({PARTITION} = {partition} AND {OFFSET} < {lower})")
                    })
                    .collect();
                let listed: Vec<String> =
                    partitions.iter().map(|(p, _, _)| p.to_string()).collect();
                before.push(format!("{PARTITION} NOT IN ({})", listed.join(", ")));
                before.join(" OR ")
            }
            (BoundaryMode::Cursor, Capture::Scalar { lower, .. }) => match lower {
                Some(lower) => format!("{CURSOR} < {lower}"),
                // No cursor at or after the start: everything is history.
                None => "1".to_owned(),
            },
            (mode, Capture::Scalar { .. }) => format!(
                "{} < {}",
                mode.scalar_column(),
                time_literal(self.start.as_str())
            ),
        }
    }

    /// The seed statement.
    #[must_use]
    pub fn render(&self, capture: &Capture) -> String {
        let columns = self.columns.join(", ");
        let mut predicate = self.predicate(capture);
        if let Some(keys) = self.skip_existing {
            let keys = keys.join(", ");
            predicate = format!(
                "({predicate}) AND ({keys}) NOT IN (SELECT {keys} FROM {})",
                self.target
            );
        }
        format!(
            "INSERT INTO {} ({columns}) SELECT {columns} FROM {} WHERE {predicate}",
            self.target, self.source
        )
    }

    /// What the statement records hold until the capture is known.
    #[must_use]
    pub fn placeholder(&self, model: &str) -> String {
        format!(
            "-- seed_{model}: INSERT INTO {} the rows of {} before the start of capture_replay_{model} ({} boundary); rendered at runtime",
            self.target,
            self.source,
            self.mode.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::OffsetRun;

    fn seed(mode: BoundaryMode, keys: Option<&'static [&'static str]>) -> Seed {
        Seed {
            source: "db.tbl__x__20261130T000000Z_aaaaaa".into(),
            target: "db.tbl__x__20261201T000000Z_bbbbbb".into(),
            columns: vec![
                "_replay_partition".into(),
                "_replay_offset".into(),
                "amount".into(),
            ],
            mode,
            start: crate::options::parse_start_time("2026-11-01T06:15:00Z").expect("start"),
            skip_existing: keys,
        }
    }

    fn run(partition: i128, lower: i128, upper: i128) -> OffsetRun {
        OffsetRun {
            partition,
            lower,
            upper,
        }
    }

    #[test]
    fn offsets_seed_what_each_partition_holds_before_its_replay_and_lost_partitions_whole() {
        let capture = Capture::Offsets {
            runs: vec![run(0, 4, 6), run(0, 8, 9), run(1, 2, 5)],
            captured_at: None,
        };
        let keys: &'static [&'static str] = &[PARTITION, OFFSET];
        assert_eq!(
            seed(BoundaryMode::Offsets, Some(keys)).render(&capture),
            "INSERT INTO db.tbl__x__20261201T000000Z_bbbbbb (_replay_partition, _replay_offset, amount) \
             SELECT _replay_partition, _replay_offset, amount FROM db.tbl__x__20261130T000000Z_aaaaaa \
             WHERE ((_replay_partition = 0 AND _replay_offset < 4) OR (_replay_partition = 1 AND _replay_offset < 2) \
             OR _replay_partition NOT IN (0, 1)) AND (_replay_partition, _replay_offset) NOT IN \
             (SELECT _replay_partition, _replay_offset FROM db.tbl__x__20261201T000000Z_bbbbbb)"
        );
        // A source that holds nothing: the active copy is all the history there is.
        let empty = Capture::Offsets {
            runs: Vec::new(),
            captured_at: None,
        };
        assert_eq!(seed(BoundaryMode::Offsets, None).predicate(&empty), "1");
    }

    #[test]
    fn scalar_modes_seed_before_the_start_or_the_first_cursor_after_it() {
        let scalar = |lower: Option<&str>| Capture::Scalar {
            cutoff: Some("99".into()),
            lower: lower.map(str::to_owned),
            first: None,
            last: None,
            rows: 1,
            captured_at: None,
        };
        assert_eq!(
            seed(BoundaryMode::Timestamp, None).predicate(&scalar(Some("2026-11-01 07:00:00.000"))),
            "_replay_timestamp < toDateTime64('2026-11-01 06:15:00.000', 3, 'UTC')"
        );
        assert_eq!(
            seed(BoundaryMode::LandedAt, None).predicate(&scalar(None)),
            "_replay_landed_at < toDateTime64('2026-11-01 06:15:00.000', 3, 'UTC')"
        );
        assert_eq!(
            seed(BoundaryMode::Cursor, None).predicate(&scalar(Some("17"))),
            "_replay_cursor < 17"
        );
        assert_eq!(
            seed(BoundaryMode::Cursor, None).predicate(&scalar(None)),
            "1"
        );
    }
}
