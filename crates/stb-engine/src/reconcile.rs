//! `stb reconcile`: adopt what is live as the baseline, without rebuilding. When a model's
//! change was applied by hand (a materialized view's query modified in place, a table
//! created to match), the next plan would rebuild it; reconcile checks that the live
//! objects have the shape the project wants and records them as built from it.
//!
//! Eligible: a table model whose live table has the desired columns, engine, ordering and
//! partitioning, and whose live materialized view writes to that table and reads the
//! model's driving input. A view model is never eligible (redeploy it: it holds no data).
//! The query itself cannot be compared with what ClickHouse keeps, which is the point:
//! reconcile records the author's word that the live query is the desired one.
//!
//! Recording: direct models get a direct fingerprint (so `--changed` and the plan's SQL
//! change stop seeing them as changed); virtual ones get object-state rows of kind
//! `reconcile` for their active deployment, which the virtual plan prefers to that
//! deployment's own rows when they are newer.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stb_compile::Compiled;
use stb_plan::deployment::split_physical;
use stb_plan::direct::{PlanModel, RelationKind};
use stb_plan::virtual_plan::object_fingerprint;
use stb_warehouse::deployments::{ObjectState, record_reconciled};
use stb_warehouse::records::{ModelDefinition, write_fingerprints};
use stb_warehouse::{Catalog, Client, TargetLock};

use crate::EngineError;

/// A model that can be adopted as it is live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Eligible {
    pub model: String,
    /// `direct` or `virtual`.
    pub mode: &'static str,
    /// The live table and materialized view checked (a virtual model's active copies).
    pub table: String,
    pub materialized_view: String,
    /// Virtual models: the active deployment whose copies are adopted.
    pub deployment_id: Option<String>,
}

/// A model that cannot be adopted, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub model: String,
    pub reasons: Vec<String>,
}

/// The verdict on every model in scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    pub eligible: Vec<Eligible>,
    pub rejected: Vec<Rejected>,
}

/// What is live, as read once: the catalog, the stable bindings, and what each
/// materialized view reads.
pub struct Live {
    pub database: String,
    pub catalog: Catalog,
    pub bindings: BTreeMap<String, String>,
    /// Materialized view -> (database, relation) it reads.
    pub sources: BTreeMap<String, (String, String)>,
}

/// Reads what [`assess`] needs: the catalog, the bindings, and the sources of every
/// materialized view in `database`. Three queries.
///
/// # Errors
/// A read failed.
pub fn read(client: &Client, database: &str) -> Result<Live, EngineError> {
    let catalog = client
        .load_catalog(database)
        .map_err(|e| EngineError::from(&e))?;
    let bindings = stb_warehouse::deployments::bindings(&catalog, database);
    let views: Vec<&str> = catalog
        .relations()
        .iter()
        .filter(|r| r.engine == "MaterializedView")
        .map(|r| r.name.as_str())
        .collect();
    let sources = client
        .view_sources(database, &views)
        .map_err(|e| EngineError::from(&e))?;
    Ok(Live {
        database: database.to_owned(),
        catalog,
        bindings,
        sources,
    })
}

/// Judges each of `models`; `is_virtual` says which pipelines' models are staged.
#[must_use]
pub fn assess(
    compiled: &Compiled,
    models: &[&PlanModel],
    is_virtual: &dyn Fn(&str) -> bool,
    live: &Live,
) -> Reconciliation {
    let mut verdict = Reconciliation::default();
    for model in models {
        match check(compiled, model, is_virtual(&model.name), live) {
            Ok(eligible) => verdict.eligible.push(eligible),
            Err(reasons) => verdict.rejected.push(Rejected {
                model: model.name.clone(),
                reasons,
            }),
        }
    }
    verdict
}

fn relation_of(model: &PlanModel, kind: RelationKind) -> Option<&str> {
    model
        .relations
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, name)| name.as_str())
}

fn check(
    compiled: &Compiled,
    model: &PlanModel,
    is_virtual: bool,
    live: &Live,
) -> Result<Eligible, Vec<String>> {
    let (Some(table), Some(view)) = (
        relation_of(model, RelationKind::Table),
        relation_of(model, RelationKind::MaterializedView),
    ) else {
        return Err(vec![
            "a view holds no data: redeploy the view (stb build) instead".to_owned(),
        ]);
    };
    let (table, view, deployment_id) = if is_virtual {
        let Some((logical, id)) = live
            .bindings
            .get(table)
            .and_then(|physical| split_physical(physical))
            .filter(|(logical, _)| *logical == table)
        else {
            return Err(vec![format!(
                "no active deployment of {table}: build and promote one first"
            )]);
        };
        (
            id.physical(logical),
            id.physical(view),
            Some(id.to_string()),
        )
    } else {
        (table.to_owned(), view.to_owned(), None)
    };
    let mut reasons = Vec::new();
    match live.catalog.relation(&table) {
        None => reasons.push(format!("the live table {table} is missing")),
        Some(relation) => reasons.extend(storage_differences(model, relation)),
    }
    match live.catalog.relation(&view) {
        None => reasons.push(format!("the live materialized view {view} is missing")),
        Some(relation) => {
            match view_target(&relation.create_table_query) {
                Some(target) if target == (live.database.clone(), table.clone()) => {}
                Some((database, name)) => {
                    reasons.push(format!("{view} writes to {database}.{name}, not {table}"));
                }
                None => reasons.push(format!("{view} names no target table")),
            }
            let expected = expected_input(compiled, model, is_virtual);
            match live.sources.get(&view) {
                Some((database, name)) if expected(database, name, &live.database) => {}
                Some((database, name)) => reasons.push(format!(
                    "{view} reads {database}.{name}, not its driving input {}",
                    model.driving_input.as_deref().unwrap_or("(none)")
                )),
                None => reasons.push(format!("{view} reads no relation the catalog knows")),
            }
        }
    }
    if !reasons.is_empty() {
        return Err(reasons);
    }
    Ok(Eligible {
        model: model.name.clone(),
        mode: if is_virtual { "virtual" } else { "direct" },
        table,
        materialized_view: view,
        deployment_id,
    })
}

/// Whether (database, relation) is the model's driving input as its live view should read
/// it: a source's relation, the upstream model's table, or (virtual) a copy of that table.
fn expected_input<'a>(
    compiled: &'a Compiled,
    model: &'a PlanModel,
    is_virtual: bool,
) -> impl Fn(&str, &str, &str) -> bool + 'a {
    move |database: &str, name: &str, target: &str| {
        let Some(input) = model.driving_input.as_deref() else {
            return false;
        };
        if let Some(source) = compiled.plan_sources.iter().find(|s| s.name == input) {
            return source.relation.as_deref().is_some_and(|r| {
                r == format!("{database}.{name}") || (r == name && database == target)
            });
        }
        let upstream = compiled
            .plan_models
            .iter()
            .find(|m| m.name == input)
            .and_then(|m| relation_of(m, RelationKind::Table));
        upstream.is_some_and(|upstream| {
            database == target
                && (name == upstream
                    || (is_virtual
                        && split_physical(name).is_some_and(|(logical, _)| logical == upstream)))
        })
    }
}

/// How the live table differs from the desired one: columns (name and type, in order),
/// engine, ordering and partitioning.
fn storage_differences(model: &PlanModel, live: &stb_warehouse::CatalogRelation) -> Vec<String> {
    let mut reasons = Vec::new();
    let live_columns: Vec<(String, String)> = live
        .columns
        .iter()
        .map(|c| (c.name.clone(), comparable_type(&c.data_type)))
        .collect();
    let desired_columns: Vec<(String, String)> = model
        .output_columns
        .iter()
        .map(|(name, data_type)| (name.clone(), comparable_type(data_type)))
        .collect();
    if live_columns != desired_columns {
        let show = |columns: &[(String, String)]| {
            columns
                .iter()
                .map(|(n, t)| format!("{n} {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        reasons.push(format!(
            "columns differ: live ({}), desired ({})",
            show(&live_columns),
            show(&desired_columns)
        ));
    }
    let storage: serde_json::Value = serde_json::from_str(&model.storage).unwrap_or_default();
    let desired_engine = storage["engine"].as_str().unwrap_or_default();
    let live_engine = engine_expression(&live.create_table_query).unwrap_or(&live.engine);
    if engine_key(desired_engine) != engine_key(live_engine) {
        reasons.push(format!(
            "engine differs: live {live_engine}, desired {desired_engine}"
        ));
    }
    let desired_order: Vec<&str> = storage["order_by"]
        .as_array()
        .map(|keys| keys.iter().filter_map(|k| k.as_str()).collect())
        .unwrap_or_default();
    if key(&desired_order.join(", ")) != key(&live.sorting_key) {
        reasons.push(format!(
            "order by differs: live ({}), desired ({})",
            live.sorting_key,
            desired_order.join(", ")
        ));
    }
    let desired_partition = storage["partition_by"].as_str().unwrap_or_default();
    if key(desired_partition) != key(&live.partition_key) {
        reasons.push(format!(
            "partition by differs: live ({}), desired ({desired_partition})",
            live.partition_key
        ));
    }
    reasons
}

/// A type as the server spells it, without spaces (it prints a named tuple over several
/// lines): `x::BIGINT` matches a live `Int64`.
fn comparable_type(text: &str) -> String {
    squeeze(&stb_sql::types::canonical_type(text))
}

/// Text with no spaces, for comparing type and key expressions ClickHouse reformats.
fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A key expression as comparable text: no spaces or back quotes, no enclosing tuple.
fn key(text: &str) -> String {
    let squeezed: String = squeeze(text).chars().filter(|c| *c != '`').collect();
    let inner = squeezed
        .strip_prefix("tuple(")
        .or_else(|| squeezed.strip_prefix('('))
        .and_then(|rest| rest.strip_suffix(')'))
        .filter(|inner| balanced(inner));
    inner.map_or(squeezed.clone(), str::to_owned)
}

fn balanced(text: &str) -> bool {
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0
}

/// `MergeTree` and `MergeTree()` are one engine.
fn engine_key(engine: &str) -> String {
    let squeezed = squeeze(engine);
    squeezed
        .strip_suffix("()")
        .map_or(squeezed.clone(), str::to_owned)
}

/// The `ENGINE = Name(args)` expression of a `CREATE TABLE` as ClickHouse keeps it.
fn engine_expression(create: &str) -> Option<&str> {
    let start = create.find("ENGINE = ")? + "ENGINE = ".len();
    let rest = &create[start..];
    let mut depth = 0i32;
    for (index, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ' ' if depth == 0 => return Some(&rest[..index]),
            _ => {}
        }
    }
    Some(rest)
}

/// The `TO <database>.<table>` of a materialized view's `CREATE` as ClickHouse keeps it.
fn view_target(create: &str) -> Option<(String, String)> {
    let start = create.find(" TO ")? + " TO ".len();
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = create[start..].chars().peekable();
    loop {
        match chars.next()? {
            '`' => loop {
                match chars.next()? {
                    '\\' => current.push(chars.next()?),
                    '`' => break,
                    c => current.push(c),
                }
            },
            '.' if parts.is_empty() => parts.push(std::mem::take(&mut current)),
            c if c.is_whitespace() || c == '(' => break,
            c => current.push(c),
        }
    }
    let database = parts.pop()?;
    Some((database, current))
}

/// The id reconcile records carry: `reconcile_<UTC YYYYMMDDTHHMMSSZ>`, from the
/// warehouse's `now` (`YYYY-MM-DD HH:MM:SS.fff`).
#[must_use]
pub fn record_id(now: &str) -> String {
    let digits: String = now.chars().take(19).filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    format!("reconcile_{date}T{time}Z")
}

/// Records the eligible models of `verdict` as built from the project, under the target
/// lock: direct fingerprints and `reconcile` object-state rows. Returns the record id.
///
/// # Errors
/// The lock is held, or a write failed.
pub fn apply(
    client: &Client,
    database: &str,
    owner: &str,
    compiled: &Compiled,
    verdict: &Reconciliation,
) -> Result<String, EngineError> {
    let now = crate::deployments::warehouse_now(client)?;
    let id = record_id(&now);
    let lock =
        TargetLock::acquire(client, database, owner, true).map_err(|e| EngineError::from(&e))?;
    let written = write(client, database, compiled, verdict, &id);
    let released = lock.release();
    written?;
    released.map_err(|e| EngineError::from(&e))?;
    Ok(id)
}

fn write(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    verdict: &Reconciliation,
    id: &str,
) -> Result<(), EngineError> {
    stb_warehouse::metadata::migrate(client, database).map_err(|e| EngineError::from(&e))?;
    let by_name = stb_plan::work::ModelIndex::new(&compiled.plan_models);
    let model = |name: &str| by_name.get(name);
    let direct: Vec<ModelDefinition<'_>> = verdict
        .eligible
        .iter()
        .filter(|e| e.mode == "direct")
        .filter_map(|e| model(&e.model))
        .map(|m| ModelDefinition {
            name: &m.name,
            query: &m.query,
            identity: m.identity(),
        })
        .collect();
    write_fingerprints(client, database, id, &direct).map_err(|e| EngineError::from(&e))?;
    // Owned first: the rows borrow from them.
    let owned: Vec<Adopted> = verdict
        .eligible
        .iter()
        .filter(|e| e.mode == "virtual")
        .filter_map(|e| Some((e, model(&e.model)?)))
        .flat_map(|(e, m)| {
            m.relations.iter().map(move |(kind, logical)| Adopted {
                deployment_id: e.deployment_id.clone().unwrap_or_default(),
                kind: *kind,
                logical: logical.clone(),
                physical: if *kind == RelationKind::Table {
                    e.table.clone()
                } else {
                    e.materialized_view.clone()
                },
                model: m.name.clone(),
                spec: object_fingerprint(m, *kind),
                query: (*kind != RelationKind::Table)
                    .then(|| m.deployable.query_with(&|name: &str| name.to_owned())),
            })
        })
        .collect();
    let objects: Vec<ObjectState<'_>> = owned
        .iter()
        .map(|a| ObjectState {
            deployment_id: &a.deployment_id,
            object_type: a.kind.as_str(),
            logical_name: &a.logical,
            physical_name: &a.physical,
            model: &a.model,
            is_selected_root: false,
            fingerprint: &a.spec,
            canonical_query: a.query.as_deref(),
        })
        .collect();
    record_reconciled(client, database, id, &objects).map_err(|e| EngineError::from(&e))
}

/// One live object of a virtual model, adopted with the project's spec.
struct Adopted {
    deployment_id: String,
    kind: RelationKind,
    logical: String,
    physical: String,
    model: String,
    spec: String,
    query: Option<String>,
}

/// The models `stb reconcile` looks at: `selected`, or every model.
#[must_use]
pub fn in_scope<'a>(
    compiled: &'a Compiled,
    selected: Option<&BTreeSet<String>>,
) -> Vec<&'a PlanModel> {
    compiled
        .plan_models
        .iter()
        .filter(|m| selected.is_none_or(|s| s.contains(&m.name)))
        .collect()
}

#[cfg(test)]
mod tests;
