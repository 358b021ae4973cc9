//! The routes that plan, build and promote, and the live feed of a run's events.
//!
//! Mutations are authorised on the pipelines the server derives itself: a build on the
//! plan it makes for the scope, a promotion on the deployment's own records. Everything
//! runs in this process, through the functions the commands call.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;

use crate::AppState;
use crate::auth::Principal;
use crate::error::ApiError;
use axum::response::IntoResponse;
use stb_engine::scope::Scope;

type Shared = State<Arc<AppState>>;

/// A deployment id from a path, trimmed; an empty one, or one that reads as a flag, is
/// refused (400).
fn value(name: &str, text: &str) -> Result<String, ApiError> {
    let text = text.trim();
    if text.is_empty() || text.starts_with('-') || text.contains('\0') {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid {name}: '{text}'"),
        ));
    }
    Ok(text.to_owned())
}

/// The 403 for a denied `permission`, in the shape the UI mirrors.
fn denied(state: &AppState, permission: &str, decision: &crate::authz::Decision) -> ApiError {
    let mut message = format!("Requires the {permission} permission");
    if !decision.missing_pipelines.is_empty() {
        message.push_str(&format!(" on {}", decision.missing_pipelines.join(", ")));
    }
    ApiError {
        status: StatusCode::FORBIDDEN,
        detail: serde_json::json!({
            "message": message,
            "permission": permission,
            "reason": decision.reason,
            "project": state.project_name,
            "target": state.target_name,
            "missingPipelines": decision.missing_pipelines,
        }),
    }
}

/// The project roles `principal` holds here (none for a system admin: not needed).
async fn assigned_roles(state: &AppState, principal: &Principal) -> Result<Vec<String>, ApiError> {
    if principal.is_admin() {
        return Ok(Vec::new());
    }
    Ok(state
        .store
        .project_roles(&principal.id, &state.project_name, &state.target_name)
        .await
        .map_err(|e| ApiError::service_unavailable(e.message))?
        .into_iter()
        .map(|a| a.role_name)
        .collect())
}

/// Refuses before any work when nothing could allow `principal` any of this project's
/// permissions (no policy, no assignment here, only stale roles), so such a request costs
/// no plan and no warehouse read. Anything else is decided on the derived pipelines, where
/// the refusal can name the ones missing.
pub(crate) async fn precheck(
    state: &AppState,
    principal: &Principal,
    permission: &str,
) -> Result<(), ApiError> {
    if principal.is_admin() {
        return Ok(());
    }
    let assigned = assigned_roles(state, principal).await?;
    let decision = crate::authz::decide(
        false,
        state.held().access.as_ref(),
        &assigned,
        permission,
        crate::authz::Scope::Project,
    );
    if matches!(
        decision.reason,
        "policy_absent" | "no_matching_assignment" | "stale_assignment"
    ) {
        return Err(denied(state, permission, &decision));
    }
    Ok(())
}

/// Allows `principal` `permission` on `pipelines` (derived by the server), or the 403.
async fn authorize(
    state: &AppState,
    principal: &Principal,
    permission: &str,
    pipelines: &[String],
) -> Result<(), ApiError> {
    authorize_in(
        state,
        principal,
        permission,
        crate::authz::Scope::Pipelines(pipelines),
    )
    .await
}

/// Allows `principal` `permission` in `scope`, or the 403.
pub(crate) async fn authorize_in(
    state: &AppState,
    principal: &Principal,
    permission: &str,
    scope: crate::authz::Scope<'_>,
) -> Result<(), ApiError> {
    let assigned = assigned_roles(state, principal).await?;
    let decision = crate::authz::decide(
        principal.is_admin(),
        state.held().access.as_ref(),
        &assigned,
        permission,
        scope,
    );
    if decision.allowed {
        Ok(())
    } else {
        Err(denied(state, permission, &decision))
    }
}

/// The pipelines of `models`, split into direct and virtual; a model the project does not
/// own is an unresolved scope (403).
pub(crate) fn pipelines_of(
    state: &AppState,
    models: impl IntoIterator<Item = String>,
) -> Result<(Vec<String>, Vec<String>), ApiError> {
    let held = state.held();
    let mut direct = std::collections::BTreeSet::new();
    let mut staged = std::collections::BTreeSet::new();
    for model in models {
        let Some((pipeline, is_virtual)) = held.model_pipelines.get(&model) else {
            return Err(ApiError {
                status: StatusCode::FORBIDDEN,
                detail: serde_json::json!({
                    "message": format!("cannot tell which pipeline owns '{model}'"),
                    "reason": "unresolved_scope",
                }),
            });
        };
        if *is_virtual {
            staged.insert(pipeline.clone());
        } else {
            direct.insert(pipeline.clone());
        }
    }
    Ok((direct.into_iter().collect(), staged.into_iter().collect()))
}

/// A start time from a request, read here and never again: one that does not read is
/// refused (400, `STB-PLAN-001`) before anything is planned.
fn start_time(text: Option<&str>) -> Result<Option<stb_plan::options::StartTime>, ApiError> {
    text.map(stb_plan::options::parse_start_time)
        .transpose()
        .map_err(|e| ApiError::engine(&stb_engine::EngineError::from(e)))
}

/// The scope `GET /api/plan` asks for: `select` (repeatable), `start`, `deployment`,
/// `changed=true`, `include_missing_upstream=true`, `full_refresh=true`. The spec's
/// `counts` is not read: a preview does not count the rows a replay would read.
fn query_scope(query: &Query) -> Result<Scope, ApiError> {
    Ok(Scope {
        select: query.all("select"),
        start_time: start_time(query.one("start").as_deref())?,
        deployment_id: query.one("deployment"),
        changed: query.flag("changed"),
        full_refresh: query.flag("full_refresh"),
        include_missing_upstream: query.flag("include_missing_upstream"),
    })
}

/// A request's query string, read once: its pairs, values trimmed.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(query.unwrap_or(""))
            .map(Self)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.trim().to_owned())
            .collect()
    }

    fn one(&self, key: &str) -> Option<String> {
        self.all(key).into_iter().next()
    }

    /// Whether `key=true` is there.
    fn flag(&self, key: &str) -> bool {
        self.one(key).is_some_and(|v| v == "true")
    }
}

/// `GET /api/plan?select=a&select=b&start=…&deployment=…&changed=true`: what a build of
/// that scope would do, as `stb plan --json` says it (read-only, planned in this process);
/// `statements=true` adds its statements (`statements`, `statementsTotal`).
pub(crate) async fn plan(
    State(state): Shared,
    RawQuery(query): RawQuery,
) -> Result<axum::response::Response, ApiError> {
    let query = Query::parse(query.as_deref())?;
    let previewed =
        crate::planning::preview(&state, query_scope(&query)?, query.flag("statements")).await?;
    // Asked for, the statements join the document (which is otherwise `stb plan --json`'s):
    // appended as its last members, without reading the document again.
    let body = match previewed.statements {
        Some((listed, total)) => {
            let mut body = previewed.json;
            if body.last() == Some(&b'}') {
                body.pop();
                let members = serde_json::to_vec(&serde_json::json!({
                    "statements": listed,
                    "statementsTotal": total,
                }))
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
                // `{"statements":…}` without its opening brace, after a comma.
                body.push(b',');
                body.extend_from_slice(&members[1..]);
            }
            body
        }
        None => previewed.json,
    };
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BuildRequest {
    /// The spec's name; `select` (what `GET /api/plan` calls them) is read as the same.
    #[serde(default, alias = "select")]
    selectors: Vec<String>,
    start_time: Option<String>,
    deployment_id: Option<String>,
    #[serde(default)]
    changed: bool,
    #[serde(default)]
    include_missing_upstream: bool,
    #[serde(default)]
    full_refresh: bool,
    #[serde(default)]
    allow_shrink: bool,
    /// Replays over the target's budget go on (`--allow-large`).
    #[serde(default)]
    allow_large: bool,
    /// Protected pipelines' confirmation tokens (`confirm`, as `--confirm` is spelled,
    /// is read as the same).
    #[serde(default, alias = "confirm")]
    confirmations: Vec<String>,
    /// The `plan_hash` of the preview the caller reviewed: only that plan is built.
    plan_hash: Option<String>,
}

/// `POST /api/build`: starts the build of the scope (the function `stb build` calls, in
/// this process) as a new run; 202 with its invocation id (follow it at
/// `/api/runs/{id}/events`).
pub(crate) async fn build(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Json(request): Json<BuildRequest>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    // Read as the preview reads its query: trimmed, so both plan the same scope.
    let scope = Scope {
        select: request
            .selectors
            .iter()
            .map(|s| s.trim().to_owned())
            .collect(),
        start_time: start_time(request.start_time.as_deref())?,
        deployment_id: request
            .deployment_id
            .as_deref()
            .map(|id| id.trim().to_owned()),
        changed: request.changed,
        full_refresh: request.full_refresh,
        include_missing_upstream: request.include_missing_upstream,
    };
    if precheck(&state, &principal, "build.direct.run")
        .await
        .is_err()
    {
        precheck(&state, &principal, "deployment.create").await?;
    }
    // Authorise the plan the server makes for this scope, not what the client says it is:
    // direct pipelines need build.direct.run, virtual ones deployment.create.
    let plan = crate::planning::preview(&state, scope.clone(), false).await?;
    if !plan.has_work {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            detail: serde_json::json!({
                "message": "Nothing to build: what is built already matches the project",
                "reason": "no_changes",
                "hint": "fullRefresh builds a new deployment of a virtual pipeline anyway",
            }),
        });
    }
    let models = plan.models;
    let (direct, staged) = pipelines_of(&state, models)?;
    if direct.is_empty() && staged.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the plan for this scope changes nothing: there is nothing to build",
        ));
    }
    if !direct.is_empty() {
        authorize(&state, &principal, "build.direct.run", &direct).await?;
    }
    if !staged.is_empty() {
        authorize(&state, &principal, "deployment.create", &staged).await?;
    }
    // Nothing runs that nobody reviewed: the caller names the preview it approved, and a
    // plan that differs now (the project or the warehouse changed) is refused.
    let current = plan.hash;
    let Some(reviewed) = request.plan_hash.clone() else {
        return Err(ApiError {
            status: StatusCode::BAD_REQUEST,
            detail: serde_json::json!({
                "message": "A build names the plan it executes: planHash is required",
                "reason": "plan_hash_required",
                "hint": "preview the plan (GET /api/plan with the same scope) and send its plan_hash",
                "planHash": current,
            }),
        });
    };
    if reviewed != current {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            detail: serde_json::json!({
                "message": "The plan changed since it was reviewed: the project or the warehouse changed",
                "reason": "plan_changed",
                "hint": "preview the plan again and review what changed",
                "planHash": current,
            }),
        });
    }
    let invocation_id = uuid::Uuid::new_v4().to_string();
    state.builds.start(crate::builder::Job {
        compilation: state.compilation()?,
        connect: Arc::clone(&state.warehouse.connect),
        database: state.database.clone(),
        invocation_id: invocation_id.clone(),
        owner: principal.username.clone(),
        scope,
        plan_hash: reviewed,
        authorised: direct.iter().chain(&staged).cloned().collect(),
        windows: state.run_windows,
        allow_shrink: request.allow_shrink,
        allow_large: request.allow_large,
        tokens: request.confirmations.clone(),
    })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({
            "invocationId": invocation_id,
            "events": format!("/api/runs/{invocation_id}/events"),
        })),
    ))
}

/// `GET /api/build/current`: the last build this server started: running or its exit code,
/// and its messages (why a build that recorded nothing did not start).
pub(crate) async fn current_build(State(state): Shared) -> Json<serde_json::Value> {
    Json(serde_json::json!({"build": state.builds.current()}))
}

/// `POST /api/deployments/{id}/promote`: as `stb deployment promote <id> --json`.
pub(crate) async fn promote(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = value("deployment id", &id)?;
    precheck(&state, &principal, "deployment.promote").await?;
    let staged = deployment_pipelines(&state, &id).await?;
    authorize(&state, &principal, "deployment.promote", &staged).await?;
    switch_deployments(&state, move |client, database, owner| {
        stb_engine::deployments::reports::promote(client, database, owner, &id)
    })
    .await
}

/// The pipelines of deployment `id`, from its own object records; 404 when it has none.
async fn deployment_pipelines(state: &AppState, id: &str) -> Result<Vec<String>, ApiError> {
    let database = state.database.clone();
    let wanted = id.to_owned();
    let models = state
        .warehouse
        .read(move |client| {
            stb_warehouse::deployments::read_all(client, &database)
                .map(|metadata| {
                    metadata
                        .objects
                        .into_iter()
                        .filter(|o| o.deployment_id == wanted && !o.model.is_empty())
                        .map(|o| o.model)
                        .collect::<Vec<_>>()
                })
                .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.message))
        })
        .await?;
    if models.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no deployment '{id}'"),
        ));
    }
    let (_, staged) = pipelines_of(state, models)?;
    Ok(staged)
}

/// Reads the project's deployments in this process with `read` (the function the
/// matching `stb deployment` command calls) and answers what it returns.
async fn read_deployments<T: serde::Serialize + Send + 'static>(
    state: &AppState,
    read: impl FnOnce(&stb_warehouse::Client, &str) -> Result<T, stb_engine::EngineError>
    + Send
    + 'static,
) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    stb_engine::deployments::reports::require_virtual(&compilation.project)
        .map_err(|error| ApiError::engine(&error))?;
    let database = state.database.clone();
    let answer = state
        .warehouse
        .read(move |client| read(client, &database).map_err(|error| ApiError::engine(&error)))
        .await?;
    serde_json::to_value(answer)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// `GET /api/deployments`: as `stb deployment list --json`. A project without virtual
/// pipelines has none to list: the answer says so (`virtualPipelines: false`, and why)
/// instead of refusing, since the Deployments page is there for every project.
pub(crate) async fn deployments(State(state): Shared) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    if let Err(none) = stb_engine::deployments::reports::require_virtual(&compilation.project) {
        return Ok(Json(serde_json::json!({
            "database": state.database,
            "deployments": [],
            "virtualPipelines": false,
            "message": none.message,
            "hint": none.hint,
        })));
    }
    read_deployments(&state, stb_engine::deployments::reports::list).await
}

/// `GET /api/deployments/{id}`: as `stb deployment show <id> --json`.
pub(crate) async fn deployment(
    State(state): Shared,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    read_deployments(&state, move |client, database| {
        stb_engine::deployments::reports::show(client, database, &id)
    })
    .await
}

/// What `GET /api/deployments/{spec}/diff` reads from its query: `stb deployment diff`'s
/// `--data`, `--key` (comma-separated) and `--samples`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffQuery {
    #[serde(default)]
    data: bool,
    key: Option<String>,
    samples: Option<usize>,
}

/// `GET /api/deployments/{spec}/diff`: as `stb deployment diff <spec> --json` (`ID`,
/// `active:ID`, `FROM:TO`); `?data=true` (with `key`, `samples`) as `--data`.
pub(crate) async fn diff(
    State(state): Shared,
    Path(spec): Path<String>,
    axum::extract::Query(query): axum::extract::Query<DiffQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let options = query.data.then(|| stb_engine::data_diff::Options {
        key: query
            .key
            .as_deref()
            .map(|key| {
                key.split(',')
                    .map(|c| c.trim().to_owned())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .filter(|key| !key.is_empty()),
        samples: query
            .samples
            .unwrap_or(stb_engine::data_diff::Options::default().samples),
    });
    read_deployments(&state, move |client, database| {
        stb_engine::deployments::reports::compare_with(client, database, &spec, options.as_ref())
    })
    .await
}

/// `POST /api/deployments/{id}/rollback`: switches the stable views back to deployment
/// `id`'s copies (as `stb deployment rollback <id> --auto-approve --json`); needs
/// `deployment.promote` on its pipelines.
pub(crate) async fn rollback(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = value("deployment id", &id)?;
    precheck(&state, &principal, "deployment.promote").await?;
    let staged = deployment_pipelines(&state, &id).await?;
    authorize(&state, &principal, "deployment.promote", &staged).await?;
    switch_deployments(&state, move |client, database, owner| {
        let to = stb_engine::deployments::RollbackTo::Deployment(id);
        let plan = stb_engine::deployments::reports::plan_rollback(client, database, &to)?;
        stb_engine::deployments::reports::rollback(client, database, owner, &plan)
    })
    .await
}

/// Switches stable views in this process with `switch` (the function the matching `stb
/// deployment` command calls), under the target lock held by an owner of its own, and
/// answers the publication.
async fn switch_deployments(
    state: &AppState,
    switch: impl FnOnce(
        &stb_warehouse::Client,
        &str,
        &str,
    )
        -> Result<stb_engine::deployments::reports::Published, stb_engine::EngineError>
    + Send
    + 'static,
) -> Result<Json<serde_json::Value>, ApiError> {
    let owner = uuid::Uuid::new_v4().to_string();
    read_deployments(state, move |client, database| {
        switch(client, database, &owner)
    })
    .await
}

/// How often the feed reads new events.
const FEED_POLL: Duration = Duration::from_millis(500);
/// A run that shows no event for this long is not coming.
const FEED_GIVE_UP: Duration = Duration::from_secs(60);

struct Feed {
    state: Arc<AppState>,
    invocation_id: String,
    after: Option<u64>,
    finished: bool,
    quiet_since: std::time::Instant,
}

/// `GET /api/runs/{id}/events`: the run's events as server-sent events, from its first
/// (or after `Last-Event-ID`) until `run_completed`. Each is `event: <kind>`, `id:
/// <sequence>` and the event as JSON data.
pub(crate) async fn feed(
    State(state): Shared,
    Path(invocation_id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let start = Feed {
        state,
        invocation_id,
        after,
        finished: false,
        quiet_since: std::time::Instant::now(),
    };
    let batches = futures_util::stream::unfold(start, |mut feed| async move {
        if feed.finished {
            return None;
        }
        loop {
            let database = feed.state.database.clone();
            let id = feed.invocation_id.clone();
            let read = feed
                .state
                .warehouse
                .read(move |client| {
                    stb_warehouse::runs::events_of(client, &database, &id)
                        .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()))
                })
                .await;
            let fresh: Vec<_> = read
                .unwrap_or_default()
                .into_iter()
                .filter(|e| feed.after.is_none_or(|after| e.sequence > after))
                .collect();
            if !fresh.is_empty() {
                feed.quiet_since = std::time::Instant::now();
                feed.after = fresh.last().map(|e| e.sequence);
                feed.finished = fresh.iter().any(|e| e.kind == "run_completed");
                let events: Vec<Result<Event, Infallible>> = fresh
                    .iter()
                    .map(|e| {
                        let data = serde_json::json!({
                            "sequence": e.sequence,
                            "emittedAt": e.emitted_at,
                            "event": e.kind,
                            "stepId": e.step_id,
                            "payload": serde_json::from_str::<serde_json::Value>(&e.payload).unwrap_or_default(),
                        });
                        Ok(Event::default()
                            .event(e.kind.clone())
                            .id(e.sequence.to_string())
                            .data(data.to_string()))
                    })
                    .collect();
                return Some((futures_util::stream::iter(events), feed));
            }
            if feed
                .state
                .stopping
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                feed.finished = true;
                let gone = Event::default()
                    .event("feed_ended")
                    .data(r#"{"reason":"the server is stopping"}"#);
                return Some((futures_util::stream::iter(vec![Ok(gone)]), feed));
            }
            if feed.quiet_since.elapsed() > FEED_GIVE_UP {
                feed.finished = true;
                let gone = Event::default()
                    .event("feed_ended")
                    .data(r#"{"reason":"no event for 60 s"}"#);
                return Some((futures_util::stream::iter(vec![Ok(gone)]), feed));
            }
            tokio::time::sleep(FEED_POLL).await;
        }
    });
    Sse::new(futures_util::StreamExt::flatten(batches)).keep_alive(KeepAlive::default())
}

/// `POST /api/runs/{id}/cancel`: as `stb runs cancel`: the run stops at its statement in
/// flight and records itself cancelled. Needs `build.cancel` on the run's pipelines (from
/// what its `run_started` says it builds).
pub(crate) async fn cancel(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(invocation_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    precheck(&state, &principal, "build.cancel").await?;
    let database = state.database.clone();
    let windows = state.run_windows;
    let id = invocation_id.clone();
    let detail = state
        .warehouse
        .read(move |client| {
            stb_engine::runs::show(client, &database, &id, windows)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    let models = detail
        .run
        .scope
        .iter()
        .filter_map(|id| id.strip_prefix("model:").map(str::to_owned));
    let (direct, staged) = pipelines_of(&state, models)?;
    let pipelines: Vec<String> = direct.into_iter().chain(staged).collect();
    authorize(&state, &principal, "build.cancel", &pipelines).await?;
    let database = state.database.clone();
    let cancelled = state
        .warehouse
        .read(move |client| {
            stb_engine::runs::cancel(
                client,
                &database,
                &invocation_id,
                windows,
                Duration::from_secs(15),
            )
            .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    Ok(Json(serde_json::json!({"cancellation": cancelled})))
}

/// `POST /api/reload`: compiles the project again from disk. Authorised (`project.reload`)
/// against the policy of the compile the server holds, under the same lock as the
/// recompilation, so an edited `access.yml` cannot authorise its own reload. A failing
/// compile is reported and the last good policy and definitions stay in use.
pub(crate) async fn reload(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let _one_at_a_time = state.reloading.lock().await;
    let held = state.held();
    let assigned = assigned_roles(&state, &principal).await?;
    let decision = crate::authz::decide(
        principal.is_admin(),
        held.access.as_ref(),
        &assigned,
        "project.reload",
        crate::authz::Scope::Project,
    );
    if !decision.allowed {
        return Err(denied(&state, "project.reload", &decision));
    }
    let compile = recompile_and_swap(&state).await?;
    Ok(Json(serde_json::json!({"compile": compile})))
}

/// Compiles the project again from disk and serves the result: a good compile replaces
/// everything, a failing one only the compile status (the last good policy and
/// definitions stay). The caller holds `state.reloading`. Shared by `POST /api/reload` and
/// `stb dev --watch`.
pub(crate) async fn recompile_and_swap(
    state: &Arc<crate::AppState>,
) -> Result<crate::CompileStatus, ApiError> {
    let Some(recompile) = state.recompile.clone() else {
        return Err(ApiError::service_unavailable("reload is not available"));
    };
    let fresh = tokio::task::spawn_blocking(move || recompile())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let held = state.held();
    let next = if fresh.compile.state == "ok" {
        fresh
    } else {
        crate::Held {
            compile: fresh.compile,
            ..(*held).clone()
        }
    };
    let compile = next.compile.clone();
    if let Ok(mut slot) = state.held.write() {
        *slot = Arc::new(next);
    }
    state.snapshots.invalidate();
    Ok(compile)
}

#[cfg(test)]
mod tests {
    use super::BuildRequest;

    #[test]
    fn a_build_body_reads_the_spec_names_and_the_short_ones() {
        let spec: BuildRequest = serde_json::from_str(
            r#"{"selectors": ["model:a"], "startTime": "2026-01-01T00:00:00Z", "deploymentId": "d",
                "confirmations": ["yes-a"], "changed": false, "includeMissingUpstream": true,
                "planHash": "h"}"#,
        )
        .expect("the spec's body reads");
        assert_eq!(spec.selectors, ["model:a"]);
        assert_eq!(spec.confirmations, ["yes-a"]);
        assert!(spec.include_missing_upstream);
        let short: BuildRequest =
            serde_json::from_str(r#"{"select": ["model:a"], "confirm": ["yes-a"]}"#)
                .expect("the short names read");
        assert_eq!(short.selectors, ["model:a"]);
        assert_eq!(short.confirmations, ["yes-a"]);
        assert!(!short.include_missing_upstream);
        assert!(
            serde_json::from_str::<BuildRequest>(r#"{"selector": ["a"]}"#).is_err(),
            "a misspelt field is refused, not ignored"
        );
    }
}
