//! `stb deployment diff --data`: for each relation two endpoints bind to different copies,
//! the rows only one side holds and the rows both hold differently, matched by the model's
//! key (its `ORDER BY`, or `--key`), computed in the warehouse over the part of the replay
//! history both copies hold, with counts and samples. The statements are
//! [`sql`]'s; this module runs them and judges the answers.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_warehouse::{Client, Rows};

use crate::deployments::{Diff, State};

pub mod sql;

use sql::{KEY, Shape, Source, WINDOW_COLUMNS, Window};

use crate::EngineError;

/// Hashed buckets of keys a relation is first compared by.
pub const BUCKETS: u64 = 256;

/// How a data diff matches and shows rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--key`: the columns rows are matched by, instead of each copy's `ORDER BY`.
    pub key: Option<Vec<String>>,
    /// Keys shown per kind of difference.
    pub samples: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            key: None,
            samples: 5,
        }
    }
}

/// One relation's rows compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelationData {
    pub name: String,
    pub from_relation: String,
    pub to_relation: String,
    /// What rows are matched by.
    pub key: Vec<String>,
    /// `order_by` (the `to` copy's sorting key), `--key`, or `all_columns` (a relation
    /// without a sorting key: rows compared whole, so none is `changed`).
    pub key_source: &'static str,
    /// The columns both copies have: what `changed` compares.
    pub compared_columns: Vec<String>,
    /// The part of the replay history both copies hold, which is all that is compared.
    pub window: WindowJson,
    /// Rows of each copy outside the window (not compared).
    pub outside_window: Sides,
    /// Keys only the `from` copy holds, only the `to` copy holds, and both hold with other
    /// values (or other numbers of rows).
    pub only_in_from: u64,
    pub only_in_to: u64,
    pub changed: u64,
    pub buckets: u64,
    /// Buckets whose rows differed, which were compared key by key.
    pub differing_buckets: u64,
    pub samples: Vec<Sample>,
    /// Why the relation could not be compared (the counts are then zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A count on each side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sides {
    pub from: u64,
    pub to: u64,
}

/// The compared window, as the JSON shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowJson {
    /// `everything`, `span`, `offsets` or `disjoint`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper: Option<String>,
    /// `offsets`: each partition's common offsets, `[partition, lower, upper]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<[String; 3]>,
}

/// One differing key, with the rows each copy holds for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// `only_in_from`, `only_in_to` or `changed`.
    pub kind: &'static str,
    pub key: serde_json::Map<String, serde_json::Value>,
    pub from_rows: Vec<serde_json::Map<String, serde_json::Value>>,
    pub to_rows: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// Most keys shown per kind of difference (`--samples` above it is taken as this).
pub const MAX_SAMPLES: usize = 100;

/// `--key` names columns no compared relation has.
pub const KEY_CODE: &str = "STB-DEPLOY-005";

/// Compares the rows of every relation `diff` found bound to two different copies that
/// both exist. A relation that cannot be compared says why; the others go on.
///
/// # Errors
/// `--key` names columns that no relation to compare has in both copies
/// (`STB-DEPLOY-005`): a misspelt key would otherwise leave every relation uncompared.
pub fn compare(
    client: &Client,
    database: &str,
    state: &State,
    diff: &Diff,
    options: &Options,
) -> Result<Vec<RelationData>, EngineError> {
    let pairs: Vec<(&str, &str, &str)> = diff
        .relations
        .iter()
        .filter_map(|relation| {
            let (from, to) = (
                relation.from_relation.as_ref()?,
                relation.to_relation.as_ref()?,
            );
            (from != to && state.relations.contains(from) && state.relations.contains(to))
                .then_some((relation.name.as_str(), from.as_str(), to.as_str()))
        })
        .collect();
    if let Some(key) = &options.key {
        let has_key = |relation: &str| {
            state.columns.get(relation).is_some_and(|columns| {
                key.iter()
                    .all(|k| columns.iter().any(|(name, _)| name == k))
            })
        };
        if !pairs.is_empty()
            && !pairs
                .iter()
                .any(|(_, from, to)| has_key(from) && has_key(to))
        {
            return Err(EngineError::new(
                KEY_CODE,
                format!(
                    "--key {} names columns that no compared relation has in both copies",
                    key.join(",")
                ),
                "name columns both copies have (`stb deployment diff RANGE --json` lists each relation's columns), or leave --key out to match rows by each model's ORDER BY",
            ));
        }
    }
    Ok(pairs
        .into_iter()
        .map(|(name, from, to)| compare_one(client, database, state, name, from, to, options))
        .collect())
}

/// One copy as the diff reads it.
struct Copy<'a> {
    name: &'a str,
    /// `db.name`, quoted.
    qualified: String,
    /// Its engine merges rows by key: read merged (`FINAL`).
    merged: bool,
    columns: BTreeMap<String, String>,
}

impl<'a> Copy<'a> {
    fn of(state: &State, database: &str, name: &'a str) -> Self {
        Self {
            name,
            qualified: format!(
                "{}.{}",
                stb_ddl::identifier(database),
                stb_ddl::identifier(name)
            ),
            merged: state
                .engines
                .get(name)
                .is_some_and(|engine| stb_plan::shrink::merges_rows(engine)),
            columns: state
                .columns
                .get(name)
                .map(|c| c.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }

    fn source(&self) -> Source<'_> {
        Source {
            relation: &self.qualified,
            merged: self.merged,
        }
    }
}

fn compare_one(
    client: &Client,
    database: &str,
    state: &State,
    name: &str,
    from: &str,
    to: &str,
    options: &Options,
) -> RelationData {
    let (before, after) = (
        Copy::of(state, database, from),
        Copy::of(state, database, to),
    );
    // The `to` copy's order; a column both have.
    let compared: Vec<String> = state
        .columns
        .get(to)
        .into_iter()
        .flatten()
        .map(|(column, _)| column.clone())
        .filter(|column| before.columns.contains_key(column))
        .collect();
    let retyped: Vec<String> = compared
        .iter()
        .filter(|c| before.columns.get(*c) != after.columns.get(*c))
        .cloned()
        .collect();
    let aggregates: Vec<String> = compared
        .iter()
        .filter(|c| {
            [&before, &after].iter().any(|copy| {
                copy.columns
                    .get(*c)
                    .is_some_and(|t| t.starts_with("AggregateFunction("))
            })
        })
        .cloned()
        .collect();
    let mut data = RelationData {
        name: name.to_owned(),
        from_relation: from.to_owned(),
        to_relation: to.to_owned(),
        key: Vec::new(),
        key_source: "order_by",
        compared_columns: compared.clone(),
        window: window_json(&Window::Everything),
        outside_window: Sides::default(),
        only_in_from: 0,
        only_in_to: 0,
        changed: 0,
        buckets: BUCKETS,
        differing_buckets: 0,
        samples: Vec::new(),
        error: None,
    };
    let key = match resolve_key(options, state, &before, &after, &compared) {
        Ok((key, source)) => {
            data.key_source = source;
            key
        }
        Err(error) => {
            data.error = Some(error);
            return data;
        }
    };
    data.key.clone_from(&key);
    let shape = Shape {
        key,
        compared,
        retyped,
        aggregates,
    };
    if let Err(error) = run(client, &before, &after, &shape, options, &mut data) {
        data.error = Some(stb_warehouse::plain_message(&error.to_string()));
    }
    data
}

/// What rows are matched by: `--key` (columns both copies have), else the `to` copy's
/// sorting key, else every compared column.
fn resolve_key(
    options: &Options,
    state: &State,
    before: &Copy<'_>,
    after: &Copy<'_>,
    compared: &[String],
) -> Result<(Vec<String>, &'static str), String> {
    if let Some(columns) = &options.key {
        let missing: Vec<&str> = columns
            .iter()
            .filter(|c| !(before.columns.contains_key(*c) && after.columns.contains_key(*c)))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "--key names columns both copies do not have: {}",
                missing.join(", ")
            ));
        }
        return Ok((
            columns.iter().map(|c| stb_ddl::identifier(c)).collect(),
            "--key",
        ));
    }
    let key = state
        .sorting_keys
        .get(after.name)
        .map(|k| sql::key_expressions(k))
        .unwrap_or_default();
    if key.is_empty() {
        if compared.is_empty() {
            return Err("the copies have no column in common".to_owned());
        }
        return Ok((
            compared.iter().map(|c| stb_ddl::identifier(c)).collect(),
            "all_columns",
        ));
    }
    Ok((key, "order_by"))
}

fn run(
    client: &Client,
    before: &Copy<'_>,
    after: &Copy<'_>,
    shape: &Shape,
    options: &Options,
    data: &mut RelationData,
) -> Result<(), stb_warehouse::WarehouseError> {
    let (from, to) = (before.source(), after.source());
    let window = common_window(client, before, after)?;
    data.window = window_json(&window);
    data.outside_window = Sides {
        from: count(&client.query(&sql::outside_sql(from, &window))?),
        to: count(&client.query(&sql::outside_sql(to, &window))?),
    };
    let buckets = |source: Source<'_>| -> Result<BTreeMap<String, (String, String)>, _> {
        let rows = client.query(&sql::buckets_sql(source, shape, &window, BUCKETS))?;
        Ok::<_, stb_warehouse::WarehouseError>(
            (0..rows.data.len())
                .map(|row| {
                    (
                        rows.text(row, "__stb_bucket").unwrap_or_default(),
                        (
                            rows.text(row, "__stb_n").unwrap_or_default(),
                            rows.text(row, "__stb_h").unwrap_or_default(),
                        ),
                    )
                })
                .collect(),
        )
    };
    let (a, b) = (buckets(from)?, buckets(to)?);
    let differing: Vec<u64> = a
        .keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|bucket| a.get(*bucket) != b.get(*bucket))
        .filter_map(|bucket| bucket.parse().ok())
        .collect();
    data.differing_buckets = differing.len() as u64;
    if differing.is_empty() {
        return Ok(());
    }
    // Most buckets differing: the whole tables, without a long list of buckets.
    let only: &[u64] = if differing.len() * 2 > usize::try_from(BUCKETS).unwrap_or(usize::MAX) {
        &[]
    } else {
        &differing
    };
    let pair = sql::Pair {
        from,
        to,
        shape,
        window: &window,
        only,
        buckets: BUCKETS,
    };
    let counts = client.query(&pair.counts_sql())?;
    data.only_in_from = number(&counts, 0, "only_in_from");
    data.only_in_to = number(&counts, 0, "only_in_to");
    data.changed = number(&counts, 0, "changed");
    let limit = options.samples.min(MAX_SAMPLES);
    if limit == 0 {
        return Ok(());
    }
    let sampled = client.query(&pair.samples_sql(limit))?;
    let keys: Vec<Vec<Option<String>>> = (0..sampled.data.len())
        .map(|row| {
            (0..shape.key.len())
                .map(|k| sampled.text(row, &format!("{KEY}{k}")))
                .collect()
        })
        .collect();
    let per_key = 3;
    let from_rows = client.query(&sql::rows_sql(from, shape, &window, &keys, per_key))?;
    let to_rows = client.query(&sql::rows_sql(to, shape, &window, &keys, per_key))?;
    data.samples = keys
        .iter()
        .enumerate()
        .map(|(row, key)| Sample {
            kind: match sampled.text(row, "__stb_kind").as_deref() {
                Some("from") => "only_in_from",
                Some("to") => "only_in_to",
                _ => "changed",
            },
            key: shape
                .key
                .iter()
                .zip(key)
                .map(|(expression, value)| {
                    (
                        expression.trim_matches('`').to_owned(),
                        value
                            .clone()
                            .map_or(serde_json::Value::Null, serde_json::Value::String),
                    )
                })
                .collect(),
            from_rows: rows_of_key(&from_rows, key),
            to_rows: rows_of_key(&to_rows, key),
        })
        .collect();
    Ok(())
}

/// The part of the history both copies hold, by the first window column set both have
/// with the same types (a retyped position compares as nothing sound: every row is
/// compared then).
fn common_window(
    client: &Client,
    before: &Copy<'_>,
    after: &Copy<'_>,
) -> Result<Window, stb_warehouse::WarehouseError> {
    let Some(columns) = WINDOW_COLUMNS.iter().find(|set| {
        set.iter().all(|c| {
            before.columns.contains_key(*c) && before.columns.get(*c) == after.columns.get(*c)
        })
    }) else {
        return Ok(Window::Everything);
    };
    let bounds = |source: Source<'_>| -> Result<Vec<(String, String, String)>, _> {
        let rows = client.query(&sql::bounds_sql(source, columns))?;
        Ok::<_, stb_warehouse::WarehouseError>(
            (0..rows.data.len())
                .filter(|&row| number(&rows, row, "__stb_n") > 0)
                .map(|row| {
                    (
                        rows.text(row, "__stb_partition").unwrap_or_default(),
                        rows.text(row, "__stb_lower").unwrap_or_default(),
                        rows.text(row, "__stb_upper").unwrap_or_default(),
                    )
                })
                .collect(),
        )
    };
    let (a, b) = (bounds(before.source())?, bounds(after.source())?);
    // A copy without positioned rows shares no span: everything is compared.
    if a.is_empty() || b.is_empty() {
        return Ok(Window::Everything);
    }
    let later = |x: &str, y: &str| {
        if position_cmp(x, y).is_ge() {
            x.to_owned()
        } else {
            y.to_owned()
        }
    };
    let earlier = |x: &str, y: &str| {
        if position_cmp(x, y).is_le() {
            x.to_owned()
        } else {
            y.to_owned()
        }
    };
    if columns.len() == 2 {
        let common: Vec<(String, String, String)> = a
            .iter()
            .filter_map(|(p, lower_a, upper_a)| {
                let (_, lower_b, upper_b) = b.iter().find(|(q, ..)| q == p)?;
                let (lower, upper) = (later(lower_a, lower_b), earlier(upper_a, upper_b));
                position_cmp(&lower, &upper)
                    .is_le()
                    .then(|| (p.clone(), lower, upper))
            })
            .collect();
        return Ok(if common.is_empty() {
            Window::Disjoint
        } else {
            Window::Offsets(common)
        });
    }
    let ((_, lower_a, upper_a), (_, lower_b, upper_b)) = (&a[0], &b[0]);
    let (lower, upper) = (later(lower_a, lower_b), earlier(upper_a, upper_b));
    Ok(if position_cmp(&lower, &upper).is_le() {
        Window::Span {
            column: columns[0].to_owned(),
            lower,
            upper,
        }
    } else {
        Window::Disjoint
    })
}

/// Positions compared as numbers when both are (offsets, cursors), else as text
/// (timestamps of one type, as the server prints them, sort as text).
fn position_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

fn window_json(window: &Window) -> WindowJson {
    let mut json = WindowJson {
        kind: "everything",
        column: None,
        lower: None,
        upper: None,
        partitions: Vec::new(),
    };
    match window {
        Window::Everything => {}
        Window::Disjoint => json.kind = "disjoint",
        Window::Span {
            column,
            lower,
            upper,
        } => {
            json.kind = "span";
            json.column = Some(column.clone());
            json.lower = Some(lower.clone());
            json.upper = Some(upper.clone());
        }
        Window::Offsets(partitions) => {
            json.kind = "offsets";
            json.partitions = partitions
                .iter()
                .map(|(p, l, u)| [p.clone(), l.clone(), u.clone()])
                .collect();
        }
    }
    json
}

/// The rows of a [`sql::rows_sql`] answer whose key is `key`, without the key columns
/// it added.
fn rows_of_key(
    rows: &Rows,
    key: &[Option<String>],
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    (0..rows.data.len())
        .filter(|&row| {
            key.iter()
                .enumerate()
                .all(|(k, value)| rows.text(row, &format!("{KEY}{k}")) == *value)
        })
        .map(|row| {
            rows.names
                .iter()
                .zip(&rows.data[row])
                .filter(|(name, _)| !name.starts_with(KEY))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect()
        })
        .collect()
}

fn count(rows: &Rows) -> u64 {
    number(rows, 0, "__stb_n")
}

fn number(rows: &Rows, row: usize, column: &str) -> u64 {
    rows.text(row, column)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}
