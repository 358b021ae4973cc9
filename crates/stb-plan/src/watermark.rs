//! What a virtual deployment records of each replay root's boundary (the warehouse's
//! replay-boundary records, whose insert `stb_warehouse::deployments::boundaries` renders):
//! one row per partition (offsets mode) or one row (timestamp, landed-at and cursor
//! modes), written by a step of its own once the captures of its stage are taken. The step is part of the workflow, so the build's step files
//! hold it, and a rerun of an incomplete deployment records its own capture again (the
//! row with the latest `captured_at` is the one its replay used).

use std::collections::BTreeMap;

use stb_model::planning::{PlanModel, PlanSource};

use crate::replay::{BoundaryMode, Capture};
use crate::workflow::{Action, Phase, Step, Workflow};

/// A relation a record names: the root's table, or the anchor its replay reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Named {
    /// `None` when the relation is named without a database (the session's).
    pub database: Option<String>,
    pub name: String,
}

/// One root's record: what it is about, rendered once its capture is known.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Watermark {
    /// The root, by its index in [`Workflow::roots`].
    pub root: usize,
    pub deployment_id: String,
    pub root_table: Named,
    pub anchor: Named,
    pub mode: BoundaryMode,
    /// The replay starts at a lower bound (`--start-time`): each row's `lower_value` says
    /// where. Without one it is `NULL`: the replay reads from the first retained row.
    pub bounded_below: bool,
    /// The table the records go to (its owner, the warehouse adapter, names it).
    pub table: String,
}

impl Watermark {
    /// What the statement records hold until the capture is known.
    #[must_use]
    pub fn placeholder(&self, model: &str) -> String {
        format!(
            "-- capture_watermark_{model}: INSERT INTO {} the {} boundary capture_replay_{model} found; rendered at runtime",
            self.table,
            self.mode.as_str()
        )
    }

    /// What its values are: `integer` (offsets, cursor) or `timestamp`.
    #[must_use]
    pub fn value_kind(&self) -> &'static str {
        match self.mode {
            BoundaryMode::Offsets | BoundaryMode::Cursor => "integer",
            BoundaryMode::Timestamp | BoundaryMode::LandedAt => "timestamp",
        }
    }

    /// (partition, lower bound, cutoff) of each row to record of what `capture` found:
    /// one per partition in offsets mode (its lowest and highest offset), else one, and
    /// none when the capture found nothing to replay.
    #[must_use]
    pub fn rows(&self, capture: &Capture) -> Vec<(Option<String>, Option<String>, String)> {
        match capture {
            Capture::Offsets { runs, .. } => {
                let mut partitions: BTreeMap<i128, (i128, i128)> = BTreeMap::new();
                for run in runs {
                    let bounds = partitions
                        .entry(run.partition)
                        .or_insert((run.lower, run.upper));
                    bounds.0 = bounds.0.min(run.lower);
                    bounds.1 = bounds.1.max(run.upper);
                }
                partitions
                    .into_iter()
                    .map(|(partition, (lower, upper))| {
                        (
                            Some(partition.to_string()),
                            self.bounded_below.then(|| lower.to_string()),
                            upper.to_string(),
                        )
                    })
                    .collect()
            }
            Capture::Scalar { cutoff, lower, .. } => cutoff
                .iter()
                .map(|cutoff| (None, lower.clone(), cutoff.clone()))
                .collect(),
        }
    }
}

/// Adds a `capture_watermark_<root>` step for each capture of `workflow`, after the run of
/// captures it belongs to, recording it for deployment `deployment_id`. `models` are the
/// deployment's (under their physical names); a root whose table or anchor relation is
/// unknown (a table function) is left without a record. The records go to `table`.
pub fn record_boundaries(
    workflow: &mut Workflow,
    deployment_id: &str,
    (models, sources): (&[PlanModel], &[PlanSource]),
    table: &str,
) {
    let database = workflow.database.clone();
    let in_target = |name: &str| Named {
        database: Some(database.clone()),
        name: name.to_owned(),
    };
    let by_name = crate::work::ModelIndex::new(models);
    let mut steps = Vec::with_capacity(workflow.steps.len() + workflow.roots.len());
    // A stage's captures stay back to back (their boundaries as close together as the
    // workflow makes them): its records follow the last of them.
    let mut records: Vec<Step> = Vec::new();
    for step in std::mem::take(&mut workflow.steps) {
        let Action::Capture(root) = step.action else {
            steps.append(&mut records);
            steps.push(step);
            continue;
        };
        steps.push(step);
        let replay = &workflow.roots[root];
        let root_table = by_name
            .get(&replay.model)
            .and_then(PlanModel::table)
            .map(&in_target);
        let anchor = match by_name.get(&replay.driving_input) {
            Some(model) => model.table().map(&in_target),
            None => sources
                .iter()
                .find(|s| s.name == replay.driving_input)
                .and_then(|source| match &source.landing {
                    Some(landing) => Some(in_target(&landing.raw_table)),
                    // A relation named without its database is in the target's.
                    None => source.relation.as_deref().map(|relation| {
                        let mut anchor = named(relation);
                        anchor.database.get_or_insert_with(|| database.clone());
                        anchor
                    }),
                }),
        };
        let (Some(root_table), Some(anchor)) = (root_table, anchor) else {
            continue;
        };
        workflow.watermarks.push(Watermark {
            root,
            deployment_id: deployment_id.to_owned(),
            root_table,
            anchor,
            mode: replay.template.anchor.mode,
            bounded_below: replay.start_time.is_some(),
            table: table.to_owned(),
        });
        records.push(Step::of(
            format!("capture_watermark_{}", replay.model),
            Phase::Boundary,
            Action::Watermark(workflow.watermarks.len() - 1),
        ));
    }
    steps.append(&mut records);
    workflow.steps = steps;
}

/// `db.table` or `table`, as a source names its relation (identifiers may be quoted).
fn named(relation: &str) -> Named {
    let unquote = |part: &str| part.trim().trim_matches('`').trim_matches('"').to_owned();
    match relation.split_once('.') {
        Some((database, name)) => Named {
            database: Some(unquote(database)),
            name: unquote(name),
        },
        None => Named {
            database: None,
            name: unquote(relation),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::OffsetRun;

    fn watermark(mode: BoundaryMode, bounded_below: bool) -> Watermark {
        Watermark {
            root: 0,
            deployment_id: "d1".into(),
            root_table: Named {
                database: Some("shop".into()),
                name: "tbl__orders__d1".into(),
            },
            anchor: named("`landing`.`events`"),
            mode,
            bounded_below,
            table: "records".into(),
        }
    }

    #[test]
    fn offsets_record_one_row_per_partition_with_its_highest_offset() {
        let capture = Capture::Offsets {
            runs: vec![
                OffsetRun {
                    partition: 1,
                    lower: 0,
                    upper: 4,
                },
                OffsetRun {
                    partition: 0,
                    lower: 10,
                    upper: 19,
                },
                OffsetRun {
                    partition: 1,
                    lower: 7,
                    upper: 9,
                },
            ],
            captured_at: Some("2026-07-28 00:00:03.000".into()),
        };
        let row = |partition: &str, lower: Option<&str>, cutoff: &str| {
            (
                Some(partition.to_owned()),
                lower.map(str::to_owned),
                cutoff.to_owned(),
            )
        };
        assert_eq!(
            watermark(BoundaryMode::Offsets, false).rows(&capture),
            [row("0", None, "19"), row("1", None, "9")]
        );
        // A replay that starts at a lower bound records where, per partition.
        assert_eq!(
            watermark(BoundaryMode::Offsets, true).rows(&capture),
            [row("0", Some("10"), "19"), row("1", Some("0"), "9")]
        );
    }

    #[test]
    fn scalar_modes_record_one_row_and_nothing_without_a_cutoff() {
        let capture = |cutoff: Option<&str>, lower: Option<&str>| Capture::Scalar {
            cutoff: cutoff.map(str::to_owned),
            lower: lower.map(str::to_owned),
            first: None,
            last: None,
            rows: 1,
            captured_at: None,
        };
        let cursor = watermark(BoundaryMode::Cursor, true);
        assert_eq!(
            cursor.rows(&capture(Some("3"), Some("2"))),
            [(None, Some("2".to_owned()), "3".to_owned())]
        );
        assert_eq!(cursor.value_kind(), "integer");
        let time = watermark(BoundaryMode::Timestamp, false);
        assert_eq!(
            time.rows(&capture(Some("2026-07-28 00:00:03.000"), None)),
            [(None, None, "2026-07-28 00:00:03.000".to_owned())]
        );
        assert_eq!(time.value_kind(), "timestamp");
        assert!(time.rows(&capture(None, None)).is_empty());
    }

    #[test]
    fn a_source_relation_is_named_with_or_without_its_database() {
        assert_eq!(
            named("events"),
            Named {
                database: None,
                name: "events".into()
            }
        );
        assert_eq!(
            named("`raw`.`events`"),
            Named {
                database: Some("raw".into()),
                name: "events".into()
            }
        );
    }
}
