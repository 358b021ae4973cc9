//! The records of test and audit runs (`stb test`, `stb audit`, a deployment's audits,
//! the dev server's checks and scheduled audits), and the latest status of each check as
//! those records hold it.

use std::collections::BTreeMap;

use serde::Serialize;
use stb_warehouse::{Client, WarehouseError};

/// What a recorded run was: its command (`test`, `audit`, `deployment audit`), what
/// triggered its results (`manual`, `deployment`, `scheduled`, `dev_server`) and the
/// deployment it audited.
pub struct RecordedRun<'a> {
    pub command: &'a str,
    pub trigger: &'a str,
    pub deployment_id: Option<&'a str>,
}

/// Records a run: the lifecycle tables, an invocation row and one node result per test or
/// audit. Returns the invocation id.
///
/// # Errors
/// The records could not be written.
pub fn record_run(
    client: &Client,
    database: &str,
    project: &stb_project::Project,
    run: &RecordedRun<'_>,
    passed: bool,
    results: &[stb_warehouse::records::NodeResult<'_>],
    started: std::time::SystemTime,
) -> Result<String, WarehouseError> {
    let invocation_id = uuid::Uuid::new_v4().to_string();
    let started_at_ms = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let duration_ms = started.elapsed().map_or(0, |d| d.as_millis());
    stb_warehouse::metadata::migrate(client, database)?;
    stb_warehouse::records::write_node_results(
        client,
        database,
        &invocation_id,
        &project.target,
        run.trigger,
        results,
    )?;
    stb_warehouse::records::write_invocation(
        client,
        database,
        &stb_warehouse::records::Invocation {
            invocation_id: &invocation_id,
            project_identity: &project.name,
            target_identity: &project.target,
            command: run.command,
            mode: None,
            outcome: if passed { "succeeded" } else { "failed" },
            exit_code: i32::from(!passed),
            materialized_outcome: None,
            deployment_id: run.deployment_id,
            workflow_id: None,
            selected_node_count: results.len(),
            started_at_ms,
            duration_ms,
            error_message: None,
            summary_json: &serde_json::json!({"results": results.len(), "trigger": run.trigger})
                .to_string(),
        },
    )?;
    Ok(invocation_id)
}

/// A check's newest recorded result.
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
fn status_of(rows: &stb_warehouse::Rows, row: usize) -> CheckStatus {
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

/// The newest result of every check in `checks` (kind and name) for `target`, from the
/// records; a check without one is `never_run` (neither passing nor failing).
///
/// # Errors
/// The records could not be read.
pub fn latest(
    client: &Client,
    database: &str,
    target: &str,
    checks: &[(&str, &str)],
) -> Result<Vec<CheckStatus>, WarehouseError> {
    let mut found: BTreeMap<(String, String), CheckStatus> = BTreeMap::new();
    if client.table_exists(database, "_streambuild_node_results")? {
        let rows = client.query(&format!(
            "SELECT node_kind, node_name, \
             argMax(status, completed_at) AS status, argMax(severity, completed_at) AS severity, \
             toString(argMax(failure_count, completed_at)) AS failures, \
             argMax(trigger, completed_at) AS trigger, toString(max(completed_at)) AS completed, \
             argMax(error_message, completed_at) AS error, argMax(payload_json, completed_at) AS payload \
             FROM {} WHERE target_identity = {} GROUP BY node_kind, node_name",
            stb_ddl::QualifiedName::new(database, "_streambuild_node_results"),
            stb_ddl::string_literal(target),
        ))?;
        for row in 0..rows.data.len() {
            let status = status_of(&rows, row);
            found.insert((status.kind.clone(), status.name.clone()), status);
        }
    }
    Ok(checks
        .iter()
        .map(|(kind, name)| {
            let key = ((*kind).to_owned(), (*name).to_owned());
            match found.remove(&key) {
                Some(status) => status,
                None => CheckStatus {
                    kind: key.0,
                    name: key.1,
                    status: "never_run".to_owned(),
                    severity: None,
                    failure_count: 0,
                    trigger: None,
                    completed_at: None,
                    error_message: None,
                    payload: None,
                },
            }
        })
        .collect())
}

/// The last `limit` recorded results of one check in `target`, newest first.
///
/// # Errors
/// The records could not be read.
pub fn history(
    client: &Client,
    database: &str,
    target: &str,
    kind: &str,
    name: &str,
    limit: usize,
) -> Result<Vec<CheckStatus>, WarehouseError> {
    if !client.table_exists(database, "_streambuild_node_results")? {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!(
        "SELECT node_kind, node_name, status, severity, toString(failure_count) AS failures, trigger, \
         toString(completed_at) AS completed, error_message AS error, payload_json AS payload \
         FROM {} WHERE target_identity = {} AND node_kind = {} AND node_name = {} \
         ORDER BY completed_at DESC LIMIT {limit}",
        stb_ddl::QualifiedName::new(database, "_streambuild_node_results"),
        stb_ddl::string_literal(target),
        stb_ddl::string_literal(kind),
        stb_ddl::string_literal(name),
    ))?;
    Ok((0..rows.data.len())
        .map(|row| status_of(&rows, row))
        .collect())
}
