//! `stb deployment audit`: is a staged deployment ready to promote? For each table that
//! roots one of its rebuilds, the staged copy is compared with the active copy readers see
//! and with the relation its materialized view reads (rows, and how far behind the newest
//! position it is); the project's SQL audits that read a model of the deployment run
//! against its copies. The assessment is a report: it never changes anything.

mod judge;
mod observe;

use serde::Serialize;
use stb_compile::{Audit, Compiled};
use stb_project::project_config::DeploymentReadiness;
use stb_warehouse::Client;

use crate::EngineError;
use crate::audits::{AuditResult, Executed, Placement, run_placed};
use crate::deployments::{DEPLOYMENT_CODE, Record, State, inventory};

pub use judge::{Assessment, judge, overall};

/// One partition of an offsets-mode root: the newest offset the replay source, the staged
/// copy and the active copy hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PartitionReadiness {
    pub partition: String,
    pub source_max_offset: Option<i64>,
    pub staged_max_offset: Option<i64>,
    pub active_max_offset: Option<i64>,
    /// Newest source row's time minus the time of the newest source row the staged copy
    /// holds; `None` when the source keeps no time column.
    pub lag_seconds: Option<f64>,
}

/// What was observed of one staged root table, and the verdict on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RootReadiness {
    pub model: String,
    /// The stable relation readers query (`tbl__orders`).
    pub logical_name: String,
    /// The deployment's copy (`tbl__orders__<id>`).
    pub staged_relation: String,
    pub staged_exists: bool,
    /// The relation the stable view selects from now, if it exists.
    pub active_relation: Option<String>,
    /// What the staged copy's materialized view reads.
    pub replay_source: Option<String>,
    /// `offsets`, `timestamp`, `landed_at` or `cursor`, from the staged copy's columns.
    pub boundary_mode: Option<&'static str>,
    pub staged_rows: Option<u64>,
    pub active_rows: Option<u64>,
    pub replay_source_rows: Option<u64>,
    /// Offsets mode: per partition of the replay source.
    pub partitions: Vec<PartitionReadiness>,
    pub partitions_compared: usize,
    /// Partitions with source rows and none staged.
    pub partitions_missing: usize,
    /// Partitions whose staged copy stops before the source's newest offset.
    pub partitions_lagging: usize,
    pub max_offset_gap: Option<i64>,
    pub avg_offset_gap: Option<f64>,
    /// Scalar modes: the lineage column's range in each copy.
    pub staged_min: Option<String>,
    pub staged_max: Option<String>,
    pub active_min: Option<String>,
    pub active_max: Option<String>,
    /// Offsets: the largest partition lag. Time modes: active newest minus staged newest.
    pub lag_seconds: Option<f64>,
    /// Cursor mode: how far the staged copy's newest cursor is behind the active one's.
    pub cursor_gap: Option<i128>,
    pub assessment: Assessment,
    pub reasons: Vec<String>,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Readiness {
    pub deployment_id: String,
    pub assessment: Assessment,
    pub thresholds: DeploymentReadiness,
    pub roots: Vec<RootReadiness>,
    pub audits: Vec<AuditResult>,
    /// Why the overall assessment is what it is, worst first.
    pub reasons: Vec<String>,
}

/// The deployment `stb deployment audit` looks at: `id`, or the only staged deployment.
///
/// # Errors
/// The id is unknown or its build did not finish; with no id, no deployment or more than
/// one is staged (the message lists them with their roots).
pub fn choose(state: &State, id: Option<&str>) -> Result<Record, EngineError> {
    let records = inventory(state);
    if let Some(id) = id {
        let record = records
            .into_iter()
            .find(|r| r.deployment_id == id)
            .ok_or_else(|| {
                EngineError::new(
                    DEPLOYMENT_CODE,
                    format!("no deployment {id}"),
                    "`stb deployment list` shows the deployments",
                )
            })?;
        if record.created_at.is_none() || record.persisted_status == "incomplete" {
            return Err(EngineError::new(
                DEPLOYMENT_CODE,
                format!("deployment {id} is incomplete: its build did not finish"),
                "build it again with `stb build --deployment-id` (or a new id) and audit that",
            ));
        }
        return Ok(record);
    }
    let mut staged: Vec<Record> = records
        .into_iter()
        .filter(|r| r.state == "staged")
        .collect();
    match staged.len() {
        1 => Ok(staged.remove(0)),
        0 => Err(EngineError::new(
            DEPLOYMENT_CODE,
            "no staged deployment to audit",
            "build one with `stb build`, or name a deployment: `stb deployment audit <id>`",
        )),
        _ => Err(EngineError::new(
            DEPLOYMENT_CODE,
            format!(
                "ambiguous: {} staged deployments: {}",
                staged.len(),
                staged
                    .iter()
                    .map(|r| format!("{} (roots: {})", r.deployment_id, r.root_names.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            "name one: `stb deployment audit <id>`",
        )),
    }
}

/// Observes and judges deployment `id` (chosen with [`choose`]), and runs the project's
/// audits that read one of its models against its copies. Returns the report and the
/// audit statements that ran.
///
/// # Errors
/// A read of the warehouse failed.
pub fn assess(
    client: &Client,
    database: &str,
    compiled: &Compiled,
    state: &State,
    id: &str,
    thresholds: DeploymentReadiness,
) -> Result<(Readiness, Executed), EngineError> {
    let mut roots = observe::roots(client, database, compiled, state, id)?;
    for root in &mut roots {
        (root.assessment, root.reasons) = judge(root, &thresholds);
    }
    let held: Vec<&str> = state
        .objects
        .iter()
        .filter(|o| o.deployment_id == id)
        .map(|o| o.model.as_str())
        .collect();
    let audits: Vec<&Audit> = compiled
        .audits
        .iter()
        .filter(|a| a.models.iter().any(|m| held.contains(&m.as_str())))
        .collect();
    let place = |model: &stb_plan::direct::PlanModel| staged_placement(database, state, id, model);
    let (results, executed) = run_placed(client, database, compiled, &audits, &place)?;
    let (assessment, reasons) = overall(&roots, &results);
    Ok((
        Readiness {
            deployment_id: id.to_owned(),
            assessment,
            thresholds,
            roots,
            audits: results,
            reasons,
        },
        executed,
    ))
}

/// A model of the deployment is read from its copies; any other model from its stable
/// relation, as readers would see it beside the promoted deployment.
fn staged_placement(
    database: &str,
    state: &State,
    id: &str,
    model: &stb_plan::direct::PlanModel,
) -> Placement {
    let copies: Vec<&stb_warehouse::deployments::ObjectRow> = state
        .objects
        .iter()
        .filter(|o| o.deployment_id == id && o.model == model.name)
        .collect();
    let read = copies
        .iter()
        .find(|o| o.object_type != "materialized_view")
        .map(|o| o.physical_name.clone());
    match read {
        Some(physical) => Placement {
            reference: stb_ddl::QualifiedName::new(database, &physical).to_string(),
            relations: copies.iter().map(|o| o.physical_name.clone()).collect(),
        },
        None => Placement::live(model),
    }
}
