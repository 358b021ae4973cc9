//! The statements of a data diff, made from what the catalog says of the two relations:
//! pure, so each shape is tested without a warehouse.
//!
//! Rows are matched by a key, as text. Each side is reduced to one row per key (how many
//! rows it holds and the sum of their hashes: a multiset, so duplicate keys compare too),
//! and the two sides are grouped together by key. A large table is compared by hashed buckets of keys
//! first (one row per bucket and side); only the buckets whose counts or hashes differ are
//! joined.

use std::fmt::Write as _;

/// The column sets that position a row in its replay history, most precise first: both
/// copies were replayed and fed live over different spans, so a diff compares only the
/// span both hold.
pub const WINDOW_COLUMNS: [&[&str]; 4] = [
    &["_replay_partition", "_replay_offset"],
    &["_replay_cursor"],
    &["_replay_timestamp"],
    &["_replay_landed_at"],
];

/// What two relations are compared on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The key expressions (column names, or the sorting key's expressions).
    pub key: Vec<String>,
    /// Columns both sides have, in the `to` side's order; a retyped one is compared as
    /// text.
    pub compared: Vec<String>,
    pub retyped: Vec<String>,
    /// Columns holding aggregate states, compared by their finalised values.
    pub aggregates: Vec<String>,
}

impl Shape {
    /// The key as text, expression by expression: the server's own rendering, equal for
    /// equal values whatever each copy's type (a key retyped from `UInt32` to `UInt64`
    /// still matches), and what the samples are read back by.
    fn key_texts(&self) -> Vec<String> {
        self.key
            .iter()
            .map(|expression| format!("toString({expression})"))
            .collect()
    }

    /// The key's hash, which buckets rows.
    fn key_hash(&self) -> String {
        format!("cityHash64(tuple({}))", self.key_texts().join(", "))
    }

    /// A row's value, every compared column (retyped ones as text, aggregate states
    /// finalised).
    fn value_hash(&self) -> String {
        let columns: Vec<String> = self
            .compared
            .iter()
            .map(|column| {
                let quoted = stb_ddl::identifier(column);
                if self.aggregates.contains(column) {
                    format!("toString(finalizeAggregation({quoted}))")
                } else if self.retyped.contains(column) {
                    format!("toString({quoted})")
                } else {
                    quoted
                }
            })
            .collect();
        format!("cityHash64({})", columns.join(", "))
    }

    /// The key as output columns named `__stb_k0`, `__stb_k1`, ...
    fn key_columns(&self) -> String {
        self.key_texts()
            .iter()
            .enumerate()
            .map(|(index, text)| format!("{text} AS {KEY}{index}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn key_names(&self) -> String {
        (0..self.key.len())
            .map(|index| format!("{KEY}{index}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The prefix of the key columns the statements add (unlikely in a model's columns).
pub const KEY: &str = "__stb_k";

/// A relation as the diff reads it: merged first when its engine merges rows by key
/// (what readers of a `ReplacingMergeTree` see is not what its parts hold until they
/// merge, and two copies merge at different times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    pub relation: &'a str,
    pub merged: bool,
}

impl std::fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.merged {
            write!(f, "{} FINAL", self.relation)
        } else {
            f.write_str(self.relation)
        }
    }
}

/// The common window of the two relations, once each side's bounds are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// Neither side positions its rows: every row is compared.
    Everything,
    /// A scalar column's common span, inclusive (values as the server prints them).
    Span {
        column: String,
        lower: String,
        upper: String,
    },
    /// Per Kafka partition, the common span of offsets.
    Offsets(Vec<(String, String, String)>),
    /// The two sides share no part of their history.
    Disjoint,
}

impl Window {
    /// The predicate that keeps a row inside the window.
    #[must_use]
    pub fn predicate(&self) -> String {
        match self {
            Self::Everything => "1".to_owned(),
            Self::Disjoint => "0".to_owned(),
            Self::Span {
                column,
                lower,
                upper,
            } => {
                let column = stb_ddl::identifier(column);
                format!(
                    "{column} >= {} AND {column} <= {}",
                    stb_ddl::string_literal(lower),
                    stb_ddl::string_literal(upper)
                )
            }
            Self::Offsets(partitions) => {
                let parts: Vec<String> = partitions
                    .iter()
                    .map(|(partition, lower, upper)| {
                        format!(
                            "(_replay_partition = {} AND _replay_offset BETWEEN {} AND {})",
                            stb_ddl::string_literal(partition),
                            stb_ddl::string_literal(lower),
                            stb_ddl::string_literal(upper)
                        )
                    })
                    .collect();
                if parts.is_empty() {
                    "0".to_owned()
                } else {
                    format!("({})", parts.join(" OR "))
                }
            }
        }
    }
}

/// One side's bounds of `columns` (a window column set): one row per partition for
/// offsets, one row for a scalar column. Rows whose positions are NULL do not bound it.
#[must_use]
pub fn bounds_sql(source: Source<'_>, columns: &[&str]) -> String {
    match columns {
        [partition, offset] => format!(
            "SELECT toString({partition}) AS __stb_partition, toString(min({offset})) AS __stb_lower, toString(max({offset})) AS __stb_upper, count() AS __stb_n \
             FROM {source} WHERE {partition} IS NOT NULL AND {offset} IS NOT NULL GROUP BY {partition} ORDER BY {partition}"
        ),
        [column, ..] => format!(
            "SELECT '' AS __stb_partition, toString(min({column})) AS __stb_lower, toString(max({column})) AS __stb_upper, count() AS __stb_n \
             FROM {source} WHERE {column} IS NOT NULL"
        ),
        [] => "SELECT 1 WHERE 0".to_owned(),
    }
}

/// The rows of each side outside `window`.
#[must_use]
pub fn outside_sql(source: Source<'_>, window: &Window) -> String {
    format!(
        "SELECT count() AS __stb_n FROM {source} WHERE NOT ({})",
        window.predicate()
    )
}

/// Each bucket's rows and hash on one side.
#[must_use]
pub fn buckets_sql(source: Source<'_>, shape: &Shape, window: &Window, buckets: u64) -> String {
    format!(
        "SELECT toString({} % {buckets}) AS __stb_bucket, count() AS __stb_n, toString(sum({})) AS __stb_h FROM {source} WHERE {} GROUP BY __stb_bucket",
        shape.key_hash(),
        shape.value_hash(),
        window.predicate()
    )
}

/// One side reduced to a row per key, within `window` and the `buckets` given (all when
/// empty), tagged `side`.
fn per_key(
    source: Source<'_>,
    side: &str,
    shape: &Shape,
    window: &Window,
    only: &[u64],
    buckets: u64,
) -> String {
    let mut sql = format!(
        "SELECT {}, count() AS __stb_n, sum({}) AS __stb_h, '{side}' AS __stb_side FROM {source} WHERE {}",
        shape.key_columns(),
        shape.value_hash(),
        window.predicate()
    );
    if !only.is_empty() {
        let list: Vec<String> = only.iter().map(u64::to_string).collect();
        let _ = write!(
            sql,
            " AND {} % {buckets} IN ({})",
            shape.key_hash(),
            list.join(", ")
        );
    }
    let _ = write!(sql, " GROUP BY {}", shape.key_names());
    sql
}

/// Two relations compared over a window, within some buckets of keys (all when `only`
/// is empty).
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub from: Source<'a>,
    pub to: Source<'a>,
    pub shape: &'a Shape,
    pub window: &'a Window,
    pub only: &'a [u64],
    pub buckets: u64,
}

impl Pair<'_> {
    /// Both sides' keys together, with the category of each: `from` (only in the first),
    /// `to` (only in the second), `changed`, `same`. A union grouped by key rather than a
    /// join: grouping takes NULL keys as equal, a join never matches them.
    fn grouped(&self) -> String {
        let side = |source, tag| {
            per_key(
                source,
                tag,
                self.shape,
                self.window,
                self.only,
                self.buckets,
            )
        };
        format!(
            "SELECT {keys}, sumIf(__stb_n, __stb_side = 'a') AS __stb_from_rows, sumIf(__stb_n, __stb_side = 'b') AS __stb_to_rows, \
             multiIf(__stb_to_rows = 0, 'from', __stb_from_rows = 0, 'to', \
             __stb_from_rows != __stb_to_rows OR sumIf(__stb_h, __stb_side = 'a') != sumIf(__stb_h, __stb_side = 'b'), 'changed', 'same') AS __stb_kind \
             FROM ({a} UNION ALL {b}) GROUP BY {keys}",
            keys = self.shape.key_names(),
            a = side(self.from, "a"),
            b = side(self.to, "b"),
        )
    }

    /// The counts of each category.
    #[must_use]
    pub fn counts_sql(&self) -> String {
        format!(
            "SELECT countIf(__stb_kind = 'from') AS only_in_from, countIf(__stb_kind = 'to') AS only_in_to, countIf(__stb_kind = 'changed') AS changed FROM ({})",
            self.grouped()
        )
    }

    /// Up to `limit` keys of each category but `same`.
    #[must_use]
    pub fn samples_sql(&self, limit: usize) -> String {
        format!(
            "SELECT * FROM ({}) WHERE __stb_kind != 'same' ORDER BY __stb_kind, {} LIMIT {limit} BY __stb_kind",
            self.grouped(),
            self.shape.key_names()
        )
    }
}

/// The rows of `source` within `window` whose key is one of `keys` (each key's values
/// as the server rendered them, `None` for NULL), as the samples show them: at most
/// `per_key` rows a key.
#[must_use]
pub fn rows_sql(
    source: Source<'_>,
    shape: &Shape,
    window: &Window,
    keys: &[Vec<Option<String>>],
    per_key: usize,
) -> String {
    let texts = shape.key_texts();
    let matches: Vec<String> = keys
        .iter()
        .map(|values| {
            let parts: Vec<String> = texts
                .iter()
                .zip(values)
                .map(|(text, value)| match value {
                    Some(value) => format!("{text} = {}", stb_ddl::string_literal(value)),
                    None => format!("{text} IS NULL"),
                })
                .collect();
            format!("({})", parts.join(" AND "))
        })
        .collect();
    format!(
        "SELECT {}, * FROM {source} WHERE ({}) AND ({}) ORDER BY {} LIMIT {per_key} BY {}",
        shape.key_columns(),
        window.predicate(),
        if matches.is_empty() {
            "0".to_owned()
        } else {
            matches.join(" OR ")
        },
        shape.key_names(),
        shape.key_names()
    )
}

/// The expressions of a sorting key as the catalog prints it (`p, o`, `(p, o)`, or
/// `tuple()` for none), split at its top-level commas.
#[must_use]
pub fn key_expressions(sorting_key: &str) -> Vec<String> {
    let text = sorting_key.trim();
    let text = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(text);
    if text.trim().is_empty() || text.trim() == "tuple()" {
        return Vec::new();
    }
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut quoted = None;
    let mut escaped = false;
    let mut current = String::new();
    for c in text.chars() {
        match (quoted, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quoted = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quoted = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        parts.push(current.trim().to_owned());
    }
    parts
}

#[cfg(test)]
mod tests;
