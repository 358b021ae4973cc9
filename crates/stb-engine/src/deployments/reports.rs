//! What `stb deployment list | show | diff` report, whole: read, judged and shaped as their
//! `--json` prints them. The CLI renders them as text too; the dev server answers
//! `/api/deployments*` with the same values, read in its own process.

use serde::Serialize;
use stb_project::Project;
use stb_project::project_config::Mode;
use stb_warehouse::Client;

use super::{DEPLOYMENT_CODE, Diff, Record, count_rows, diff, diff_relations, inventory};
use super::{parse_range, read_state};
use crate::EngineError;

/// The project has no virtual pipelines.
pub const NOT_VIRTUAL_CODE: &str = "STB-DEPLOY-004";

/// Refuses a deployment command on a project without virtual pipelines.
///
/// # Errors
/// `STB-DEPLOY-004`.
pub fn require_virtual(project: &Project) -> Result<(), EngineError> {
    if project.pipelines.iter().any(|p| p.mode == Mode::Virtual) {
        return Ok(());
    }
    Err(EngineError::new(
        NOT_VIRTUAL_CODE,
        "the project has no virtual pipelines: deployments do not apply",
        "set mode = \"virtual\" in a pipeline.toml, or [defaults] pipeline_mode",
    ))
}

/// `stb deployment list --json`: the target's deployments, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    pub database: String,
    pub deployments: Vec<Record>,
}

/// `stb deployment show ID --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub database: String,
    pub deployment: Record,
}

/// `stb deployment diff RANGE --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    pub database: String,
    pub diff: Diff,
    /// `--data`: the rows of each relation bound to two different copies, compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<crate::data_diff::RelationData>>,
}

/// Every deployment of `database`, newest first.
///
/// # Errors
/// A read failed.
pub fn list(client: &Client, database: &str) -> Result<Listing, EngineError> {
    let state = read_state(client, database)?;
    Ok(Listing {
        database: database.to_owned(),
        deployments: inventory(&state),
    })
}

/// Deployment `id` of `database`.
///
/// # Errors
/// A read failed, or there is no such deployment (`STB-DEPLOY-001`).
pub fn show(client: &Client, database: &str, id: &str) -> Result<Shown, EngineError> {
    let state = read_state(client, database)?;
    let deployment = inventory(&state)
        .into_iter()
        .find(|r| r.deployment_id == id)
        .ok_or_else(|| {
            EngineError::new(
                DEPLOYMENT_CODE,
                format!("no deployment {id} in '{database}'"),
                "`stb deployment list` shows the deployments",
            )
            .of_kind(crate::ErrorKind::NotFound)
        })?;
    Ok(Shown {
        database: database.to_owned(),
        deployment,
    })
}

/// Compares the endpoints `range` names (`ID`: what promoting it would change; `FROM:TO`,
/// each side an id or `active`): each relation's columns and row counts.
///
/// # Errors
/// A malformed range, an unknown or incomplete deployment, or a failed read.
pub fn compare(client: &Client, database: &str, range: &str) -> Result<Compared, EngineError> {
    compare_with(client, database, range, None)
}

/// [`compare`], and given `data`, each relation's rows compared too
/// ([`crate::data_diff`]).
///
/// # Errors
/// As [`compare`]; a relation whose rows cannot be compared says why in its entry.
pub fn compare_with(
    client: &Client,
    database: &str,
    range: &str,
    data: Option<&crate::data_diff::Options>,
) -> Result<Compared, EngineError> {
    let (from, to) = parse_range(range)?;
    let state = read_state(client, database)?;
    let counted = diff_relations(&state, &from, &to)?;
    let rows = count_rows(client, database, &counted)?;
    let diff = diff(&state, &from, &to, &rows)?;
    let data = data
        .map(|options| crate::data_diff::compare(client, database, &state, &diff, options))
        .transpose()?;
    Ok(Compared {
        database: database.to_owned(),
        diff,
        data,
    })
}

/// `stb janitor --json`: which deployments could go and why, with the rows their tables
/// hold; once applied, the relations dropped. Members in key order, as the JSON value it
/// was sorted them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Janitor {
    pub applied: bool,
    pub candidates: Vec<super::Cleanup>,
    pub database: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Vec<String>>,
    /// Rows in each deletable deployment's tables.
    pub rows: std::collections::BTreeMap<String, u64>,
}

impl Janitor {
    /// The deployments it would delete, sorted.
    #[must_use]
    pub fn deletable(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .candidates
            .iter()
            .filter(|c| c.delete)
            .map(|c| c.deployment_id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Rows in the deletable deployments' tables.
    #[must_use]
    pub fn rows_lost(&self) -> u64 {
        self.rows.values().sum()
    }
}

/// The janitor's dry run: each deployment judged against `retention` by the warehouse's
/// clock, and the rows each deletable table holds.
///
/// # Errors
/// A read failed.
pub fn janitor(
    client: &Client,
    database: &str,
    retention: super::Retention,
) -> Result<Janitor, EngineError> {
    let state = read_state(client, database)?;
    let now = super::warehouse_now(client)?;
    let candidates = super::plan_cleanup(&state, retention, &now);
    let tables: Vec<String> = candidates
        .iter()
        .filter(|c| c.delete)
        .flat_map(|c| c.relations.iter())
        .filter(|r| {
            state
                .objects
                .iter()
                .any(|o| &o.physical_name == *r && o.object_type == "table")
        })
        .cloned()
        .collect();
    let rows = count_rows(client, database, &tables)?;
    Ok(Janitor {
        applied: false,
        candidates,
        database: database.to_owned(),
        dropped: None,
        rows,
    })
}

/// Drops what the dry run `judged` marks deletable, under the target lock held as `owner`
/// (see [`super::apply_cleanup`]).
///
/// # Errors
/// The lock is held, a copy became active meanwhile, or a drop failed.
pub fn apply_janitor(
    client: &Client,
    owner: &str,
    judged: Janitor,
) -> Result<Janitor, EngineError> {
    let dropped = super::apply_cleanup(client, &judged.database, owner, &judged.candidates)?;
    Ok(Janitor {
        applied: true,
        dropped: Some(dropped),
        ..judged
    })
}

/// `stb deployment promote | rollback --json`: the reference's names at the top level, for
/// scripts written against it; the whole record (publication id, time, bindings) under
/// `publication`. Members in key order, as the JSON value it was sorted them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Published {
    pub deployment_id: String,
    pub operation: &'static str,
    pub previous_deployment_id: Option<String>,
    pub publication: super::Publication,
}

impl From<super::Publication> for Published {
    fn from(publication: super::Publication) -> Self {
        Self {
            deployment_id: publication.deployment_id.clone(),
            operation: publication.operation,
            previous_deployment_id: publication.previous_deployment_id.clone(),
            publication,
        }
    }
}

/// Promotes deployment `id`: switches the stable views to its copies (tables, then views)
/// under the target lock held as `owner`, and records the publication.
///
/// # Errors
/// An unknown or incomplete deployment, a copy gone, the lock held, or a failed switch.
pub fn promote(
    client: &Client,
    database: &str,
    owner: &str,
    id: &str,
) -> Result<Published, EngineError> {
    let state = read_state(client, database)?;
    let bindings = super::promotion_bindings(&state, id)?;
    super::switch(client, database, owner, id, "promote", None, &bindings).map(Published::from)
}

/// Decides a rollback to `to` (see [`super::plan_rollback`]).
///
/// # Errors
/// Nothing sound to go back to, or a failed read.
pub fn plan_rollback(
    client: &Client,
    database: &str,
    to: &super::RollbackTo,
) -> Result<super::RollbackPlan, EngineError> {
    super::plan_rollback(&read_state(client, database)?, to)
}

/// Carries out a decided rollback under the target lock held as `owner`.
///
/// # Errors
/// The lock is held, or a switch or the record failed.
pub fn rollback(
    client: &Client,
    database: &str,
    owner: &str,
    plan: &super::RollbackPlan,
) -> Result<Published, EngineError> {
    super::switch(
        client,
        database,
        owner,
        &plan.target_deployment_id,
        "rollback",
        Some(&plan.current_deployment_id),
        &plan.bindings,
    )
    .map(Published::from)
}
