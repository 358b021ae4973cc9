//! Tests and audits from the API: run one check, run named audits, the latest status of
//! every check. They run in this process through the engine (they only read the
//! warehouse, so they take no lock) and are recorded as `test` / `audit` runs with the
//! trigger `dev_server`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::{AppState, Compilation};

type Shared = State<Arc<AppState>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckRequest {
    /// `audit` or `test`.
    kind: String,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditsRequest {
    names: Vec<String>,
}

fn unknown(kind: &str, name: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        format!("the project has no {kind} named '{name}'"),
    )
}

/// The project's audit `name`, or 400.
fn audit<'a>(compilation: &'a Compilation, name: &str) -> Result<&'a stb_compile::Audit, ApiError> {
    compilation
        .compiled
        .audits
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| unknown("audit", name))
}

/// Allows `permission` on the pipelines owning `models`, or at project scope when a check
/// reads no model (the handlers prechecked the caller before reading the body).
async fn authorize_models(
    state: &AppState,
    principal: &Principal,
    permission: &str,
    models: BTreeSet<String>,
) -> Result<(), ApiError> {
    if models.is_empty() {
        return crate::work::authorize_in(
            state,
            principal,
            permission,
            crate::authz::Scope::Project,
        )
        .await;
    }
    let (direct, staged) = crate::work::pipelines_of(state, models)?;
    let pipelines: Vec<String> = direct.into_iter().chain(staged).collect();
    crate::work::authorize_in(
        state,
        principal,
        permission,
        crate::authz::Scope::Pipelines(&pipelines),
    )
    .await
}

/// Records a check run from the API (trigger `dev_server`); its invocation id.
fn record(
    client: &stb_warehouse::Client,
    database: &str,
    compilation: &Compilation,
    command: &str,
    passed: bool,
    records: &[stb_warehouse::records::NodeResult<'_>],
    started: std::time::SystemTime,
) -> Result<String, ApiError> {
    stb_engine::quality::record_run(
        client,
        database,
        &compilation.project,
        &stb_engine::quality::RecordedRun {
            command,
            trigger: "dev_server",
            deployment_id: None,
        },
        passed,
        records,
        started,
    )
    .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.message))
}

/// Runs `names`' audits (all known) and records them; their results.
async fn run_audits(
    state: &AppState,
    compilation: Arc<Compilation>,
    names: Vec<String>,
) -> Result<serde_json::Value, ApiError> {
    let database = state.database.clone();
    state
        .warehouse
        .read(move |client| {
            let started = std::time::SystemTime::now();
            let compiled = &compilation.compiled;
            let chosen: Vec<&stb_compile::Audit> = compiled
                .audits
                .iter()
                .filter(|a| names.contains(&a.name))
                .collect();
            let (results, _) = stb_engine::audits::run_set(client, &database, compiled, &chosen)
                .map_err(|e| ApiError::engine(&e))?;
            let records: Vec<_> = results
                .iter()
                .map(stb_engine::audits::AuditResult::node_result)
                .collect();
            let passed = !results
                .iter()
                .any(stb_engine::audits::AuditResult::is_error);
            let invocation = record(
                client,
                &database,
                &compilation,
                "audit",
                passed,
                &records,
                started,
            )?;
            Ok(serde_json::json!({"invocationId": invocation, "results": results}))
        })
        .await
}

/// Runs test `name` and records it.
async fn run_test(
    state: &AppState,
    compilation: Arc<Compilation>,
    name: String,
) -> Result<serde_json::Value, ApiError> {
    let database = state.database.clone();
    state
        .warehouse
        .read(move |client| {
            let started = std::time::SystemTime::now();
            let chosen: Vec<&stb_compile::SqlTest> = compilation
                .compiled
                .tests
                .iter()
                .filter(|t| t.name == name)
                .collect();
            let (results, _) = stb_engine::sql_tests::run_set(client, &chosen);
            let records: Vec<_> = results
                .iter()
                .map(stb_engine::sql_tests::TestResult::node_result)
                .collect();
            let passed = results.iter().all(|r| r.status == "passed");
            let invocation = record(
                client,
                &database,
                &compilation,
                "test",
                passed,
                &records,
                started,
            )?;
            Ok(serde_json::json!({"invocationId": invocation, "results": results}))
        })
        .await
}

/// `POST /api/checks/run`: one test (`quality.test.run`) or audit (`quality.audit.run`),
/// authorised on the pipelines owning the models it reads.
pub(crate) async fn run_check(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    if let Err(refused) = crate::work::precheck(&state, &principal, "quality.audit.run").await {
        crate::work::precheck(&state, &principal, "quality.test.run")
            .await
            .map_err(|_| refused)?;
    }
    let request: CheckRequest = crate::error::json_body(&bytes)?;
    let compilation = state.compilation()?;
    match request.kind.as_str() {
        "audit" => {
            let models = audit(&compilation, &request.name)?
                .models
                .iter()
                .cloned()
                .collect();
            authorize_models(&state, &principal, "quality.audit.run", models).await?;
            let names = vec![request.name];
            Ok(Json(
                run_audits(&state, Arc::clone(&compilation), names).await?,
            ))
        }
        "test" => {
            let test = compilation
                .compiled
                .tests
                .iter()
                .find(|t| t.name == request.name)
                .ok_or_else(|| unknown("test", &request.name))?;
            let models = test.targets.iter().cloned().collect();
            authorize_models(&state, &principal, "quality.test.run", models).await?;
            Ok(Json(
                run_test(&state, Arc::clone(&compilation), request.name).await?,
            ))
        }
        other => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("kind must be audit or test, not '{other}'"),
        )),
    }
}

/// `POST /api/audits/run`: the named audits, `quality.audit.run` on every pipeline they
/// read.
pub(crate) async fn run_named_audits(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    bytes: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    crate::work::precheck(&state, &principal, "quality.audit.run").await?;
    let request: AuditsRequest = crate::error::json_body(&bytes)?;
    if request.names.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "names must list at least one audit",
        ));
    }
    let compilation = state.compilation()?;
    let mut models = BTreeSet::new();
    for name in &request.names {
        models.extend(audit(&compilation, name)?.models.iter().cloned());
    }
    authorize_models(&state, &principal, "quality.audit.run", models).await?;
    Ok(Json(
        run_audits(&state, Arc::clone(&compilation), request.names).await?,
    ))
}

/// `GET /api/checks/status`: every test's and audit's newest recorded result
/// (`never_run` when none).
pub(crate) async fn checks_status(
    State(state): Shared,
) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    let database = state.database.clone();
    let target = state.target_name.clone();
    let checks = state
        .warehouse
        .read(move |client| {
            let compiled = &compilation.compiled;
            let names: Vec<(&str, &str)> = compiled
                .tests
                .iter()
                .map(|t| ("test", t.name.as_str()))
                .chain(compiled.audits.iter().map(|a| ("audit", a.name.as_str())))
                .collect();
            stb_engine::quality::latest(client, &database, &target, &names)
                .map_err(|e| ApiError::engine(&stb_engine::EngineError::from(&e)))
        })
        .await?;
    Ok(Json(serde_json::json!({"checks": checks})))
}

#[derive(Debug, Deserialize)]
pub(crate) struct HistoryQuery {
    kind: String,
    name: String,
    limit: Option<usize>,
}

/// `GET /api/checks/history?kind=audit&name=N&limit=50`: one check's recorded results,
/// newest first (at most 500).
pub(crate) async fn checks_history(
    State(state): Shared,
    axum::extract::Query(query): axum::extract::Query<HistoryQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !matches!(query.kind.as_str(), "audit" | "test") {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "kind must be audit or test",
        ));
    }
    let database = state.database.clone();
    let target = state.target_name.clone();
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let (kind, name) = (query.kind, query.name);
    let results = state
        .warehouse
        .read(move |client| {
            stb_engine::quality::history(client, &database, &target, &kind, &name, limit)
                .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.message))
        })
        .await?;
    Ok(Json(serde_json::json!({"results": results})))
}
