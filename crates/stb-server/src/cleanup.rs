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

/// The janitor's limit flags, as given (its defaults otherwise).
fn limit_args(request: &CleanupRequest) -> Vec<String> {
    let mut args = vec!["janitor".to_owned()];
    let limits = [
        ("--retention-days", request.retention_days),
        (
            "--minimum-rollback-deployments",
            request.minimum_rollback_deployments,
        ),
        ("--minimum-age-minutes", request.minimum_age_minutes),
    ];
    for (flag, value) in limits {
        if let Some(value) = value {
            args.push(flag.to_owned());
            args.push(value.to_string());
        }
    }
    args
}

/// The ids of the deployments a janitor answer would delete, sorted.
fn deletable(answer: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> = answer["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["delete"] == true)
        .filter_map(|c| c["deployment_id"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
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
    let args = limit_args(&request);
    let preview = state.launcher.json(args.clone()).await?;
    if !request.apply {
        return Ok(Json(preview));
    }
    let Some(mut confirmed) = request.confirm_deployments else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "apply needs confirmDeployments: the deployment ids the preview (apply: false) listed as deletable",
        ));
    };
    confirmed.sort();
    let now = deletable(&preview);
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
        return Ok(Json(preview));
    }
    let mut apply = args;
    apply.extend(["--apply".to_owned(), "--auto-approve".to_owned()]);
    Ok(Json(state.launcher.json(apply).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_limits_given_reach_the_janitor() {
        let request: CleanupRequest =
            serde_json::from_str(r#"{"retentionDays": 0, "minimumAgeMinutes": 5}"#)
                .expect("request");
        assert_eq!(
            limit_args(&request),
            [
                "janitor",
                "--retention-days",
                "0",
                "--minimum-age-minutes",
                "5"
            ]
        );
        assert!(serde_json::from_str::<CleanupRequest>(r#"{"retention": 1}"#).is_err());
    }

    #[test]
    fn the_deletable_set_is_the_candidates_marked_delete() {
        let answer = serde_json::json!({"candidates": [
            {"deployment_id": "b", "delete": true},
            {"deployment_id": "c", "delete": false},
            {"deployment_id": "a", "delete": true},
        ]});
        assert_eq!(deletable(&answer), ["a", "b"]);
        assert!(deletable(&serde_json::json!({})).is_empty());
    }
}
