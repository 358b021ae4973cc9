//! One model as its page shows it: the compiled query, the statement that creates each
//! relation it owns, the tests and audits that read it (from the compile alone), and the
//! runs that built it (from the warehouse's run records).

use serde::Serialize;
use stb_compile::Compiled;
use stb_warehouse::Client;

use crate::EngineError;
use crate::runs::{RunSummary, Windows};

/// A model that the compile does not have.
pub const UNKNOWN_MODEL_CODE: &str = "STB-MODEL-001";

/// A relation the model owns and the statement that creates it, as a direct build executes
/// it (a deployment of a virtual model creates it under its copy's name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnedStatement {
    /// `table`, `materialized_view` or `view`.
    pub kind: &'static str,
    pub relation: String,
    pub sql: String,
}

/// A test or audit that reads the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `test` or `audit`, as `/api/checks/status` names them.
    pub kind: &'static str,
    pub name: String,
    /// The project file it comes from.
    pub file: String,
}

/// What the compile says about one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelDetails {
    pub name: String,
    pub pipeline: String,
    /// The compiled query: what fingerprints hash and `stb plan -v` diffs.
    pub query: String,
    pub statements: Vec<OwnedStatement>,
    /// Tests first, then audits, each by name.
    pub checks: Vec<Check>,
}

/// `name`'s compiled query, statements and checks.
///
/// # Errors
/// [`UNKNOWN_MODEL_CODE`] (not found) when the compile has no such model.
pub fn describe(compiled: &Compiled, name: &str) -> Result<ModelDetails, EngineError> {
    let Some(model) = compiled.plan_models.iter().find(|m| m.name == name) else {
        return Err(EngineError::new(
            UNKNOWN_MODEL_CODE,
            format!("no model '{name}' in the project"),
            "the Catalog and `stb discover` list the models",
        )
        .of_kind(crate::ErrorKind::NotFound));
    };
    let statements = model
        .relations
        .iter()
        .zip(&model.create_statements)
        .map(|((kind, relation), sql)| OwnedStatement {
            kind: kind.as_str(),
            relation: relation.clone(),
            sql: sql.clone(),
        })
        .collect();
    let tests = compiled
        .tests
        .iter()
        .filter(|t| t.targets.iter().any(|target| target == name))
        .map(|t| ("test", &t.name, &t.file));
    let audits = compiled
        .audits
        .iter()
        .filter(|a| a.models.iter().any(|m| m == name))
        .map(|a| ("audit", &a.name, &a.file));
    let mut checks: Vec<Check> = tests
        .chain(audits)
        .map(|(kind, name, file)| Check {
            kind,
            name: name.clone(),
            file: file.clone(),
        })
        .collect();
    checks.sort_by(|a, b| (a.kind != "test", &a.name).cmp(&(b.kind != "test", &b.name)));
    Ok(ModelDetails {
        name: model.name.clone(),
        pipeline: model.pipeline.clone(),
        query: model.query.clone(),
        statements,
        checks,
    })
}

/// How many recent runs are looked through for a model's builds: a model that no run
/// among them built shows none (its page says how far it looked).
pub const RUNS_SEARCHED: usize = 200;

/// The runs that executed a model, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRuns {
    /// The newest run that executed it and succeeded.
    pub last_success: Option<RunSummary>,
    /// The newest run that executed it, whatever its outcome.
    pub last: Option<RunSummary>,
    /// How many of the target's most recent runs were looked through.
    pub searched: usize,
}

/// The runs among the target's [`RUNS_SEARCHED`] most recent that executed `name`
/// (`model:<name>` among their executed ids). Two queries.
///
/// # Errors
/// The run records could not be read.
pub fn runs_of(
    client: &Client,
    database: &str,
    name: &str,
    windows: Windows,
) -> Result<ModelRuns, EngineError> {
    let runs = crate::runs::list(client, database, RUNS_SEARCHED, windows)?;
    Ok(pick_runs(runs, name))
}

fn pick_runs(runs: Vec<RunSummary>, name: &str) -> ModelRuns {
    let searched = runs.len();
    let id = format!("model:{name}");
    let mut touching = runs.into_iter().filter(|run| run.scope.contains(&id));
    let last = touching.next();
    let last_success = if last.as_ref().is_some_and(|r| r.status == "succeeded") {
        last.clone()
    } else {
        touching.find(|run| run.status == "succeeded")
    };
    ModelRuns {
        last_success,
        last,
        searched,
    }
}

#[cfg(test)]
mod tests;
