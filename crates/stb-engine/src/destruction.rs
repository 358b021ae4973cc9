//! `stb destroy --select pipeline:A …` and `stb reset-target`: dropping what a project owns
//! in its target, said beforehand in numbers, confirmed by typed challenges, and re-planned
//! under the target lock so that nothing is dropped that the reviewed plan did not name.
//!
//! What a pipeline owns comes from the project (its models' relations), the newest manifest
//! and, for a pipeline the project no longer has or with `--include-orphans`, older ones;
//! virtual deployments add their copies and stable views. A reset owns every pipeline and
//! the managed sources' landings. Lifecycle tables (`_streambuild_*`) are never owned.
//! Planning refuses, instead of widening the scope: a pipeline left out that reads a
//! selected one, and any view or materialized view (in any database) not owned that reads
//! an owned relation.

mod plan;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stb_ddl::string_literal;
use stb_warehouse::deployments::{ObjectRow, read_all};
use stb_warehouse::{Client, TargetLock};

use crate::EngineError;

pub use plan::{Request, plan, readers_left_out};

/// A destruction that cannot be planned or must not run.
pub const DESTRUCTION_CODE: &str = "STB-DESTROY-001";

/// What is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    DestroyPipelines,
    ResetTarget,
}

impl Operation {
    #[must_use]
    pub fn command(self) -> &'static str {
        match self {
            Self::DestroyPipelines => "destroy",
            Self::ResetTarget => "reset-target",
        }
    }
}

/// One relation the plan drops, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doomed {
    pub name: String,
    pub engine: String,
    /// The pipeline that owns it; `None` for a managed source's landing.
    pub pipeline: Option<String>,
    /// `table`, `materialized_view`, `view`, `stable_view`, `deployment_copy`,
    /// `kafka_table`, `landing_table`, `landing_view`.
    pub role: String,
    /// What the catalog counts for a table (views hold nothing).
    pub rows: Option<u64>,
    pub bytes: Option<u64>,
    pub statement: String,
}

/// A reviewed destruction: what it drops, in order, and what must be typed to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestructionPlan {
    pub operation: Operation,
    pub database: String,
    pub target: String,
    /// Every pipeline whose relations are dropped, sorted.
    pub pipelines: Vec<String>,
    pub relations: Vec<Doomed>,
    pub total_rows: u64,
    pub total_bytes: u64,
    pub max_table_size_to_drop: Option<u64>,
    /// What the operator types, in order, to run it.
    pub challenges: Vec<String>,
    /// Of the relations, their engines and the newest manifest: a plan made again under
    /// the lock must have the same.
    pub fingerprint: String,
}

/// One relation of the target database, as the catalog lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub name: String,
    pub engine: String,
    pub rows: Option<u64>,
    pub bytes: Option<u64>,
}

/// One relation a manifest recorded.
pub use stb_warehouse::results::ManifestResource as Resource;

/// What the warehouse holds, as read once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Live {
    pub database: String,
    pub relations: Vec<Relation>,
    /// Manifest ids, newest first.
    pub manifests: Vec<String>,
    /// The pipelines each manifest listed.
    pub manifest_pipelines: BTreeMap<String, Vec<String>>,
    pub resources: Vec<Resource>,
    /// Deployment copies, as their builds recorded them.
    pub objects: Vec<ObjectRow>,
    /// Every view and materialized view outside the system databases: (database, name,
    /// its `CREATE`), to find what reads an owned relation.
    pub readers: Vec<(String, String, String)>,
}

/// Reads what [`plan`] needs, in five queries.
///
/// # Errors
/// A read failed.
pub fn read(client: &Client, database: &str) -> Result<Live, EngineError> {
    let error = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    let db = string_literal(database);
    let rows = client
        .query(&format!(
            "SELECT name, engine, toString(total_rows) AS total_rows, toString(total_bytes) AS total_bytes FROM system.tables WHERE database = {db} ORDER BY name"
        ))
        .map_err(error)?;
    let number = |r: usize, c: &str| rows.text(r, c).and_then(|v| v.parse().ok());
    let relations = (0..rows.data.len())
        .map(|r| Relation {
            name: rows.text(r, "name").unwrap_or_default(),
            engine: rows.text(r, "engine").unwrap_or_default(),
            rows: number(r, "total_rows"),
            bytes: number(r, "total_bytes"),
        })
        .collect();
    let mut live = Live {
        database: database.to_owned(),
        relations,
        ..Live::default()
    };
    let manifests = stb_warehouse::results::manifests(client, database).map_err(error)?;
    for (id, pipelines) in manifests.manifests {
        live.manifests.push(id.clone());
        live.manifest_pipelines.insert(id, pipelines);
    }
    live.resources = manifests.resources;
    live.objects = read_all(client, database).map_err(error)?.objects;
    let readers = client
        .query(
            "SELECT database, name, create_table_query FROM system.tables WHERE engine IN ('View', 'MaterializedView', 'LiveView') AND database NOT IN ('system', 'INFORMATION_SCHEMA', 'information_schema') ORDER BY database, name",
        )
        .map_err(error)?;
    live.readers = (0..readers.data.len())
        .map(|r| {
            (
                readers.text(r, "database").unwrap_or_default(),
                readers.text(r, "name").unwrap_or_default(),
                readers.text(r, "create_table_query").unwrap_or_default(),
            )
        })
        .collect();
    Ok(live)
}

/// Called after each drop with its outcome; an error (the drop could not be recorded)
/// stops the drops after it.
pub type DropHook<'a> = dyn Fn(&Doomed, Result<(), &str>) -> Result<(), String> + 'a;

/// What running a plan did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dropped {
    pub dropped: Vec<String>,
    /// The relation whose drop failed, and why.
    pub failed: Option<(String, String)>,
    /// What was still there after a failure (`None`: it could not be read).
    pub remaining: Option<Vec<String>>,
    /// What went wrong around a destruction that otherwise ran (its records).
    pub warnings: Vec<String>,
}

/// Runs `reviewed` under the target lock: plans again with `replan` and refuses any
/// difference (drift), then drops each relation in order. A failure stops at that
/// relation; what remains is read back.
///
/// # Errors
/// The lock is held, the plan cannot be made again, or it drifted: nothing was dropped.
pub fn execute(
    client: &Client,
    owner: &str,
    reviewed: &DestructionPlan,
    replan: &dyn Fn() -> Result<DestructionPlan, EngineError>,
    on_drop: &DropHook<'_>,
) -> Result<Dropped, EngineError> {
    let database = &reviewed.database;
    let lock =
        TargetLock::acquire(client, database, owner, true).map_err(|e| EngineError::from(&e))?;
    let outcome = replan().and_then(|again| {
        if again.fingerprint == reviewed.fingerprint {
            Ok(drop_all(client, reviewed, on_drop))
        } else {
            Err(EngineError::new(
                DESTRUCTION_CODE,
                "the target changed since the plan was reviewed: nothing was dropped",
                "run the command again and review the new plan",
            )
            .of_kind(crate::ErrorKind::Conflict))
        }
    });
    let released = lock.release();
    let dropped = outcome?;
    released.map_err(|e| EngineError::from(&e))?;
    Ok(dropped)
}

fn drop_all(client: &Client, plan: &DestructionPlan, on_drop: &DropHook<'_>) -> Dropped {
    let mut result = Dropped::default();
    for doomed in &plan.relations {
        let outcome = client
            .execute(&doomed.statement, None)
            .map(|_| ())
            .map_err(|error| error.message);
        // Every drop is recorded before the next one runs: an unrecorded run stops.
        let recorded = on_drop(doomed, outcome.as_ref().copied().map_err(String::as_str));
        let failure = match (outcome, recorded) {
            (Ok(()), Ok(())) => {
                result.dropped.push(doomed.name.clone());
                None
            }
            (Ok(()), Err(unrecorded)) => {
                result.dropped.push(doomed.name.clone());
                Some(format!(
                    "the run's records could not be written: {unrecorded}"
                ))
            }
            (Err(message), _) => Some(message),
        };
        match failure {
            None => {}
            Some(message) => {
                result.failed = Some((doomed.name.clone(), message));
                result.remaining = client.load_catalog(&plan.database).ok().map(|catalog| {
                    plan.relations
                        .iter()
                        .filter(|d| catalog.relation(&d.name).is_some())
                        .map(|d| d.name.clone())
                        .collect()
                });
                break;
            }
        }
    }
    result
}

/// Who runs a destruction and how it is recorded.
pub struct Invocation<'a> {
    pub invocation_id: &'a str,
    pub project: &'a stb_project::Project,
    pub started_at_ms: u128,
    pub clock: std::time::Instant,
}

/// Runs a reviewed destruction as a recorded run: the lifecycle tables, `run_started`
/// (written before anything else happens: a run that cannot be recorded does not run), its
/// statements, then [`execute`] with a `statement_completed` event per drop, `run_completed` and the invocation
/// row (command `destroy` or `reset-target`, mode `destructive`).
///
/// # Errors
/// The run could not be recorded, the lock is held, or the plan drifted: nothing dropped.
pub fn run(
    client: &std::sync::Arc<Client>,
    reviewed: &DestructionPlan,
    replan: &dyn Fn() -> Result<DestructionPlan, EngineError>,
    invocation: &Invocation<'_>,
) -> Result<Dropped, EngineError> {
    let database = &reviewed.database;
    let strict = |e: stb_warehouse::WarehouseError| EngineError::from(&e);
    stb_warehouse::metadata::migrate(client, database).map_err(strict)?;
    let sink = stb_warehouse::events::RunEventSink::new(
        std::sync::Arc::clone(client),
        database,
        invocation.invocation_id,
    );
    sink.emit(
        "run_started",
        None,
        None,
        &serde_json::json!({
            "command": reviewed.operation.command(),
            "mode": "destructive",
            "database": database,
            "pipelines": reviewed.pipelines,
            "totalStatements": reviewed.relations.len(),
            "planFingerprint": reviewed.fingerprint,
        }),
    )
    .map_err(strict)?;
    let statements: Vec<stb_warehouse::statements::PlannedStatement> = reviewed
        .relations
        .iter()
        .map(|d| stb_warehouse::statements::PlannedStatement {
            step_id: format!("drop_{}", d.name),
            phase: "teardown".to_owned(),
            intent: "mutation".to_owned(),
            sql: d.statement.clone(),
        })
        .collect();
    stb_warehouse::statements::persist_statements(
        client,
        database,
        invocation.invocation_id,
        &statements,
        1,
    )
    .map_err(strict)?;
    let sequence = std::sync::atomic::AtomicUsize::new(0);
    let on_drop = |doomed: &Doomed, outcome: Result<(), &str>| {
        let at = sequence.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        sink.emit(
            "statement_completed",
            Some(&format!("drop_{}", doomed.name)),
            Some("teardown"),
            &serde_json::json!({
                "statementSequence": at,
                "intent": "mutation",
                "displayName": format!("drop_{}", doomed.name),
                "errorMessage": outcome.err(),
                "relation": doomed.name,
                "rows": doomed.rows,
            }),
        )
        .map(|_| ())
        .map_err(|e| e.message)
    };
    let result = execute(client, invocation.invocation_id, reviewed, replan, &on_drop);
    let (outcome, error) = match &result {
        Ok(dropped) => match &dropped.failed {
            None => ("succeeded", None),
            Some((relation, message)) => ("failed", Some(format!("{relation}: {message}"))),
        },
        Err(error) => ("failed", Some(error.message.clone())),
    };
    let summary = serde_json::json!({
        "operation": reviewed.operation,
        "pipelines": reviewed.pipelines,
        "result": result.as_ref().ok(),
    })
    .to_string();
    let _ = sink.emit(
        "run_completed",
        None,
        None,
        &serde_json::json!({
            "outcome": outcome,
            "exitCode": i32::from(outcome != "succeeded"),
            "errorMessage": error,
        }),
    );
    let recorded = stb_warehouse::records::write_invocation(
        client,
        database,
        &stb_warehouse::records::Invocation {
            invocation_id: invocation.invocation_id,
            project_identity: &invocation.project.name,
            target_identity: &invocation.project.target,
            command: reviewed.operation.command(),
            mode: Some("destructive"),
            outcome,
            exit_code: i32::from(outcome != "succeeded"),
            materialized_outcome: Some(if outcome == "succeeded" {
                "applied"
            } else {
                "failed"
            }),
            deployment_id: None,
            workflow_id: None,
            selected_node_count: reviewed.relations.len(),
            started_at_ms: invocation.started_at_ms,
            duration_ms: invocation.clock.elapsed().as_millis(),
            error_message: error.as_deref(),
            summary_json: &summary,
        },
    );
    let mut dropped = result?;
    if let Err(unrecorded) = recorded {
        dropped
            .warnings
            .push(format!("the invocation was not recorded: {unrecorded}"));
    }
    Ok(dropped)
}
