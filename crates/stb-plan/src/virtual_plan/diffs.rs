//! `sql_diffs` of a virtual plan: for each object rebuilt because its spec changed, the
//! active deployment's recorded spec against the desired one, as a unified diff of
//! reviewable text (a table's columns and storage; a view's query and target).

use serde::Serialize;

/// One changed object's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SqlDiff {
    /// The logical relation (`tbl__orders`).
    pub key: String,
    pub object_type: &'static str,
    pub name: String,
    /// `--- active` / `+++ desired` and the hunks, one line each.
    pub diff_lines: Vec<String>,
}

/// A recorded or desired spec (the JSON `object_fingerprint` makes) as text a reviewer
/// reads: one column per line, then the storage; or the target and the query. A spec
/// that is not such JSON is shown as it is.
#[must_use]
pub fn spec_text(spec: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(spec) else {
        return format!("{spec}\n");
    };
    let mut text = String::new();
    if let Some(columns) = value["columns"].as_array() {
        for column in columns {
            let name = column[0].as_str().unwrap_or_default();
            let data_type = column[1].as_str().unwrap_or_default();
            text.push_str(&format!("column {name} {data_type}\n"));
        }
    }
    if let Some(storage) = value["storage"].as_str() {
        text.push_str(&format!("storage {storage}\n"));
    }
    if let Some(target) = value["target"].as_str() {
        text.push_str(&format!("TO {target}\n"));
    }
    if let Some(query) = value["query"].as_str() {
        text.push_str(query.trim_end());
        text.push('\n');
    }
    text
}

/// True when two specs describe the same object: equal text, or equal once every type
/// (a column's, a cast's in the query) is spelled as the server prints it, so that
/// `datetime64(3)` for `DateTime64(3)` rebuilds nothing.
#[must_use]
pub fn same_spec(recorded: &str, desired: &str) -> bool {
    recorded == desired
        || matches!(
            (canonical_spec(recorded), canonical_spec(desired)),
            (Some(a), Some(b)) if a == b
        )
}

fn canonical_spec(spec: &str) -> Option<serde_json::Value> {
    let mut value = serde_json::from_str::<serde_json::Value>(spec).ok()?;
    if !value.is_object() {
        return None;
    }
    if let Some(columns) = value
        .get_mut("columns")
        .and_then(serde_json::Value::as_array_mut)
    {
        for column in columns {
            if let Some(slot) = column.get_mut(1)
                && let Some(data_type) = slot.as_str()
            {
                *slot = stb_sql::types::canonical_type(data_type).into();
            }
        }
    }
    if let Some(query) = value["query"].as_str() {
        value["query"] = stb_sql::types::canonical_query_types(query).into();
    }
    Some(value)
}

/// The unified diff of `active` against `desired`, or `None` when they are the same
/// object ([`same_spec`]).
#[must_use]
pub fn diff(key: &str, object_type: &'static str, active: &str, desired: &str) -> Option<SqlDiff> {
    let (before, after) = (spec_text(active), spec_text(desired));
    if before == after || same_spec(active, desired) {
        return None;
    }
    let unified = similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header("active", "desired")
        .to_string();
    Some(SqlDiff {
        key: key.to_owned(),
        object_type,
        name: key.to_owned(),
        diff_lines: unified.lines().map(str::to_owned).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_that_are_not_objects_compare_as_text() {
        assert!(same_spec("[1]", "[1]"));
        assert!(!same_spec("[1]", "[2]"));
        assert!(!same_spec(
            r#"{"columns":[["a"]]}"#,
            r#"{"columns":[["b"]]}"#
        ));
    }

    #[test]
    fn a_table_shows_its_columns_and_storage_and_a_view_its_query() {
        let active = r#"{"kind":"table","columns":[["id","UInt64"],["amount","UInt64"]],"storage":"MergeTree ORDER BY id"}"#;
        let desired = r#"{"kind":"table","columns":[["id","UInt64"],["amount","Float64"],["note","String"]],"storage":"MergeTree ORDER BY id"}"#;
        let table = diff("tbl__orders", "table", active, desired).expect("a diff");
        assert_eq!(
            table.diff_lines,
            [
                "--- active",
                "+++ desired",
                "@@ -1,3 +1,4 @@",
                " column id UInt64",
                "-column amount UInt64",
                "+column amount Float64",
                "+column note String",
                " storage MergeTree ORDER BY id",
            ]
        );
        let view = diff(
            "view__report",
            "view",
            r#"{"kind":"view","query":"SELECT 1\n"}"#,
            r#"{"kind":"view","query":"SELECT 2"}"#,
        )
        .expect("a diff");
        assert_eq!(view.diff_lines[3..], ["-SELECT 1", "+SELECT 2"]);
        // Equal text (a trailing newline apart): nothing to show.
        assert_eq!(
            diff(
                "view__report",
                "view",
                r#"{"kind":"view","query":"SELECT 1\n"}"#,
                r#"{"kind":"view","query":"SELECT 1"}"#
            ),
            None
        );
        assert_eq!(spec_text("not json"), "not json\n");
    }
}
