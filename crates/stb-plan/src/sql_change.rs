//! What changed in a model's SQL since its last successful direct build: the status shown
//! per model in a plan, with a unified diff when the query differs.

use sha2::{Digest, Sha256};

/// A model's SQL against its recorded baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlChangeStatus {
    /// Never built by StreamBuild (or its records are gone).
    FirstBaseline,
    QueryChanged,
    NoQueryChange,
    /// The records could not be read; nothing is known.
    BaselineUnavailable,
}

impl SqlChangeStatus {
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FirstBaseline => "first_baseline",
            Self::QueryChanged => "query_changed",
            Self::NoQueryChange => "no_query_change",
            Self::BaselineUnavailable => "baseline_unavailable",
        }
    }
}

/// The baseline a plan compares with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline<'a> {
    /// The fingerprint table is missing, or holds nothing for this model.
    Absent,
    /// The fingerprint table could not be read.
    Unavailable,
    /// The SQL recorded at the last successful build.
    Recorded(&'a str),
}

/// The change of one model's SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlChange {
    pub status: SqlChangeStatus,
    pub current_hash: String,
    pub previous_hash: Option<String>,
    /// `--- previous` / `+++ current` hunks; empty unless the query changed.
    pub unified_diff: String,
}

/// SHA-256 of the text, hex.
#[must_use]
pub fn sql_hash(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True when two query texts are the same query: equal, or equal once every cast's type
/// is spelled as the server prints it (`::datetime64(3)` is `::DateTime64(3)`).
#[must_use]
pub fn same_query(previous: &str, current: &str) -> bool {
    previous == current
        || stb_sql::types::canonical_query_types(previous)
            == stb_sql::types::canonical_query_types(current)
}

/// Compares `current` with the baseline.
#[must_use]
pub fn sql_change(current: &str, baseline: &Baseline<'_>) -> SqlChange {
    let current_hash = sql_hash(current);
    let (status, previous_hash, unified_diff) = match baseline {
        Baseline::Absent => (SqlChangeStatus::FirstBaseline, None, String::new()),
        Baseline::Unavailable => (SqlChangeStatus::BaselineUnavailable, None, String::new()),
        Baseline::Recorded(previous) => {
            let previous_hash = sql_hash(previous);
            if previous_hash == current_hash || same_query(previous, current) {
                (
                    SqlChangeStatus::NoQueryChange,
                    Some(previous_hash),
                    String::new(),
                )
            } else {
                let diff = similar::TextDiff::from_lines(*previous, current)
                    .unified_diff()
                    .context_radius(3)
                    .header("previous", "current")
                    .to_string();
                (SqlChangeStatus::QueryChanged, Some(previous_hash), diff)
            }
        }
    };
    SqlChange {
        status,
        current_hash,
        previous_hash,
        unified_diff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_diffs() {
        let current = "SELECT\n  a,\n  b + 1 AS b\nFROM x\n";
        assert_eq!(
            sql_change(current, &Baseline::Absent).status,
            SqlChangeStatus::FirstBaseline
        );
        assert_eq!(
            sql_change(current, &Baseline::Unavailable).status.as_str(),
            "baseline_unavailable"
        );
        let same = sql_change(current, &Baseline::Recorded(current));
        assert_eq!(same.status, SqlChangeStatus::NoQueryChange);
        assert_eq!(same.previous_hash.as_ref(), Some(&same.current_hash));
        assert!(same.unified_diff.is_empty());
        let changed = sql_change(
            current,
            &Baseline::Recorded("SELECT\n  a,\n  b AS b\nFROM x\n"),
        );
        assert_eq!(changed.status, SqlChangeStatus::QueryChanged);
        assert_eq!(
            changed.unified_diff,
            "--- previous\n+++ current\n@@ -1,4 +1,4 @@\n SELECT\n   a,\n-  b AS b\n+  b + 1 AS b\n FROM x\n"
        );
        assert_eq!(
            sql_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
