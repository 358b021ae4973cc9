//! The API routes and the authentication layer in front of them.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;

use crate::AppState;
use crate::auth::{
    self, AuthMode, Principal, SESSION_COOKIE, authenticate, check_csrf, cleared_cookie,
    session_cookie,
};
use crate::error::ApiError;

type Shared = State<Arc<AppState>>;

/// Where a request came from (the TCP peer), for login throttling.
#[derive(Debug, Clone)]
pub(crate) struct Peer(pub(crate) String);

pub(crate) fn api() -> Router<Arc<AppState>> {
    let public = Router::new()
        .route("/api/auth/config", get(auth_config))
        .route("/api/auth/login", post(login));
    let authenticated = Router::new()
        .route("/api/auth/me", get(me))
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/capabilities", get(capabilities))
        .route("/api/access-policy", get(access_policy))
        .route("/api/bootstrap", get(bootstrap))
        .route("/api/openapi.json", get(openapi))
        .route("/api/status", get(status))
        .route("/api/state", get(warehouse_state))
        .route("/api/warehouse/refresh", post(refresh_warehouse))
        .route("/api/reload", post(crate::work::reload))
        .route("/api/definitions", get(definitions))
        .route("/api/lineage/columns/{model}/{column}", get(column_lineage))
        .route("/api/models/{name}", get(crate::models::model))
        .route("/api/runs", get(runs))
        .route("/api/runs/{invocation_id}", get(run))
        .route("/api/runs/{invocation_id}/events", get(crate::work::feed))
        .route(
            "/api/runs/{invocation_id}/statements/{sequence}",
            get(statement),
        )
        .route(
            "/api/runs/{invocation_id}/cancel",
            post(crate::work::cancel),
        )
        .route("/api/checks/run", post(crate::quality::run_check))
        .route("/api/checks/status", get(crate::quality::checks_status))
        .route("/api/checks/history", get(crate::quality::checks_history))
        .route("/api/audits/run", post(crate::quality::run_named_audits))
        .route("/api/audit-scheduler", get(crate::scheduler::health))
        .route("/api/sensors", get(crate::sensors::list))
        .route(
            "/api/sensors/dead-letters",
            get(crate::sensors::dead_letters),
        )
        .route(
            "/api/sensors/dead-letters/retry",
            post(crate::sensors::retry),
        )
        .route("/api/sensors/dead-letters/skip", post(crate::sensors::skip))
        .route("/api/sensors/{name}/ticks", get(crate::sensors::ticks))
        .route(
            "/api/sensors/{name}/status",
            post(crate::sensors::set_status),
        )
        .route("/api/topics", get(crate::sources::topics))
        .route(
            "/api/sources/{name}/messages",
            post(crate::sources::messages),
        )
        .route(
            "/api/sources/{name}/messages/record",
            post(crate::sources::record),
        )
        .route(
            "/api/sources/{name}/messages/facets",
            post(crate::sources::facets),
        )
        .route(
            "/api/destruction/pipelines/inactive",
            get(crate::destruction::inactive),
        )
        .route("/api/destruction/plans", post(crate::destruction::create))
        .route(
            "/api/destruction/plans/{plan_id}",
            get(crate::destruction::show),
        )
        .route(
            "/api/destruction/plans/{plan_id}/review",
            post(crate::destruction::review),
        )
        .route(
            "/api/destruction/plans/{plan_id}/execute",
            post(crate::destruction::execute),
        )
        .route("/api/plan", get(crate::work::plan))
        .route("/api/build", post(crate::work::build))
        .route("/api/build/current", get(crate::work::current_build))
        .route("/api/deployments", get(crate::work::deployments))
        .route("/api/deployments/cleanup", post(crate::cleanup::cleanup))
        .route(
            "/api/deployments/{deployment_id}",
            get(crate::work::deployment),
        )
        .route(
            "/api/deployments/{deployment_id}/diff",
            get(crate::work::diff),
        )
        .route(
            "/api/deployments/{deployment_id}/promote",
            post(crate::work::promote),
        )
        .route(
            "/api/deployments/{deployment_id}/rollback",
            post(crate::work::rollback),
        )
        .merge(admin_routes());
    // Identity is checked by `gate`, around the whole router (fallback included).
    public
        .merge(authenticated)
        .layer(axum::middleware::from_fn(peer_address))
}

/// The routes anyone may call, signed in or not.
const PUBLIC_ROUTES: [&str; 2] = ["/api/auth/config", "/api/auth/login"];

/// In front of the whole router: every `/api` request but the public ones needs an
/// identity before it is routed, so an anonymous caller gets the same 401 for a route
/// that exists and one that does not (and learns nothing of which do); a signed-in one
/// gets a JSON 404 for an unknown route. Unsafe methods also carry the CSRF proof.
pub(crate) async fn gate(
    State(state): Shared,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let path = request.uri().path();
    let api = path
        .strip_prefix("/api")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if !api || PUBLIC_ROUTES.contains(&path) {
        return Ok(next.run(request).await);
    }
    let principal = authenticate(&state.auth, &state.store, request.headers()).await?;
    if auth::is_unsafe(request.method()) {
        check_csrf(state.auth.mode, &principal, request.headers())?;
    }
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

/// User administration: system admins only, checked before any body is read.
fn admin_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/admin/audit", get(crate::admin::audit))
        .route(
            "/api/admin/users",
            get(crate::admin::users).post(crate::admin::create_user),
        )
        .route(
            "/api/admin/users/{user_id}",
            axum::routing::patch(crate::admin::update_user),
        )
        .route(
            "/api/admin/users/{user_id}/password",
            post(crate::admin::set_password),
        )
        .route(
            "/api/admin/users/{user_id}/roles",
            post(crate::admin::grant_role),
        )
        .route(
            "/api/admin/users/{user_id}/roles/{role}",
            axum::routing::delete(crate::admin::revoke_role),
        )
        .route(
            "/api/admin/users/{user_id}/project-roles",
            get(crate::admin::project_roles).post(crate::admin::grant_project_role),
        )
        .route(
            "/api/admin/project-roles/{assignment_id}",
            axum::routing::delete(crate::admin::revoke_project_role),
        )
        .route_layer(axum::middleware::from_fn(admin_only))
}

async fn admin_only(request: Request, next: Next) -> Result<Response, ApiError> {
    match request.extensions().get::<Principal>() {
        Some(principal) => crate::admin::require_admin(principal)?,
        None => return Err(ApiError::unauthenticated("Not authenticated")),
    }
    Ok(next.run(request).await)
}

async fn peer_address(mut request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or_else(|| "unknown".to_owned(), |info| info.0.ip().to_string());
    request.extensions_mut().insert(Peer(peer));
    next.run(request).await
}

async fn auth_config(State(state): Shared) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "mode": state.auth.mode,
        "loginRequired": state.auth.mode == AuthMode::Password,
        "proxyLogoutUrl": state.auth.proxy_logout_url,
    }))
}

fn session_payload(state: &AppState, principal: &Principal) -> serde_json::Value {
    serde_json::json!({
        "mode": state.auth.mode,
        "user": principal,
        "roles": principal.roles,
        "csrfToken": principal.csrf_token,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    username: String,
    password: String,
}

async fn login(
    State(state): Shared,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    crate::error::Body(body): crate::error::Body<Login>,
) -> Result<Response, ApiError> {
    if state.auth.mode != AuthMode::Password {
        return Err(ApiError::not_found());
    }
    let invalid = || ApiError::unauthenticated("Invalid username or password");
    let too_many = || {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many login attempts; try again later",
        )
    };
    let allowed = state
        .throttle
        .lock()
        .map(|mut t| t.allows(&body.username, &peer.0, Instant::now()))
        .unwrap_or(false);
    if !allowed {
        return Err(too_many());
    }
    if body.username.is_empty()
        || body.username.chars().count() > 128
        || body.password.is_empty()
        || body.password.chars().count() > stb_control::MAX_PASSWORD_LENGTH
    {
        if let Ok(mut throttle) = state.throttle.lock() {
            throttle.failed(&body.username, &peer.0, Instant::now());
        }
        return Err(invalid());
    }
    let verified = state
        .store
        .verify_password(&body.username, &body.password)
        .await
        .map_err(|e| ApiError::service_unavailable(e.message))?;
    let Some(user) = verified else {
        if let Ok(mut throttle) = state.throttle.lock() {
            throttle.failed(&body.username, &peer.0, Instant::now());
        }
        return Err(invalid());
    };
    if let Ok(mut throttle) = state.throttle.lock() {
        throttle.succeeded(&body.username);
    }
    // A session the browser already had is ended: signing in always starts a new one
    // (a planted cookie cannot become a signed-in session).
    if let Some(old) = auth::cookie(&headers, SESSION_COOKIE) {
        let _ = state.store.revoke_session(&old).await;
    }
    let ttl_ms =
        i64::try_from(state.auth.session_ttl_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let session = state
        .store
        .create_session(&user.id, ttl_ms)
        .await
        .map_err(|e| ApiError::service_unavailable(e.message))?;
    let principal = Principal {
        id: user.id.clone(),
        username: user.username.clone(),
        display_name: user.display_name.clone(),
        email: user.email.clone(),
        authentication_source: "password",
        roles: user.roles.clone(),
        csrf_token: Some(session.csrf_token.clone()),
        session_token: None,
    };
    let mut response = Json(session_payload(&state, &principal)).into_response();
    let cookie = HeaderValue::from_str(&session_cookie(&session.token, &state.auth))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

async fn me(State(state): Shared, Extension(principal): Extension<Principal>) -> Response {
    Json(session_payload(&state, &principal)).into_response()
}

async fn logout(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> Result<Response, ApiError> {
    if let Some(token) = &principal.session_token {
        state
            .store
            .revoke_session(token)
            .await
            .map_err(|e| ApiError::service_unavailable(e.message))?;
    }
    let mut response = Json(serde_json::json!({"status": "ok"})).into_response();
    if state.auth.mode == AuthMode::Password
        && let Ok(cookie) = HeaderValue::from_str(&cleared_cookie(&state.auth))
    {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

async fn capabilities(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> Result<Json<crate::authz::Capabilities>, ApiError> {
    let assigned: Vec<String> = if principal.is_admin() {
        Vec::new()
    } else {
        state
            .store
            .project_roles(&principal.id, &state.project_name, &state.target_name)
            .await
            .map_err(|e| ApiError::service_unavailable(e.message))?
            .into_iter()
            .map(|a| a.role_name)
            .collect()
    };
    Ok(Json(crate::authz::capabilities(
        principal.is_admin(),
        state.held().access.as_ref(),
        &assigned,
        &state.project_name,
        &state.target_name,
    )))
}

/// `GET /api/access-policy`: the held compile's `access.yml`.
async fn access_policy(State(state): Shared) -> Json<serde_json::Value> {
    let held = state.held();
    Json(match &held.access {
        Some(policy) => serde_json::json!({
            "present": true,
            "fingerprint": policy.fingerprint,
            "roles": policy.roles,
        }),
        None => serde_json::json!({"present": false, "fingerprint": null, "roles": []}),
    })
}

/// `GET /api/bootstrap`: what a page needs first, in one answer. The state is the held
/// snapshot only (never a warehouse read), `null` before one was taken.
async fn bootstrap(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Json(config) = auth_config(State(Arc::clone(&state))).await;
    let Json(capabilities) =
        capabilities(State(Arc::clone(&state)), Extension(principal.clone())).await?;
    let Json(status) = status(State(Arc::clone(&state))).await;
    let held = state.held();
    Ok(Json(serde_json::json!({
        "auth": {
            "config": config,
            "session": session_payload(&state, &principal),
            "capabilities": capabilities,
        },
        "status": status,
        "definitions": held.definitions.as_ref().map(|(_, body)| body),
        "state": state.snapshots.held().await,
    })))
}

/// The held compile's definitions; `If-None-Match` with its ETag answers 304. 409 while
/// the project has never compiled.
async fn definitions(State(state): Shared, headers: HeaderMap) -> Result<Response, ApiError> {
    let held = state.held();
    let Some((version, body)) = &held.definitions else {
        return Err(ApiError::compile_failing());
    };
    let etag = format!("\"{version}\"");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Json(body.clone()).into_response()
    };
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

/// `model.column` traced to its sources: `stb lineage <model>.<column> --json`'s document.
/// 404 for a model or column the held compile does not have.
async fn column_lineage(
    State(state): Shared,
    Path((model, column)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    // Reading every model on the way is CPU work: off the async workers.
    let traced = tokio::task::spawn_blocking(move || {
        stb_compile::column_lineage::trace(
            &compilation.project,
            &compilation.compiled,
            &model,
            &column,
        )
        .map(|traced| serde_json::to_value(traced).unwrap_or_default())
    })
    .await
    .map_err(|_| {
        ApiError::engine(&stb_engine::EngineError::new(
            stb_compile::column_lineage::TRACE_CODE,
            "tracing the column stopped",
            "try again; the server's log says why",
        ))
    })?
    .map_err(|e| {
        ApiError::engine(
            &stb_engine::EngineError::new(e.code, e.message, e.hint)
                .of_kind(stb_engine::ErrorKind::NotFound),
        )
    })?;
    Ok(Json(traced))
}

async fn status(State(state): Shared) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "toolVersion": env!("CARGO_PKG_VERSION"),
        "project": {
            "name": state.project_name,
            "target": state.target_name,
            "database": state.database,
        },
        "compile": state.held().compile,
        "warehouse": state.warehouse.snapshot(),
    }))
}

/// `GET /api/openapi.json`: the API's OpenAPI document, for signed-in callers only (the
/// reference serves it to anyone).
async fn openapi() -> Json<serde_json::Value> {
    Json(crate::inventory::openapi())
}

/// `GET /api/state`: the held snapshot (see [`crate::snapshot`]).
async fn warehouse_state(
    State(state): Shared,
) -> Result<Json<crate::snapshot::Snapshot>, ApiError> {
    crate::snapshot::current(&state).await.map(Json)
}

/// `POST /api/warehouse/refresh`: probe the warehouse now and throw the snapshot away; the
/// status payload. Any signed-in user: nothing in the warehouse changes.
async fn refresh_warehouse(State(state): Shared) -> Json<serde_json::Value> {
    state.warehouse.refresh().await;
    state.snapshots.invalidate();
    status(State(state)).await
}

#[derive(Deserialize)]
struct RunsQuery {
    limit: Option<usize>,
}

async fn runs(
    State(state): Shared,
    Query(query): Query<RunsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let database = state.database.clone();
    let windows = state.run_windows;
    let runs = state
        .warehouse
        .read(move |client| {
            stb_engine::runs::list(client, &database, limit, windows)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    Ok(Json(
        serde_json::json!({"database": state.database, "runs": runs}),
    ))
}

async fn run(
    State(state): Shared,
    Path(invocation_id): Path<String>,
) -> Result<Json<stb_engine::runs::RunDetail>, ApiError> {
    let database = state.database.clone();
    let windows = state.run_windows;
    let detail = state
        .warehouse
        .read(move |client| {
            stb_engine::runs::show(client, &database, &invocation_id, windows)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    Ok(Json(detail))
}

/// `GET /api/runs/{id}/statements/{sequence}`: the exact SQL a run's statement ran; 404
/// when the run did not record it.
async fn statement(
    State(state): Shared,
    Path((invocation_id, sequence)): Path<(String, u64)>,
) -> Result<Json<stb_warehouse::statements::RecordedStatement>, ApiError> {
    let database = state.database.clone();
    let found = state
        .warehouse
        .read(move |client| {
            stb_warehouse::statements::recorded(client, &database, &invocation_id, sequence)
                .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.message))
        })
        .await?;
    found
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "the run recorded no such statement"))
}
