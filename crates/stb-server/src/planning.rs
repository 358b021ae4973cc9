//! Plans made in the server's own process: the scope parsed once from the request, planned
//! by [`stb_engine::plan::plan`] (the function `stb plan` calls) against the project the
//! server compiled, on a blocking thread with a connection of its own.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::http::StatusCode;
use stb_engine::plan::Purpose;
use stb_engine::scope::Scope;

use crate::AppState;
use crate::error::ApiError;

/// A plan as the handlers need it: its JSON (the bytes `stb plan --json` prints, compact)
/// and what authorising a build of it takes.
pub(crate) struct Previewed {
    pub(crate) json: Vec<u8>,
    pub(crate) hash: String,
    pub(crate) has_work: bool,
    /// Every model it names.
    pub(crate) models: BTreeSet<String>,
    /// Its statements as `plan.json` lists them, every phase in the order a build runs
    /// them, when they were asked for (at most [`STATEMENTS_SHOWN`]), and how many there are.
    pub(crate) statements: Option<(serde_json::Value, usize)>,
}

/// The most statements a preview carries: a page shows them; at 10,000 models a plan has
/// tens of thousands, which `target/run/plan/` keeps.
pub(crate) const STATEMENTS_SHOWN: usize = 2_000;

/// Plans `scope` for showing, with its statements when `statements` is set. Statements
/// the warehouse refuses answer 400 with every located error (the first one's members at
/// the top, all of them under `errors`).
///
/// # Errors
/// 409 while the project does not compile, 503 without a warehouse connection, the
/// engine's refusal (400, or 502 from the warehouse), 400 for refused statements.
pub(crate) async fn preview(
    state: &AppState,
    scope: Scope,
    statements: bool,
) -> Result<Previewed, ApiError> {
    let compilation = state.compilation()?;
    let database = state.database.clone();
    let warehouse = Arc::clone(&state.warehouse);
    tokio::task::spawn_blocking(move || {
        let client = warehouse
            .connect_blocking()
            .map_err(|e| ApiError::service_unavailable(format!("no warehouse connection: {e}")))?;
        let plan = stb_engine::plan::plan(
            &compilation.project,
            &compilation.compiled,
            &Arc::new(client),
            &database,
            &scope,
            Purpose::Show,
            None,
        )
        .map_err(|error| ApiError::engine(&error))?;
        if let Some(invalid) = plan.refused() {
            return Err(refused(invalid));
        }
        let json = serde_json::to_vec(&plan.document())
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let statements = statements.then(|| listed_statements(&plan));
        Ok(Previewed {
            json,
            hash: plan.hash(),
            has_work: plan.has_work(),
            models: plan.models(),
            statements,
        })
    })
    .await
    .unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
        ))
    })
}

/// Statements the warehouse refused: the first one speaks for all, and every one is kept
/// with its file, line and column.
fn refused(invalid: stb_diagnostics::Diagnostics) -> ApiError {
    let sorted = serde_json::to_value(invalid.into_sorted()).unwrap_or_default();
    let mut detail = sorted
        .as_array()
        .and_then(|all| all.first())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    detail["errors"] = sorted;
    ApiError {
        status: StatusCode::BAD_REQUEST,
        detail,
    }
}

/// The plan's statements, every phase in order, as `plan.json` lists each phase's (the
/// sequence counts across phases), the first [`STATEMENTS_SHOWN`] of them, and how many.
/// Only those shown are turned into JSON.
fn listed_statements(plan: &stb_engine::plan::Plan) -> (serde_json::Value, usize) {
    let parts = plan.parts();
    let total = parts.iter().map(|p| p.planned.workflow.steps.len()).sum();
    let shown: Vec<stb_plan::workflow::StepJson<'_>> = parts
        .iter()
        .flat_map(|part| {
            let workflow = &part.planned.workflow;
            workflow.steps.iter().map(move |step| (workflow, step))
        })
        .take(STATEMENTS_SHOWN)
        .enumerate()
        .map(|(index, (workflow, step))| {
            stb_plan::workflow::StepJson::of(workflow, step, index + 1)
        })
        .collect();
    (serde_json::to_value(shown).unwrap_or_default(), total)
}
