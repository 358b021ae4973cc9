//! `_streambuild_virtual_replay_boundaries`: what a virtual deployment records of each
//! replay root's boundary, one row per partition (offsets mode) or one row (timestamp,
//! landed-at and cursor modes). The build renders the insert once the root's capture is
//! known (the planner decides what is recorded; the statement is this table's owner's).

use stb_ddl::{QualifiedName, string_literal};

/// The table the records go to, in the target database.
pub const TABLE: &str = "_streambuild_virtual_replay_boundaries";

const COLUMNS: &str = "deployment_id, root_database_name, root_object_type, root_object_name, anchor_database_name, anchor_object_type, anchor_object_name, boundary_kind, value_kind, partition_value, lower_value, cutoff_value, cutoff_inclusive, captured_at";

/// A relation a record names; `database` is `None` when it is named without one (the
/// session's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relation<'a> {
    pub database: Option<&'a str>,
    pub name: &'a str,
}

/// One row: the partition (offsets mode), the replay's lower bound when it starts at one,
/// and the cutoff it read up to (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundaryRow {
    pub partition: Option<String>,
    pub lower: Option<String>,
    pub cutoff: String,
}

/// One root's boundary, as a deployment records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary<'a> {
    pub deployment_id: &'a str,
    pub root_table: Relation<'a>,
    pub anchor: Relation<'a>,
    /// `offsets`, `timestamp`, `landed_at` or `cursor`.
    pub boundary_kind: &'a str,
    /// `integer` or `timestamp`.
    pub value_kind: &'a str,
    pub rows: Vec<BoundaryRow>,
    /// When the capture was taken (`YYYY-MM-DD HH:MM:SS.fff`, UTC); `None`: the insert's
    /// own time.
    pub captured_at: Option<&'a str>,
}

fn optional(text: Option<&str>) -> String {
    text.map_or_else(|| "NULL".to_owned(), string_literal)
}

/// The insert recording `boundary` in `database`. A capture that found nothing to replay
/// records no row (the statement inserts nothing), as the reference does for an empty
/// anchor.
#[must_use]
pub fn insert(database: &str, boundary: &Boundary<'_>) -> String {
    let table = QualifiedName::new(database, TABLE);
    let captured_at = boundary.captured_at.map_or_else(
        || "now64(3, 'UTC')".to_owned(),
        |at| format!("toDateTime64({}, 3, 'UTC')", string_literal(at)),
    );
    let tuple = |row: &BoundaryRow| {
        [
            string_literal(boundary.deployment_id),
            optional(boundary.root_table.database),
            string_literal("table"),
            string_literal(boundary.root_table.name),
            optional(boundary.anchor.database),
            string_literal("table"),
            string_literal(boundary.anchor.name),
            string_literal(boundary.boundary_kind),
            string_literal(boundary.value_kind),
            optional(row.partition.as_deref()),
            optional(row.lower.as_deref()),
            string_literal(&row.cutoff),
            "true".to_owned(),
            captured_at.clone(),
        ]
        .join(", ")
    };
    if boundary.rows.is_empty() {
        let nothing = BoundaryRow {
            partition: None,
            lower: None,
            cutoff: String::new(),
        };
        return format!(
            "INSERT INTO {table} ({COLUMNS}) SELECT {} WHERE 0",
            tuple(&nothing)
        );
    }
    let values: Vec<String> = boundary
        .rows
        .iter()
        .map(|row| format!("({})", tuple(row)))
        .collect();
    format!(
        "INSERT INTO {table} ({COLUMNS}) VALUES {}",
        values.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boundary(rows: Vec<BoundaryRow>, captured_at: Option<&str>) -> Boundary<'_> {
        Boundary {
            deployment_id: "d1",
            root_table: Relation {
                database: Some("shop"),
                name: "tbl__orders__d1",
            },
            anchor: Relation {
                database: Some("landing"),
                name: "events",
            },
            boundary_kind: "offsets",
            value_kind: "integer",
            rows,
            captured_at,
        }
    }

    #[test]
    fn each_row_is_one_tuple_and_no_row_inserts_nothing() {
        let row = |partition: &str, cutoff: &str| BoundaryRow {
            partition: Some(partition.to_owned()),
            lower: None,
            cutoff: cutoff.to_owned(),
        };
        let sql = insert(
            "shop",
            &boundary(
                vec![row("0", "19"), row("1", "9")],
                Some("2026-07-28 00:00:03.000"),
            ),
        );
        assert_eq!(
            sql,
            "INSERT INTO shop._streambuild_virtual_replay_boundaries (deployment_id, root_database_name, root_object_type, root_object_name, anchor_database_name, anchor_object_type, anchor_object_name, boundary_kind, value_kind, partition_value, lower_value, cutoff_value, cutoff_inclusive, captured_at) VALUES ('d1', 'shop', 'table', 'tbl__orders__d1', 'landing', 'table', 'events', 'offsets', 'integer', '0', NULL, '19', true, toDateTime64('2026-07-28 00:00:03.000', 3, 'UTC')), ('d1', 'shop', 'table', 'tbl__orders__d1', 'landing', 'table', 'events', 'offsets', 'integer', '1', NULL, '9', true, toDateTime64('2026-07-28 00:00:03.000', 3, 'UTC'))"
        );
        let nothing = insert("shop", &boundary(Vec::new(), None));
        assert!(nothing.ends_with("now64(3, 'UTC') WHERE 0"), "{nothing}");
    }
}
