//! `GET /api/models/{name}`: one model for its page. What the compile says (its query, the
//! statement of each relation it owns, the tests and audits that read it) always; the
//! runs that built it when the warehouse answers. Its rows, bytes and freshness are in
//! `/api/state`, its checks' latest results in `/api/checks/status`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};

use crate::AppState;
use crate::error::ApiError;

type Shared = State<Arc<AppState>>;

pub(crate) async fn model(
    State(state): Shared,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    let details = stb_engine::model::describe(&compilation.compiled, &name)
        .map_err(|error| ApiError::engine(&error))?;
    let database = state.database.clone();
    let windows = state.run_windows;
    // The page stands without the run records: a warehouse that cannot answer leaves
    // `runs` null and its error (the API's `detail`) beside it.
    let runs = state
        .warehouse
        .read(move |client| {
            stb_engine::model::runs_of(client, &database, &name, windows)
                .map_err(|error| ApiError::engine(&error))
        })
        .await;
    let (runs, runs_error) = match runs {
        Ok(runs) => (
            serde_json::to_value(runs).unwrap_or_default(),
            serde_json::Value::Null,
        ),
        Err(error) => (serde_json::Value::Null, error.detail),
    };
    let mut answer = serde_json::to_value(details)
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    answer["runs"] = runs;
    answer["runsError"] = runs_error;
    Ok(Json(answer))
}
