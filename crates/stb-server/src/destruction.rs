//! Destruction from the API, with the same safety as `stb destroy` / `stb reset-target`
//! at a terminal and two gates of its own: a plan is made against the live warehouse and
//! frozen in the control store, bound to the admin who made it (valid 15 minutes, other
//! callers are told there is no such plan); it is reviewed (the server plans again and
//! refuses drift); it is executed once, with the challenges typed exactly, in the
//! background as a recorded `destructive` run whose drops the engine re-plans under the
//! target lock. Every step re-reads the caller from the control store: only an active,
//! persisted system admin may (in `disabled` mode, the local administrator), and the
//! project permission (`pipeline.destroy`, `target.reset`) is checked as well.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use stb_control::{PLAN_TTL_MS, PlanLookup, StoredPlan};
use stb_engine::destruction::{DestructionPlan, Operation};

use crate::auth::{AuthMode, Principal};
use crate::error::ApiError;
use crate::{AppState, Compilation};

type Shared = State<Arc<AppState>>;

/// The caller, re-read from the control store: an active system admin, or 403
/// `system_admin_required`.
async fn persisted_admin(state: &AppState, principal: &Principal) -> Result<(), ApiError> {
    let refused = || ApiError {
        status: StatusCode::FORBIDDEN,
        detail: serde_json::json!({
            "message": "Destruction requires an active system admin",
            "reason": "system_admin_required",
        }),
    };
    if state.auth.mode == AuthMode::Disabled {
        return if principal.is_admin() {
            Ok(())
        } else {
            Err(refused())
        };
    }
    let user = state
        .store
        .user_by_id(&principal.id)
        .await
        .map_err(|e| ApiError::service_unavailable(e.message))?;
    match user {
        Some(user) if user.is_admin() => Ok(()),
        _ => Err(refused()),
    }
}

/// The permission of `operation` on what it affects (every handler has re-read the caller
/// as an admin first).
async fn authorize(
    state: &AppState,
    principal: &Principal,
    operation: Operation,
    pipelines: &[String],
) -> Result<(), ApiError> {
    match operation {
        Operation::DestroyPipelines => {
            crate::work::authorize_in(
                state,
                principal,
                "pipeline.destroy",
                crate::authz::Scope::Pipelines(pipelines),
            )
            .await
        }
        Operation::ResetTarget => {
            crate::work::authorize_in(
                state,
                principal,
                "target.reset",
                crate::authz::Scope::Target,
            )
            .await
        }
    }
}

/// What a plan was asked for; frozen with it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PlanRequest {
    operation: Operation,
    #[serde(default)]
    pipeline_names: Vec<String>,
    #[serde(default)]
    included_dependent_pipeline_names: Vec<String>,
}

impl PlanRequest {
    fn pipelines(&self) -> Vec<String> {
        let all: BTreeSet<&String> = self
            .pipeline_names
            .iter()
            .chain(&self.included_dependent_pipeline_names)
            .collect();
        all.into_iter().cloned().collect()
    }
}

/// Plans `request` against the live warehouse (blocking).
fn plan_now(
    client: &stb_warehouse::Client,
    database: &str,
    compilation: &Compilation,
    request: &PlanRequest,
) -> Result<DestructionPlan, stb_engine::EngineError> {
    let pipelines = request.pipelines();
    let engine_request = stb_engine::destruction::Request {
        operation: request.operation,
        pipelines: &pipelines,
        include_orphans: false,
        production: compilation.project.production,
        max_table_size_to_drop: compilation.project.max_table_size_to_drop,
    };
    stb_engine::destruction::read(client, database).and_then(|live| {
        stb_engine::destruction::plan(
            &compilation.project,
            &compilation.compiled,
            &engine_request,
            &live,
        )
    })
}

/// The plan as the API shows it.
fn view(stored: &StoredPlan) -> serde_json::Value {
    let plan = &stored.payload["plan"];
    let request = &stored.payload["request"];
    serde_json::json!({
        "planId": stored.plan_id,
        "planFingerprint": plan["fingerprint"],
        "operation": plan["operation"],
        "target": plan["target"],
        "database": plan["database"],
        "selectedPipelines": request["pipelineNames"],
        "includedDependentPipelines": request["includedDependentPipelineNames"],
        "affectedPipelines": plan["pipelines"],
        "requiredDependentPipelines": [],
        "blocked": false,
        "resources": plan["relations"],
        "estimatedRows": plan["total_rows"],
        "estimatedBytes": plan["total_bytes"],
        "dropSizeLimitBytes": plan["max_table_size_to_drop"],
        "challengeValues": plan["challenges"],
        "createdAtMs": stored.created_at_ms,
        "expiresAtMs": stored.expires_at_ms,
        "reviewedAtMs": stored.reviewed_at_ms,
    })
}

fn store_error(error: &stb_control::StoreError) -> ApiError {
    let status = match error.kind {
        stb_control::ErrorKind::Conflict => StatusCode::CONFLICT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    ApiError::new(status, error.message.clone())
}

/// A lookup that is not the plan: 404, or 410 once expired.
fn not_found(lookup: &PlanLookup) -> ApiError {
    match lookup {
        PlanLookup::Expired => ApiError::new(
            StatusCode::GONE,
            "the destruction plan expired (plans live 15 minutes); make a new one",
        ),
        PlanLookup::NotReviewed => {
            ApiError::new(StatusCode::CONFLICT, "review the plan before executing it")
        }
        _ => ApiError::new(StatusCode::NOT_FOUND, "no such destruction plan"),
    }
}

/// `POST /api/destruction/plans`: plan against the live warehouse and keep the plan. A
/// pipeline left out that reads a selected one blocks it: the answer lists them
/// (`blocked: true`) and nothing is kept until they are included.
pub(crate) async fn create(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    persisted_admin(&state, &principal).await?;
    let request: PlanRequest = crate::error::json_body(&bytes)?;
    let compilation = state.compilation()?;
    let selected = request.pipelines();
    let keys: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    if request.operation == Operation::DestroyPipelines {
        let required: Vec<&str> =
            stb_engine::destruction::readers_left_out(&compilation.compiled, &keys)
                .into_keys()
                .collect();
        if !required.is_empty() {
            authorize(&state, &principal, request.operation, &selected).await?;
            return Ok(Json(serde_json::json!({
                "blocked": true,
                "operation": request.operation,
                "selectedPipelines": request.pipeline_names,
                "includedDependentPipelines": request.included_dependent_pipeline_names,
                "requiredDependentPipelines": required,
                "message": "pipelines left out read what would be destroyed: include them",
            })));
        }
    }
    let database = state.database.clone();
    let planning = Arc::clone(&compilation);
    let frozen = request.clone();
    let plan = state
        .warehouse
        .read(move |client| {
            plan_now(client, &database, &planning, &frozen).map_err(|e| ApiError::engine(&e))
        })
        .await?;
    authorize(&state, &principal, request.operation, &plan.pipelines).await?;
    let payload = serde_json::json!({"plan": plan, "request": request});
    let stored = state
        .store
        .save_destruction_plan(&principal.id, &payload, PLAN_TTL_MS)
        .await
        .map_err(|e| store_error(&e))?;
    Ok(Json(view(&stored)))
}

/// The caller's own plan `plan_id`.
async fn own(
    state: &AppState,
    principal: &Principal,
    plan_id: &str,
) -> Result<StoredPlan, ApiError> {
    match state
        .store
        .destruction_plan(plan_id, &principal.id)
        .await
        .map_err(|e| store_error(&e))?
    {
        PlanLookup::Found(plan) => Ok(plan),
        other => Err(not_found(&other)),
    }
}

fn frozen(stored: &StoredPlan) -> Result<(DestructionPlan, PlanRequest), ApiError> {
    let plan = serde_json::from_value(stored.payload["plan"].clone());
    let request = serde_json::from_value(stored.payload["request"].clone());
    match (plan, request) {
        (Ok(plan), Ok(request)) => Ok((plan, request)),
        _ => Err(ApiError::new(
            StatusCode::CONFLICT,
            "the stored plan was written by another version; make a new one",
        )),
    }
}

/// `GET /api/destruction/plans/{plan_id}`.
pub(crate) async fn show(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(plan_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    persisted_admin(&state, &principal).await?;
    Ok(Json(view(&own(&state, &principal, &plan_id).await?)))
}

/// `POST /api/destruction/plans/{plan_id}/review`: plans again now; the same plan marks it
/// reviewed, a different one (drift) is 409.
pub(crate) async fn review(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(plan_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    persisted_admin(&state, &principal).await?;
    let stored = own(&state, &principal, &plan_id).await?;
    let (plan, request) = frozen(&stored)?;
    if plan.database != state.database || plan.target != state.target_name {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the plan is for another target or database than this server's",
        ));
    }
    authorize(&state, &principal, plan.operation, &plan.pipelines).await?;
    let compilation = state.compilation()?;
    let database = state.database.clone();
    let again = state
        .warehouse
        .read(move |client| {
            plan_now(client, &database, &compilation, &request).map_err(|e| ApiError::engine(&e))
        })
        .await?;
    if again.fingerprint != plan.fingerprint {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the target changed since the plan was made: make a new plan and review that",
        ));
    }
    match state
        .store
        .review_destruction_plan(&plan_id, &principal.id)
        .await
        .map_err(|e| store_error(&e))?
    {
        PlanLookup::Found(reviewed) => Ok(Json(view(&reviewed))),
        other => Err(not_found(&other)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteRequest {
    responses: Vec<String>,
}

/// `POST /api/destruction/plans/{plan_id}/execute`: `{responses}` exactly the challenges,
/// in order (not trimmed, case kept). 202 with the run's id: the drops run in the
/// background as a recorded run (`/api/runs/{id}`), re-planned under the target lock.
pub(crate) async fn execute(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(plan_id): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Response, ApiError> {
    persisted_admin(&state, &principal).await?;
    let body: ExecuteRequest = crate::error::json_body(&bytes)?;
    let stored = own(&state, &principal, &plan_id).await?;
    if stored.status != "reviewed" {
        return Err(not_found(&PlanLookup::NotReviewed));
    }
    let (plan, request) = frozen(&stored)?;
    if body.responses != plan.challenges {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the responses are not the plan's challenges, typed exactly and in order",
        ));
    }
    authorize(&state, &principal, plan.operation, &plan.pipelines).await?;
    if !state.warehouse.snapshot().connected {
        return Err(ApiError::service_unavailable("no warehouse connection"));
    }
    let compilation = state.compilation()?;
    match state
        .store
        .consume_destruction_plan(&plan_id, &principal.id)
        .await
        .map_err(|e| store_error(&e))?
    {
        PlanLookup::Found(_) => {}
        other => return Err(not_found(&other)),
    }
    let invocation_id = uuid::Uuid::new_v4().to_string();
    let run_id = invocation_id.clone();
    let background = Arc::clone(&state);
    tokio::task::spawn_blocking(move || {
        // Failures after this point are the run's: they are in its records, not here.
        if let Ok(client) = background.warehouse.connect_blocking() {
            let client = Arc::new(client);
            let database = background.database.clone();
            let replan = || plan_now(&client, &database, &compilation, &request);
            let invocation = stb_engine::destruction::Invocation {
                invocation_id: &run_id,
                project: &compilation.project,
                started_at_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis()),
                clock: std::time::Instant::now(),
            };
            let _ = stb_engine::destruction::run(&client, &plan, &replan, &invocation);
        }
        background.snapshots.invalidate();
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"invocationId": invocation_id, "status": "starting"})),
    )
        .into_response())
}

/// `GET /api/destruction/pipelines/inactive`: pipelines the target's manifests record that
/// the project no longer has (what `stb destroy` can still remove).
pub(crate) async fn inactive(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
) -> Result<Json<serde_json::Value>, ApiError> {
    persisted_admin(&state, &principal).await?;
    let compilation = state.compilation()?;
    let database = state.database.clone();
    let pipelines = state
        .warehouse
        .read(move |client| {
            let live = stb_engine::destruction::read(client, &database)
                .map_err(|e| ApiError::engine(&e))?;
            let current: BTreeSet<&str> = compilation
                .project
                .pipelines
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            let mut inactive: Vec<serde_json::Value> = Vec::new();
            let mut seen = BTreeSet::new();
            // Manifests newest first: the first that lists a pipeline is its latest.
            for manifest in &live.manifests {
                for name in live.manifest_pipelines.get(manifest).into_iter().flatten() {
                    if !current.contains(name.as_str()) && seen.insert(name.clone()) {
                        let resources = live
                            .resources
                            .iter()
                            .filter(|r| &r.pipeline == name)
                            .map(|r| r.relation.as_str())
                            .collect::<BTreeSet<_>>()
                            .len();
                        inactive.push(serde_json::json!({
                            "name": name,
                            "lastManifest": manifest,
                            "resourceCount": resources,
                        }));
                    }
                }
            }
            Ok(inactive)
        })
        .await?;
    Ok(Json(serde_json::json!({"pipelines": pipelines})))
}
