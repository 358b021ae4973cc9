//! The statements of a data diff, made from what the catalog says of the two relations:
//! pure, so each shape is tested without a warehouse.
//!
//! Rows are matched by a key. Each side is reduced to one row per key (how many rows it
//! holds and the sum of their hashes: a multiset, so duplicate keys compare too), and the
//! two sides are joined on the key. A large table is compared by hashed buckets of keys
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
}

impl Shape {
    /// The key as a tuple expression.
    fn key_tuple(&self) -> String {
        format!("tuple({})", self.key.join(", "))
    }

    /// A row's value, every compared column (retyped ones as text).
    fn value_hash(&self) -> String {
        let columns: Vec<String> = self
            .compared
            .iter()
            .map(|column| {
                let quoted = stb_ddl::identifier(column);
                if self.retyped.contains(column) {
                    format!("toString({quoted})")
                } else {
                    quoted
                }
            })
            .collect();
        format!("cityHash64({})", columns.join(", "))
    }

    /// The key expressions as output columns named `__k0`, `__k1`, ...
    fn key_columns(&self) -> String {
        self.key
            .iter()
            .enumerate()
            .map(|(index, expression)| format!("{expression} AS __k{index}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn key_names(&self) -> String {
        (0..self.key.len())
            .map(|index| format!("__k{index}"))
            .collect::<Vec<_>>()
            .join(", ")
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
                            "(_replay_partition = {partition} AND _replay_offset BETWEEN {lower} AND {upper})"
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
/// offsets, one row for a scalar column.
#[must_use]
pub fn bounds_sql(relation: &str, columns: &[&str]) -> String {
    match columns {
        [partition, offset] => format!(
            "SELECT toString({partition}) AS partition, toString(min({offset})) AS lower, toString(max({offset})) AS upper FROM {relation} GROUP BY {partition} ORDER BY {partition}"
        ),
        [column, ..] => format!(
            "SELECT '' AS partition, toString(min({column})) AS lower, toString(max({column})) AS upper, count() AS n FROM {relation}"
        ),
        [] => "SELECT 1 WHERE 0".to_owned(),
    }
}

/// The rows of each side outside `window`.
#[must_use]
pub fn outside_sql(relation: &str, window: &Window) -> String {
    format!(
        "SELECT count() AS n FROM {relation} WHERE NOT ({})",
        window.predicate()
    )
}

/// Each bucket's rows and hash on one side.
#[must_use]
pub fn buckets_sql(relation: &str, shape: &Shape, window: &Window, buckets: u64) -> String {
    format!(
        "SELECT toString(cityHash64({}) % {buckets}) AS bucket, count() AS n, toString(sum({})) AS h FROM {relation} WHERE {} GROUP BY bucket",
        shape.key_tuple(),
        shape.value_hash(),
        window.predicate()
    )
}

/// One side reduced to a row per key, within `window` and the `buckets` given (all when
/// empty).
fn per_key(relation: &str, shape: &Shape, window: &Window, only: &[u64], buckets: u64) -> String {
    let mut sql = format!(
        "SELECT {}, count() AS __n, sum({}) AS __h FROM {relation} WHERE {}",
        shape.key_columns(),
        shape.value_hash(),
        window.predicate()
    );
    if !only.is_empty() {
        let list: Vec<String> = only.iter().map(u64::to_string).collect();
        let _ = write!(
            sql,
            " AND cityHash64({}) % {buckets} IN ({})",
            shape.key_tuple(),
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
    pub from: &'a str,
    pub to: &'a str,
    pub shape: &'a Shape,
    pub window: &'a Window,
    pub only: &'a [u64],
    pub buckets: u64,
}

impl Pair<'_> {
    /// The join of both sides' keys, with the category of each: `from` (only in the
    /// first), `to` (only in the second), `changed`, `same`.
    fn joined(&self) -> String {
        let side = |relation| per_key(relation, self.shape, self.window, self.only, self.buckets);
        format!(
            "SELECT {keys}, a.__n AS from_rows, b.__n AS to_rows, \
             multiIf(b.__n = 0, 'from', a.__n = 0, 'to', a.__n != b.__n OR a.__h != b.__h, 'changed', 'same') AS side \
             FROM ({a}) AS a FULL OUTER JOIN ({b}) AS b USING ({keys}) \
             SETTINGS join_use_nulls = 0",
            keys = self.shape.key_names(),
            a = side(self.from),
            b = side(self.to),
        )
    }

    /// The counts of each category.
    #[must_use]
    pub fn counts_sql(&self) -> String {
        format!(
            "SELECT countIf(side = 'from') AS only_in_from, countIf(side = 'to') AS only_in_to, countIf(side = 'changed') AS changed FROM ({})",
            self.joined()
        )
    }

    /// Up to `limit` keys of each category but `same`, with the category and the rows
    /// each side holds for them.
    #[must_use]
    pub fn samples_sql(&self, limit: usize) -> String {
        format!(
            "SELECT * FROM ({}) WHERE side != 'same' ORDER BY side, {} LIMIT {limit} BY side",
            self.joined(),
            self.shape.key_names()
        )
    }
}

/// The rows of `relation` whose key is one of `keys` (each key's values as the server
/// printed them, matched as text so every type compares alike), as the samples show
/// them: at most `per_key` rows a key.
#[must_use]
pub fn rows_sql(relation: &str, shape: &Shape, keys: &[Vec<String>], per_key: usize) -> String {
    let as_text: Vec<String> = shape
        .key
        .iter()
        .map(|expression| format!("toString({expression})"))
        .collect();
    let tuples: Vec<String> = keys
        .iter()
        .map(|values| {
            let literals: Vec<String> = values.iter().map(|v| stb_ddl::string_literal(v)).collect();
            format!("tuple({})", literals.join(", "))
        })
        .collect();
    format!(
        "SELECT {}, * FROM {relation} WHERE tuple({}) IN ({}) ORDER BY {} LIMIT {per_key} BY {}",
        shape.key_columns(),
        as_text.join(", "),
        if tuples.is_empty() {
            "tuple()".to_owned()
        } else {
            tuples.join(", ")
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
    let mut current = String::new();
    for c in text.chars() {
        match (quoted, c) {
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
