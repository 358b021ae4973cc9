//! `POST /api/deployments/cleanup`: the janitor (`stb janitor`) from the API. Without
//! `apply` it is the dry run: which deployments could go, why, and how many rows their
//! tables hold. Dropping needs `apply` **and** the deployment ids that preview listed
//! (`confirmDeployments`): when the deletable set is no longer the one the caller saw, the
//! server drops nothing and answers 409 with the new preview. The reference drops at once.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use stb_engine::deployments::Retention;
use stb_engine::deployments::reports::{self, Janitor};

use crate::AppState;
use crate::auth::Principal;
use crate::error::ApiError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CleanupRequest {
    retention_days: Option<u32>,
    minimum_rollback_deployments: Option<u32>,
    minimum_age_minutes: Option<u32>,
    #[serde(default)]
    apply: bool,
    confirm_deployments: Option<Vec<String>>,
}

/// The janitor's limits: those given, its defaults (as `stb janitor`'s) otherwise.
fn retention(request: &CleanupRequest) -> Retention {
    Retention {
        retention_days: request.retention_days.unwrap_or(7),
        minimum_rollback_deployments: request
            .minimum_rollback_deployments
            .map_or(2, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        minimum_age_minutes: request.minimum_age_minutes.unwrap_or(60),
    }
}

fn answer(janitor: &Janitor) -> Result<Json<serde_json::Value>, ApiError> {
    serde_json::to_value(janitor)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub(crate) async fn cleanup(
    State(state): State<Arc<AppState>>,
    axum::Extension(principal): axum::Extension<Principal>,
    Json(request): Json<CleanupRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    crate::work::authorize_in(
        &state,
        &principal,
        "deployment.cleanup",
        crate::authz::Scope::Target,
    )
    .await?;
    let compilation = state.compilation()?;
    reports::require_virtual(&compilation.project).map_err(|error| ApiError::engine(&error))?;
    let limits = retention(&request);
    let database = state.database.clone();
    let preview = state
        .warehouse
        .read(move |client| {
            reports::janitor(client, &database, limits).map_err(|error| ApiError::engine(&error))
        })
        .await?;
    if !request.apply {
        return answer(&preview);
    }
    let Some(mut confirmed) = request.confirm_deployments else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "apply needs confirmDeployments: the deployment ids the preview (apply: false) listed as deletable",
        ));
    };
    confirmed.sort();
    let now = preview.deletable();
    if confirmed != now {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            detail: serde_json::json!({
                "message": "the deletable deployments are not the ones confirmed; nothing was dropped, review the new preview",
                "confirmed": confirmed,
                "deletable": now,
                "preview": preview,
            }),
        });
    }
    if now.is_empty() {
        return answer(&preview);
    }
    // The drop holds the target lock under an owner of its own, as a CLI run would.
    let owner = uuid::Uuid::new_v4().to_string();
    let applied = state
        .warehouse
        .read(move |client| {
            reports::apply_janitor(client, &owner, preview)
                .map_err(|error| ApiError::engine(&error))
        })
        .await?;
    answer(&applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_limits_given_change_the_janitor_s_defaults() {
        let request: CleanupRequest =
            serde_json::from_str(r#"{"retentionDays": 0, "minimumAgeMinutes": 5}"#)
                .expect("request");
        assert_eq!(
            retention(&request),
            Retention {
                retention_days: 0,
                minimum_rollback_deployments: 2,
                minimum_age_minutes: 5,
            }
        );
        assert!(serde_json::from_str::<CleanupRequest>(r#"{"retention": 1}"#).is_err());
    }
}
