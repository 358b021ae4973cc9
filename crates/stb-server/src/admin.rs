//! User administration under `/api/admin`, for system admins only: accounts, their
//! passwords and system roles, project-role assignments and the audit log. Every change
//! goes through the control store's rules (the last admin, one active assignment per
//! scope, the password policy) and is audited with the admin as its actor.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use stb_control::{
    Account, Assignment, AuditEntry, ErrorKind, NewUser, ProfileChange, Source, StoreError,
};

use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, Body};

type Shared = State<Arc<AppState>>;
type Answer = Result<Json<serde_json::Value>, ApiError>;

/// 403 for anyone but a system admin, in the shape the UI mirrors.
pub(crate) fn require_admin(principal: &Principal) -> Result<(), ApiError> {
    if principal.is_admin() {
        return Ok(());
    }
    Err(ApiError {
        status: StatusCode::FORBIDDEN,
        detail: serde_json::json!({
            "message": "This action requires a StreamBuild system administrator",
            "reason": "system_admin_required",
            "permission": "account.manage",
        }),
    })
}

fn store_error(error: StoreError) -> ApiError {
    let status = match error.kind {
        ErrorKind::Validation => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict | ErrorKind::Policy => StatusCode::CONFLICT,
        ErrorKind::Unavailable | ErrorKind::Incompatible => StatusCode::SERVICE_UNAVAILABLE,
    };
    ApiError::new(status, error.message)
}

/// An instant as the API shows it: ISO 8601, UTC, milliseconds (`2026-12-03T13:00:00.000Z`).
fn iso(unix_ms: i64) -> String {
    format!(
        "{}Z",
        stb_plan::deployment::utc_text(unix_ms).replacen(' ', "T", 1)
    )
}

/// An account in the reference's names: `{id, username, displayName, email, active,
/// roles[], authenticationSources[], createdAt, updatedAt}`.
fn account_view(account: &Account) -> serde_json::Value {
    let user = &account.user;
    serde_json::json!({
        "id": user.id,
        "username": user.username,
        "displayName": user.display_name,
        "email": user.email,
        "active": user.is_active,
        "roles": user.roles,
        "authenticationSources": account.authentication_sources,
        "createdAt": iso(user.created_at_ms),
        "updatedAt": iso(account.updated_at_ms),
    })
}

/// A project-role assignment: `{assignmentId, userId, projectName, role, targetName,
/// assignedBy, assignedAt, revokedBy, revokedAt}`.
fn assignment_view(assignment: &Assignment) -> serde_json::Value {
    serde_json::json!({
        "assignmentId": assignment.id,
        "userId": assignment.user_id,
        "projectName": assignment.project_name,
        "role": assignment.role_name,
        "targetName": assignment.target_name,
        "assignedBy": assignment.assigned_by,
        "assignedAt": iso(assignment.assigned_at_ms),
        "revokedBy": assignment.revoked_by,
        "revokedAt": assignment.revoked_at_ms.map(iso),
    })
}

/// One line of the audit log: `{id, operation, actorUserId, affectedUserId, occurredAt,
/// details}`.
fn audit_view(entry: &AuditEntry) -> serde_json::Value {
    serde_json::json!({
        "id": entry.id,
        "operation": entry.operation,
        "actorUserId": entry.actor_user_id,
        "affectedUserId": entry.affected_user_id,
        "occurredAt": iso(entry.occurred_at_ms),
        "details": entry.details,
    })
}

/// Account `id` as the API shows it, after a change.
async fn account_answer(state: &AppState, id: &str) -> Answer {
    let accounts = state.store.list_accounts().await.map_err(store_error)?;
    accounts
        .iter()
        .find(|a| a.user.id == id)
        .map(|a| Json(account_view(a)))
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no user with id '{id}'")))
}

/// The username of user `id`, or 404.
async fn username_of(state: &AppState, id: &str) -> Result<String, ApiError> {
    state
        .store
        .user_by_id(id)
        .await
        .map_err(store_error)?
        .map(|user| user.username)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no user with id '{id}'")))
}

pub(crate) async fn users(State(state): Shared, Extension(me): Extension<Principal>) -> Answer {
    require_admin(&me)?;
    let accounts = state.store.list_accounts().await.map_err(store_error)?;
    Ok(Json(serde_json::Value::Array(
        accounts.iter().map(account_view).collect(),
    )))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateUser {
    username: String,
    display_name: Option<String>,
    email: Option<String>,
    authentication_source: String,
    password: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
}

pub(crate) async fn create_user(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Body(body): Body<CreateUser>,
) -> Answer {
    require_admin(&me)?;
    let source = match (body.authentication_source.as_str(), body.password) {
        ("password", Some(password)) => Source::Password(password),
        ("password", None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a password account needs a password",
            ));
        }
        ("trusted_proxy", None) => Source::TrustedProxy,
        ("trusted_proxy", Some(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a trusted-proxy account has no password",
            ));
        }
        (other, _) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("unknown authentication source '{other}': password or trusted_proxy"),
            ));
        }
    };
    let user = state
        .store
        .create_user(
            &NewUser {
                username: body.username,
                display_name: body.display_name,
                email: body.email,
                source,
                roles: body.roles,
            },
            Some(&me.id),
        )
        .await
        .map_err(store_error)?;
    account_answer(&state, &user.id).await
}

/// A field that is absent (unchanged), `null` (cleared) or a value.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateUser {
    #[serde(default, deserialize_with = "present")]
    display_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    email: Option<Option<String>>,
    active: Option<bool>,
}

pub(crate) async fn update_user(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Body(body): Body<UpdateUser>,
) -> Answer {
    require_admin(&me)?;
    let change = ProfileChange {
        display_name: body.display_name,
        email: body.email,
        active: body.active,
    };
    let user = state
        .store
        .update_profile(&id, &change, Some(&me.id))
        .await
        .map_err(store_error)?;
    account_answer(&state, &user.id).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PasswordBody {
    password: String,
}

pub(crate) async fn set_password(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Body(body): Body<PasswordBody>,
) -> Answer {
    require_admin(&me)?;
    let username = username_of(&state, &id).await?;
    state
        .store
        .reset_password(&username, &body.password, Some(&me.id))
        .await
        .map_err(store_error)?;
    Ok(Json(serde_json::json!({"status": "ok"})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RoleBody {
    role: String,
}

pub(crate) async fn grant_role(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Body(body): Body<RoleBody>,
) -> Answer {
    require_admin(&me)?;
    let username = username_of(&state, &id).await?;
    let user = state
        .store
        .grant_role(&username, &body.role, Some(&me.id))
        .await
        .map_err(store_error)?;
    account_answer(&state, &user.id).await
}

pub(crate) async fn revoke_role(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path((id, role)): Path<(String, String)>,
) -> Answer {
    require_admin(&me)?;
    let username = username_of(&state, &id).await?;
    let user = state
        .store
        .revoke_role(&username, &role, Some(&me.id))
        .await
        .map_err(store_error)?;
    account_answer(&state, &user.id).await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AssignmentQuery {
    project: Option<String>,
    #[serde(default)]
    include_revoked: bool,
}

pub(crate) async fn project_roles(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Query(query): Query<AssignmentQuery>,
) -> Answer {
    require_admin(&me)?;
    username_of(&state, &id).await?;
    let found = state
        .store
        .assignments_of(&id, query.project.as_deref(), query.include_revoked)
        .await
        .map_err(store_error)?;
    Ok(Json(serde_json::Value::Array(
        found.iter().map(assignment_view).collect(),
    )))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AssignmentBody {
    project_name: String,
    role: String,
    target_name: Option<String>,
}

pub(crate) async fn grant_project_role(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(id): Path<String>,
    Body(body): Body<AssignmentBody>,
) -> Answer {
    require_admin(&me)?;
    username_of(&state, &id).await?;
    let blank = |v: &str| v.trim().is_empty();
    if blank(&body.project_name)
        || blank(&body.role)
        || body.project_name.len() > 256
        || body.role.len() > 128
        || body
            .target_name
            .as_deref()
            .is_some_and(|t| blank(t) || t.len() > 128)
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "projectName (at most 256), role (at most 128) and targetName (at most 128, or null for every target) must not be blank",
        ));
    }
    let assignment = state
        .store
        .grant_project_role(
            &id,
            &body.project_name,
            &body.role,
            body.target_name.as_deref(),
            Some(&me.id),
        )
        .await
        .map_err(store_error)?;
    Ok(Json(assignment_view(&assignment)))
}

pub(crate) async fn revoke_project_role(
    State(state): Shared,
    Extension(me): Extension<Principal>,
    Path(assignment_id): Path<String>,
) -> Answer {
    require_admin(&me)?;
    let revoked = state
        .store
        .revoke_project_role(&assignment_id, Some(&me.id))
        .await
        .map_err(store_error)?;
    // The soft-revoked assignment, as the reference answers it.
    Ok(Json(assignment_view(&revoked)))
}

pub(crate) async fn audit(State(state): Shared, Extension(me): Extension<Principal>) -> Answer {
    require_admin(&me)?;
    let entries = state.store.audit_log(500).await.map_err(store_error)?;
    Ok(Json(serde_json::Value::Array(
        entries.iter().map(audit_view).collect(),
    )))
}
