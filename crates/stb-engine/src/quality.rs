//! The records of test and audit runs (`stb test`, `stb audit`, a deployment's audits,
//! the dev server's checks and scheduled audits), and the latest status of each check as
//! those records hold it.

use std::collections::BTreeMap;

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
pub use stb_warehouse::results::CheckStatus;

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
    let mut found: BTreeMap<(String, String), CheckStatus> =
        stb_warehouse::results::latest_results(client, database, target)?
            .into_iter()
            .map(|status| ((status.kind.clone(), status.name.clone()), status))
            .collect();
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
    stb_warehouse::results::result_history(client, database, target, (kind, name), limit)
}
