//! Adopted `stream_table` sources are read, never created, altered or dropped, so every
//! plan and build first checks that the table still looks the way the source declares.
//! Pure: it reads a [`Catalog`] already loaded.

use crate::catalog::Catalog;

/// An adopted source as declared: its table and role -> physical column mapping.
#[derive(Debug, Clone, Copy)]
pub struct AdoptedTable<'a> {
    pub source: &'a str,
    pub table: &'a str,
    pub roles: &'a [(String, String)],
}

/// One way the table does not match its declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptedProblem {
    pub source: String,
    pub message: String,
    pub hint: &'static str,
}

/// The stable code of every adopted-table problem.
pub const ADOPTED_CODE: &str = "STB-SOURCE-001";

/// The type inside `Nullable(...)` and `LowCardinality(...)` wrappers.
fn unwrapped(data_type: &str) -> &str {
    let mut current = data_type.trim();
    loop {
        let inner = ["Nullable(", "LowCardinality("]
            .iter()
            .find_map(|w| current.strip_prefix(w).and_then(|r| r.strip_suffix(')')));
        match inner {
            Some(inner) => current = inner.trim(),
            None => return current,
        }
    }
}

fn is_integer(data_type: &str) -> bool {
    let base = unwrapped(data_type);
    let digits = base
        .strip_prefix("UInt")
        .or_else(|| base.strip_prefix("Int"));
    matches!(digits, Some("8" | "16" | "32" | "64" | "128" | "256"))
}

fn is_date_time(data_type: &str) -> bool {
    let base = unwrapped(data_type);
    base == "Date" || base == "Date32" || base.starts_with("DateTime")
}

/// Checks one adopted source against the catalog of the target database.
#[must_use]
pub fn validate_adopted(catalog: &Catalog, adopted: &AdoptedTable<'_>) -> Vec<AdoptedProblem> {
    let problem = |message: String, hint: &'static str| AdoptedProblem {
        source: adopted.source.to_owned(),
        message,
        hint,
    };
    let Some(relation) = catalog.relation(adopted.table) else {
        return vec![problem(
            format!(
                "Adopted source '{}' reads table '{}', which does not exist in the target database",
                adopted.source, adopted.table
            ),
            "create the table (StreamBuild never creates adopted tables) or fix table_name",
        )];
    };
    let mut problems = Vec::new();
    for (role, physical) in adopted.roles {
        let Some(column) = relation.columns.iter().find(|c| c.name == *physical) else {
            problems.push(problem(
                format!(
                    "Adopted source '{}' maps {role} to column '{physical}', which table '{}' does not have",
                    adopted.source, adopted.table
                ),
                "fix replay_boundary.columns in the source YAML",
            ));
            continue;
        };
        let (fits, expected) = match role.as_str() {
            "_replay_timestamp" | "_replay_landed_at" => {
                (is_date_time(&column.data_type), "a Date or DateTime type")
            }
            _ => (is_integer(&column.data_type), "an integer type"),
        };
        if !fits {
            problems.push(problem(
                format!(
                    "Adopted source '{}' column '{physical}' ({role}) is {}, but must be {expected}",
                    adopted.source, column.data_type
                ),
                "map the role to a column of the right type",
            ));
        }
        if physical != role && relation.columns.iter().any(|c| c.name == *role) {
            problems.push(problem(
                format!(
                    "Adopted source '{}' maps {role} to '{physical}', but table '{}' already has a column named {role}; the alias would collide",
                    adopted.source, adopted.table
                ),
                "map the role to that column instead, or rename one of them",
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogColumn, CatalogRelation};

    fn catalog(columns: &[(&str, &str)]) -> Catalog {
        Catalog::new(
            "UTC",
            vec![CatalogRelation {
                name: "events".into(),
                engine: "MergeTree".into(),
                sorting_key: String::new(),
                partition_key: String::new(),
                create_table_query: "CREATE TABLE ...".into(),
                as_select: String::new(),
                uuid: String::new(),
                defined: true,
                columns: columns
                    .iter()
                    .map(|(n, t)| CatalogColumn {
                        name: (*n).into(),
                        data_type: (*t).into(),
                        default_expression: String::new(),
                    })
                    .collect::<Vec<_>>()
                    .into(),
            }],
        )
    }

    fn roles(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
            .collect()
    }

    fn check(columns: &[(&str, &str)], mapping: &[(&str, &str)], table: &str) -> Vec<String> {
        let roles = roles(mapping);
        validate_adopted(
            &catalog(columns),
            &AdoptedTable {
                source: "events_src",
                table,
                roles: &roles,
            },
        )
        .into_iter()
        .map(|p| p.message)
        .collect()
    }

    #[test]
    fn a_matching_table_passes_with_wrapped_types() {
        let problems = check(
            &[
                ("p", "LowCardinality(Nullable(Int32))"),
                ("o", "UInt64"),
                ("ts", "Nullable(DateTime64(3, 'UTC'))"),
            ],
            &[
                ("_replay_partition", "p"),
                ("_replay_offset", "o"),
                ("_replay_timestamp", "ts"),
            ],
            "events",
        );
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn every_mismatch_is_reported() {
        let problems = check(
            &[
                ("p", "String"),
                ("ts", "UInt32"),
                ("_replay_offset", "UInt64"),
                ("o", "UInt64"),
            ],
            &[
                ("_replay_partition", "p"),
                ("_replay_offset", "o"),
                ("_replay_timestamp", "ts"),
                ("_replay_cursor", "missing"),
            ],
            "events",
        );
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(
            problems[0].contains("'p' (_replay_partition) is String, but must be an integer type")
        );
        assert!(problems[1].contains("already has a column named _replay_offset"));
        assert!(problems[2].contains("must be a Date or DateTime type"));
        assert!(problems[3].contains("does not have"));
        assert!(check(&[], &[], "gone")[0].contains("does not exist"));
        assert!(!is_integer("Int512"));
        assert!(!is_integer("Float64"));
    }
}
