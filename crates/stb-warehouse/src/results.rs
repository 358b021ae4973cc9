//! Reads of the recorded results (`_streambuild_node_results`), the build invocations
//! (`_streambuild_invocations`) and the manifests (`_streambuild_manifests`) that the engine
//! judges from: the latest status of each check, one check's history, the audit
//! scheduler's last slots, the last successful build, and what each manifest published.
//! The tables' schema is [`crate::metadata`]'s and their writes are [`crate::records`]'s;
//! a table not created yet reads as empty.

use std::collections::BTreeMap;

use serde::Serialize;
use stb_ddl::{QualifiedName, string_literal};

use crate::{Client, Rows, WarehouseError};

const NODE_RESULTS: &str = "_streambuild_node_results";
const INVOCATIONS: &str = "_streambuild_invocations";
const MANIFESTS: &str = "_streambuild_manifests";

/// A check's recorded result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckStatus {
    /// `test` or `audit`.
    pub kind: String,
    pub name: String,
    /// `passed`, `warning`, `failed`, `error`, `deferred`; `never_run` when the project
    /// has it and no record does.
    pub status: String,
    pub severity: Option<String>,
    pub failure_count: u64,
    /// What ran it: `manual`, `build`, `deployment`, `scheduled`, `dev_server`.
    pub trigger: Option<String>,
    pub completed_at: Option<String>,
    pub error_message: Option<String>,
    /// The record's own details (sample rows, differences, checked rows).
    pub payload: Option<serde_json::Value>,
}

/// One result row (`node_kind, node_name, status, severity, failures, trigger, completed,
/// error, payload`) as a check's status.
fn status_of(rows: &Rows, row: usize) -> CheckStatus {
    let text = |column: &str| rows.text(row, column).filter(|t| !t.is_empty());
    CheckStatus {
        kind: text("node_kind").unwrap_or_default(),
        name: text("node_name").unwrap_or_default(),
        status: text("status").unwrap_or_default(),
        severity: text("severity"),
        failure_count: text("failures").and_then(|f| f.parse().ok()).unwrap_or(0),
        trigger: text("trigger"),
        completed_at: text("completed"),
        error_message: text("error"),
        payload: text("payload").and_then(|p| serde_json::from_str(&p).ok()),
    }
}

/// The newest recorded result of every check of `target`.
///
/// # Errors
/// The records could not be read.
pub fn latest_results(
    client: &Client,
    database: &str,
    target: &str,
) -> Result<Vec<CheckStatus>, WarehouseError> {
    if !client.table_exists(database, NODE_RESULTS)? {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!(
        "SELECT node_kind, node_name, \
         argMax(status, completed_at) AS status, argMax(severity, completed_at) AS severity, \
         toString(argMax(failure_count, completed_at)) AS failures, \
         argMax(trigger, completed_at) AS trigger, toString(max(completed_at)) AS completed, \
         argMax(error_message, completed_at) AS error, argMax(payload_json, completed_at) AS payload \
         FROM {} WHERE target_identity = {} GROUP BY node_kind, node_name",
        QualifiedName::new(database, NODE_RESULTS),
        string_literal(target),
    ))?;
    Ok((0..rows.data.len())
        .map(|row| status_of(&rows, row))
        .collect())
}

/// The last `limit` recorded results of one check of `target`, newest first.
///
/// # Errors
/// The records could not be read.
pub fn result_history(
    client: &Client,
    database: &str,
    target: &str,
    (kind, name): (&str, &str),
    limit: usize,
) -> Result<Vec<CheckStatus>, WarehouseError> {
    if !client.table_exists(database, NODE_RESULTS)? {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!(
        "SELECT node_kind, node_name, status, severity, toString(failure_count) AS failures, trigger, \
         toString(completed_at) AS completed, error_message AS error, payload_json AS payload \
         FROM {} WHERE target_identity = {} AND node_kind = {} AND node_name = {} \
         ORDER BY completed_at DESC LIMIT {limit}",
        QualifiedName::new(database, NODE_RESULTS),
        string_literal(target),
        string_literal(kind),
        string_literal(name),
    ))?;
    Ok((0..rows.data.len())
        .map(|row| status_of(&rows, row))
        .collect())
}

/// Each audit's latest scheduled slot of `target` (ms since the epoch) and that run's
/// status.
///
/// # Errors
/// The records could not be read.
pub fn scheduled_slots(
    client: &Client,
    database: &str,
    target: &str,
) -> Result<BTreeMap<String, (i64, String)>, WarehouseError> {
    let mut last = BTreeMap::new();
    if !client.table_exists(database, NODE_RESULTS)? {
        return Ok(last);
    }
    let rows = client.query(&format!(
        "SELECT node_name, toString(toUnixTimestamp64Milli(max(scheduled_for))) AS slot, \
         argMax(status, scheduled_for) AS status FROM {} \
         WHERE node_kind = 'audit' AND trigger = 'scheduled' AND scheduled_for IS NOT NULL \
         AND target_identity = {} GROUP BY node_name",
        QualifiedName::new(database, NODE_RESULTS),
        string_literal(target),
    ))?;
    for row in 0..rows.data.len() {
        if let (Some(name), Some(slot)) = (
            rows.text(row, "node_name"),
            rows.text(row, "slot").and_then(|s| s.parse().ok()),
        ) {
            last.insert(name, (slot, rows.text(row, "status").unwrap_or_default()));
        }
    }
    Ok(last)
}

/// When the latest successful build of `target` ended (ms since the epoch); `None` before
/// the first.
///
/// # Errors
/// The records could not be read.
pub fn last_successful_build_ms(
    client: &Client,
    database: &str,
    target: &str,
) -> Result<Option<i64>, WarehouseError> {
    if !client.table_exists(database, INVOCATIONS)? {
        return Ok(None);
    }
    let rows = client.query(&format!(
        "SELECT toString(toUnixTimestamp64Milli(max(completed_at))) AS built, count() AS n \
         FROM {} WHERE command = 'build' AND outcome = 'succeeded' AND target_identity = {}",
        QualifiedName::new(database, INVOCATIONS),
        string_literal(target),
    ))?;
    let any = rows.text(0, "n").is_some_and(|n| n != "0");
    Ok(rows
        .text(0, "built")
        .and_then(|t| t.parse().ok())
        .filter(|_| any))
}

/// One relation a manifest published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ManifestResource {
    pub manifest_id: String,
    /// Empty for a source's landing.
    pub pipeline: String,
    pub logical_type: String,
    pub logical_name: String,
    pub role: String,
    pub relation: String,
}

/// The manifests of the builds of `database`, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifests {
    /// Each manifest's id and the pipelines it built.
    pub manifests: Vec<(String, Vec<String>)>,
    /// The relations in `database` they published.
    pub resources: Vec<ManifestResource>,
}

/// What every build of `database` published, newest first.
///
/// # Errors
/// The records could not be read.
pub fn manifests(client: &Client, database: &str) -> Result<Manifests, WarehouseError> {
    let mut found = Manifests::default();
    if !client.table_exists(database, MANIFESTS)? {
        return Ok(found);
    }
    let table = QualifiedName::new(database, MANIFESTS);
    let db = string_literal(database);
    let manifests = client.query(&format!(
        "SELECT manifest_id, pipelines FROM {table} WHERE target_database = {db} ORDER BY published_at DESC, manifest_id DESC"
    ))?;
    for row in 0..manifests.data.len() {
        let pipelines = manifests.data[row]
            .get(1)
            .and_then(|v| v.as_array())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        found.manifests.push((
            manifests.text(row, "manifest_id").unwrap_or_default(),
            pipelines,
        ));
    }
    let resources = client.query(&format!(
        "SELECT manifest_id, r.1 AS pipeline, r.2 AS logical_type, r.3 AS logical_name, r.4 AS role, r.6 AS relation FROM {table} ARRAY JOIN resources AS r WHERE target_database = {db} AND r.5 = {db}"
    ))?;
    let text = |r: usize, c: &str| resources.text(r, c).unwrap_or_default();
    found.resources = (0..resources.data.len())
        .map(|r| ManifestResource {
            manifest_id: text(r, "manifest_id"),
            pipeline: text(r, "pipeline"),
            logical_type: text(r, "logical_type"),
            logical_name: text(r, "logical_name"),
            role: text(r, "role"),
            relation: text(r, "relation"),
        })
        .collect();
    Ok(found)
}
