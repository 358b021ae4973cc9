//! Reads what the verdict needs, per staged root table: which relation its materialized
//! view reads (from the catalog's view dependencies, not from its SQL), the rows of the
//! staged copy, the active copy and that relation, and the newest lineage positions of
//! each. One query for the dependencies, then one or two per root.

use std::collections::BTreeMap;

use stb_compile::Compiled;
use stb_ddl::{QualifiedName, string_literal};
use stb_warehouse::Client;
use stb_warehouse::deployments::ObjectRow;

use super::{PartitionReadiness, RootReadiness};
use crate::EngineError;
use crate::deployments::State;

const PARTITION: &str = "_replay_partition";
const OFFSET: &str = "_replay_offset";

/// A relation as a query reads it, and the lineage columns it has.
struct Side {
    /// What a query names: the relation, or the subquery that exposes its lineage columns.
    relation: String,
    /// What the report names: `database.relation`.
    name: String,
    columns: Vec<String>,
}

impl Side {
    fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }
}

pub(super) fn roots(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    state: &State,
    id: &str,
) -> Result<Vec<RootReadiness>, EngineError> {
    let objects: Vec<&ObjectRow> = state
        .objects
        .iter()
        .filter(|o| o.deployment_id == id)
        .collect();
    // A rerun with the same id records its objects again: one entry per relation.
    let roots: BTreeMap<&str, &ObjectRow> = objects
        .iter()
        .filter(|o| o.is_selected_root && o.object_type == "table")
        .map(|o| (o.logical_name.as_str(), *o))
        .collect();
    let views: BTreeMap<&str, &str> = objects
        .iter()
        .filter(|o| o.object_type == "materialized_view")
        .map(|o| (o.model.as_str(), o.physical_name.as_str()))
        .collect();
    let feeds = client
        .view_sources(database, &views.values().copied().collect::<Vec<_>>())
        .map_err(|e| EngineError::from(&e))?;
    let mut observed = Vec::new();
    for root in roots.values() {
        let source = views
            .get(root.model.as_str())
            .and_then(|view| feeds.get(*view))
            .map(|(db, name)| source_side(compiled, state, database, db, name));
        observed.push(observe(client, database, compiled, state, root, source)?);
    }
    Ok(observed)
}

/// A declared source is read as its models read it (an adopted table through the
/// subquery that names its lineage columns); anything else is a table of its own.
fn source_side(
    compiled: &Compiled,
    state: &State,
    database: &str,
    source_database: &str,
    name: &str,
) -> Side {
    let qualified = format!("{source_database}.{name}");
    let declared = compiled.plan_sources.iter().find(|s| {
        s.relation
            .as_deref()
            .is_some_and(|r| r == qualified || (r == name && source_database == database))
    });
    let relation = QualifiedName::new(source_database, name).to_string();
    match declared.and_then(|s| Some((s.reference.clone()?, s))) {
        Some((reference, source)) => Side {
            relation: reference,
            name: relation,
            columns: source.replay_columns.clone(),
        },
        None => Side {
            name: relation.clone(),
            relation,
            columns: if source_database == database {
                lineage_columns(state, name)
            } else {
                Vec::new()
            },
        },
    }
}

fn lineage_columns(state: &State, relation: &str) -> Vec<String> {
    state
        .columns
        .get(relation)
        .map(|columns| {
            columns
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| name.starts_with("_replay_"))
                .collect()
        })
        .unwrap_or_default()
}

/// The pipeline's mode when the copy keeps its columns; else what the copy's columns
/// allow, in the order offsets, timestamp, landed_at, cursor.
fn boundary_mode(declared: Option<&str>, staged: &Side) -> Option<&'static str> {
    let needs = stb_plan::direct::lineage_columns;
    let modes = ["offsets", "timestamp", "landed_at", "cursor"];
    let kept = |mode: &str| !needs(mode).is_empty() && needs(mode).iter().all(|c| staged.has(c));
    declared
        .and_then(|d| modes.into_iter().find(|m| *m == d))
        .filter(|m| kept(m))
        .or_else(|| modes.into_iter().find(|m| kept(m)))
}

fn observe(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    state: &State,
    root: &ObjectRow,
    source: Option<Side>,
) -> Result<RootReadiness, EngineError> {
    let staged_exists = state.relations.contains(&root.physical_name);
    let active_relation = state
        .bindings
        .get(&root.logical_name)
        .filter(|physical| state.relations.contains(*physical))
        .cloned();
    let mut report = RootReadiness {
        model: root.model.clone(),
        logical_name: root.logical_name.clone(),
        staged_relation: root.physical_name.clone(),
        staged_exists,
        active_relation: active_relation.clone(),
        replay_source: source.as_ref().map(|s| s.name.clone()),
        ..RootReadiness::default()
    };
    if !staged_exists {
        return Ok(report);
    }
    let table = |physical: &str| {
        let relation = QualifiedName::new(database, physical).to_string();
        Side {
            name: relation.clone(),
            relation,
            columns: lineage_columns(state, physical),
        }
    };
    let staged = table(&root.physical_name);
    let active = active_relation.as_deref().map(table);
    let declared = compiled
        .plan_models
        .iter()
        .find(|m| m.name == root.model)
        .and_then(|m| m.boundary_mode.as_deref());
    report.boundary_mode = boundary_mode(declared, &staged);
    let scalar = report
        .boundary_mode
        .filter(|m| *m != "offsets")
        .map(|m| match m {
            "timestamp" => "_replay_timestamp",
            "landed_at" => "_replay_landed_at",
            _ => "_replay_cursor",
        });
    let sides = read_sides(
        client,
        [
            ("staged", Some(&staged)),
            ("active", active.as_ref()),
            ("source", source.as_ref()),
        ],
        scalar,
    )?;
    report.staged_rows = sides.get("staged").map(|s| s.rows);
    report.active_rows = sides.get("active").map(|s| s.rows);
    report.replay_source_rows = sides.get("source").map(|s| s.rows);
    let newest = |side: &str| sides.get(side).filter(|s| s.rows > 0);
    report.staged_min = newest("staged").and_then(|s| s.low.clone());
    report.staged_max = newest("staged").and_then(|s| s.high.clone());
    report.active_min = newest("active").and_then(|s| s.low.clone());
    report.active_max = newest("active").and_then(|s| s.high.clone());
    if let (Some(staged_key), Some(active_key)) = (
        newest("staged").and_then(|s| s.high_key),
        newest("active").and_then(|s| s.high_key),
    ) {
        if scalar == Some("_replay_cursor") {
            report.cursor_gap = Some(active_key - staged_key);
        } else {
            #[allow(clippy::cast_precision_loss)]
            let lag = (active_key - staged_key) as f64 / 1000.0;
            report.lag_seconds = Some(lag);
        }
    }
    if report.boundary_mode == Some("offsets")
        && let Some(source) = source
            .as_ref()
            .filter(|s| s.has(PARTITION) && s.has(OFFSET))
    {
        let active = active
            .as_ref()
            .filter(|a| a.has(PARTITION) && a.has(OFFSET));
        report.partitions = partitions(client, source, &staged, active)?;
        summarise_partitions(&mut report);
    }
    Ok(report)
}

/// Rows and the newest lineage position of one side.
struct Observed {
    rows: u64,
    low: Option<String>,
    high: Option<String>,
    /// `high` as a number: milliseconds since the epoch (time modes) or the cursor.
    high_key: Option<i128>,
}

fn read_sides(
    client: &Client,
    sides: [(&str, Option<&Side>); 3],
    scalar: Option<&str>,
) -> Result<BTreeMap<String, Observed>, EngineError> {
    let none = "CAST(NULL AS Nullable(String))";
    let parts: Vec<String> = sides
        .iter()
        .filter_map(|(name, side)| Some((name, (*side)?)))
        .map(|(name, side)| {
            let (low, high, key) = match scalar.filter(|c| side.has(c)) {
                Some(column) => {
                    let key = if column == "_replay_cursor" {
                        format!("toString(max({column}))")
                    } else {
                        format!(
                            "toString(toUnixTimestamp64Milli(toDateTime64(max({column}), 3, 'UTC')))"
                        )
                    };
                    (
                        format!("toString(min({column}))"),
                        format!("toString(max({column}))"),
                        key,
                    )
                }
                None => (none.to_owned(), none.to_owned(), none.to_owned()),
            };
            format!(
                "SELECT {} AS side, count() AS rows, {low} AS low, {high} AS high, {key} AS high_key FROM {}",
                string_literal(name),
                side.relation
            )
        })
        .collect();
    let rows = client
        .query(&parts.join(" UNION ALL "))
        .map_err(|e| EngineError::from(&e))?;
    Ok((0..rows.data.len())
        .filter_map(|r| {
            Some((
                rows.text(r, "side")?,
                Observed {
                    rows: rows.text(r, "rows")?.parse().ok()?,
                    low: rows.text(r, "low"),
                    high: rows.text(r, "high"),
                    high_key: rows.text(r, "high_key").and_then(|k| k.parse().ok()),
                },
            ))
        })
        .collect())
}

/// Per partition of the source: its newest offset, the staged and active copies' newest,
/// and how much later the source's newest row is than the newest one the staged copy
/// holds (by the source's time column, when it has one).
fn partitions(
    client: &Client,
    source: &Side,
    staged: &Side,
    active: Option<&Side>,
) -> Result<Vec<PartitionReadiness>, EngineError> {
    let time = match (
        source.has("_replay_timestamp"),
        source.has("_replay_landed_at"),
    ) {
        (true, true) => "coalesce(_replay_timestamp, _replay_landed_at)",
        (true, false) => "_replay_timestamp",
        (false, true) => "_replay_landed_at",
        (false, false) => "CAST(NULL AS Nullable(DateTime64(3)))",
    };
    let newest = |side: &Side| {
        format!(
            "(SELECT toInt64({PARTITION}) AS p, max(toInt64({OFFSET})) AS hi FROM {} GROUP BY p)",
            side.relation
        )
    };
    let (active_join, active_max) = match active {
        Some(active) => (
            format!(" LEFT JOIN {} AS a ON r.p = a.p", newest(active)),
            "toString(any(a.hi))",
        ),
        None => (String::new(), "CAST(NULL AS Nullable(String))"),
    };
    let sql = format!(
        "SELECT toString(r.p) AS partition, toString(max(r.o)) AS source_max, \
         toString(any(s.hi)) AS staged_max, {active_max} AS active_max, \
         if(any(s.hi) IS NULL, NULL, toString(dateDiff('millisecond', \
         maxIf(r.t, ifNull(r.o <= s.hi, 0)), max(r.t)))) AS lag_ms \
         FROM (SELECT toInt64({PARTITION}) AS p, toInt64({OFFSET}) AS o, {time} AS t FROM {}) AS r \
         LEFT JOIN {} AS s ON r.p = s.p{active_join} \
         GROUP BY r.p ORDER BY r.p SETTINGS join_use_nulls = 1",
        source.relation,
        newest(staged),
    );
    let rows = client.query(&sql).map_err(|e| EngineError::from(&e))?;
    let number = |r: usize, column: &str| rows.text(r, column).and_then(|v| v.parse().ok());
    Ok((0..rows.data.len())
        .map(|r| PartitionReadiness {
            partition: rows.text(r, "partition").unwrap_or_default(),
            source_max_offset: number(r, "source_max"),
            staged_max_offset: number(r, "staged_max"),
            active_max_offset: number(r, "active_max"),
            lag_seconds: number(r, "lag_ms").map(|ms: i64| {
                #[allow(clippy::cast_precision_loss)]
                let seconds = ms as f64 / 1000.0;
                seconds
            }),
        })
        .collect())
}

fn summarise_partitions(report: &mut RootReadiness) {
    let gaps: Vec<i64> = report
        .partitions
        .iter()
        .filter_map(|p| Some(p.source_max_offset? - p.staged_max_offset?))
        .collect();
    report.partitions_compared = report.partitions.len();
    report.partitions_missing = report
        .partitions
        .iter()
        .filter(|p| p.staged_max_offset.is_none())
        .count();
    report.partitions_lagging = gaps.iter().filter(|gap| **gap > 0).count();
    report.max_offset_gap = gaps.iter().copied().max();
    #[allow(clippy::cast_precision_loss)]
    let average = (!gaps.is_empty()).then(|| gaps.iter().sum::<i64>() as f64 / gaps.len() as f64);
    report.avg_offset_gap = average;
    report.lag_seconds = report
        .partitions
        .iter()
        .filter_map(|p| p.lag_seconds)
        .reduce(f64::max);
}
