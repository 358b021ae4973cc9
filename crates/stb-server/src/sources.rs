//! Topics and landed messages: `GET /api/topics` (the brokers' topics merged with the
//! managed sources that read them) and the message console over a managed source's
//! landing table (`POST /api/sources/{name}/messages[/record|/facets]`, reads that carry a
//! filter document, hence POST). Broker lists are redacted here as in the definitions
//! (the reference leaks them in its topic list).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use stb_ddl::QualifiedName;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::{AppState, Compilation};

type Shared = State<Arc<AppState>>;

/// A managed source that reads a topic.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TopicSource {
    pub name: String,
    /// Its landing table.
    pub relation_name: String,
    /// Messages its consumer group has not read, over every partition (`None`: unknown).
    pub lag_messages: Option<i64>,
    /// Rows and bytes its landing table holds.
    pub retained_rows: Option<u64>,
    pub retained_bytes: Option<u64>,
}

/// One topic.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Topic {
    pub name: String,
    /// Redacted when it holds credentials or comes from the environment.
    pub broker_list: String,
    /// `None` while its brokers cannot be reached.
    pub partitions: Option<usize>,
    pub sources: Vec<TopicSource>,
}

/// Brokers that could not be listed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Unreachable {
    pub broker_list: String,
    pub reason: String,
}

/// A managed source as the console and the topic list need it.
struct Managed {
    name: String,
    topic: String,
    brokers: stb_kafka::Brokers,
    shown_brokers: String,
    group: String,
    raw_table: String,
}

fn managed(compilation: &Compilation) -> Vec<Managed> {
    compilation
        .compiled
        .plan_sources
        .iter()
        .filter_map(|plan| {
            let landing = plan.landing.as_ref()?;
            let source = compilation
                .project
                .sources
                .iter()
                .find(|s| s.name == plan.name)?;
            let from_environment = source
                .kafka
                .as_ref()
                .and_then(|k| k.broker_list.as_ref())
                .is_some_and(|b| b.from_environment);
            let shown_brokers =
                crate::definitions::shown_broker_list(&landing.brokers, from_environment);
            Some(Managed {
                name: plan.name.clone(),
                topic: source.topic.clone().unwrap_or_default(),
                brokers: stb_kafka::Brokers {
                    list: landing.brokers.clone(),
                    settings: landing.settings.clone(),
                },
                shown_brokers,
                group: landing.consumer_group.clone(),
                raw_table: landing.raw_table.clone(),
            })
        })
        .collect()
}

/// Rows and bytes of each landing table (absent tables are left out).
fn retained(
    client: &stb_warehouse::Client,
    database: &str,
    tables: &[String],
) -> BTreeMap<String, (u64, u64)> {
    if tables.is_empty() {
        return BTreeMap::new();
    }
    let names: Vec<String> = tables.iter().map(|t| stb_ddl::string_literal(t)).collect();
    let Ok(rows) = client.query(&format!(
        "SELECT table, toString(sum(rows)) AS rows, toString(sum(bytes_on_disk)) AS bytes \
         FROM system.parts WHERE database = {} AND active AND table IN ({}) GROUP BY table",
        stb_ddl::string_literal(database),
        names.join(", ")
    )) else {
        return BTreeMap::new();
    };
    (0..rows.data.len())
        .filter_map(|r| {
            let number = |c: &str| rows.text(r, c).and_then(|t| t.parse().ok()).unwrap_or(0);
            Some((rows.text(r, "table")?, (number("rows"), number("bytes"))))
        })
        .collect()
}

/// `GET /api/topics`: every topic of the brokers the managed sources use, with the sources
/// that read it; a managed source's topic is listed even while its brokers are down.
pub(crate) async fn topics(State(state): Shared) -> Result<Json<serde_json::Value>, ApiError> {
    let compilation = state.compilation()?;
    let database = state.database.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let sources = managed(&compilation);
        let tables: Vec<String> = sources.iter().map(|s| s.raw_table.clone()).collect();
        let held = state
            .warehouse
            .connect_blocking()
            .map(|client| retained(&client, &database, &tables))
            .unwrap_or_default();
        let mut topics: BTreeMap<(String, String), Topic> = BTreeMap::new();
        let mut unreachable = Vec::new();
        let mut listed: Vec<&stb_kafka::Brokers> = Vec::new();
        for source in &sources {
            if listed.contains(&&source.brokers) {
                continue;
            }
            listed.push(&source.brokers);
            match stb_kafka::list_topics(&source.brokers) {
                Ok(found) => {
                    for topic in found {
                        topics.insert(
                            (source.shown_brokers.clone(), topic.name.clone()),
                            Topic {
                                name: topic.name,
                                broker_list: source.shown_brokers.clone(),
                                partitions: Some(topic.partitions),
                                sources: Vec::new(),
                            },
                        );
                    }
                }
                Err(reason) => unreachable.push(Unreachable {
                    broker_list: source.shown_brokers.clone(),
                    reason,
                }),
            }
        }
        for source in &sources {
            let lag = stb_kafka::topic_lag(&source.brokers, &source.topic, &source.group)
                .ok()
                .and_then(|partitions| {
                    partitions
                        .iter()
                        .map(stb_kafka::PartitionLag::lag)
                        .sum::<Option<i64>>()
                });
            let (rows, bytes) = held
                .get(&source.raw_table)
                .map_or((None, None), |(r, b)| (Some(*r), Some(*b)));
            topics
                .entry((source.shown_brokers.clone(), source.topic.clone()))
                .or_insert_with(|| Topic {
                    name: source.topic.clone(),
                    broker_list: source.shown_brokers.clone(),
                    partitions: None,
                    sources: Vec::new(),
                })
                .sources
                .push(TopicSource {
                    name: source.name.clone(),
                    relation_name: source.raw_table.clone(),
                    lag_messages: lag,
                    retained_rows: rows,
                    retained_bytes: bytes,
                });
        }
        serde_json::json!({
            "available": unreachable.is_empty(),
            "unreachable": unreachable,
            "topics": topics.into_values().collect::<Vec<_>>(),
        })
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(Json(answer))
}

/// The landing table of managed source `name`: 404 unknown, 400 not a managed Kafka
/// source. Authorised first (`source.messages.read`, target scope).
async fn landing(
    state: &AppState,
    principal: &Principal,
    name: &str,
) -> Result<QualifiedName, ApiError> {
    crate::work::authorize_in(
        state,
        principal,
        "source.messages.read",
        crate::authz::Scope::Target,
    )
    .await?;
    let compilation = state.compilation()?;
    let Some(plan) = compilation
        .compiled
        .plan_sources
        .iter()
        .find(|s| s.name == name)
    else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no source '{name}'"),
        ));
    };
    let Some(landing) = &plan.landing else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "'{name}' is not a managed Kafka source: only their landed messages can be browsed"
            ),
        ));
    };
    Ok(QualifiedName::new(&state.database, &landing.raw_table))
}

/// `POST /api/sources/{name}/messages`: a page of landed messages, newest first.
pub(crate) async fn messages(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(name): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Json<stb_engine::messages::Page>, ApiError> {
    let relation = landing(&state, &principal, &name).await?;
    let request: stb_engine::messages::Request = crate::error::json_body(&bytes)?;
    let page = state
        .warehouse
        .read(move |client| {
            stb_engine::messages::list(client, &relation, &request)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    Ok(Json(page))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordRequest {
    partition: i32,
    offset: i64,
}

/// `POST /api/sources/{name}/messages/record`: one whole message; 404 when it did not land.
pub(crate) async fn record(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(name): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Json<stb_engine::messages::Record>, ApiError> {
    let relation = landing(&state, &principal, &name).await?;
    let request: RecordRequest = crate::error::json_body(&bytes)?;
    let found = state
        .warehouse
        .read(move |client| {
            stb_engine::messages::record(client, &relation, request.partition, request.offset)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    found.map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no landed message at that partition and offset in '{name}'"),
        )
    })
}

/// A facet request: the path, beside the listing document's fields (checked by that
/// document's own strict reading).
#[derive(Deserialize)]
pub(crate) struct FacetsRequest {
    path: String,
    #[serde(flatten)]
    selection: serde_json::Map<String, serde_json::Value>,
}

/// `POST /api/sources/{name}/messages/facets`: the 20 commonest values at a JSON path over
/// the messages a listing document selects.
pub(crate) async fn facets(
    State(state): Shared,
    axum::Extension(principal): axum::Extension<Principal>,
    Path(name): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Json<stb_engine::messages::Facets>, ApiError> {
    let relation = landing(&state, &principal, &name).await?;
    let request: FacetsRequest = crate::error::json_body(&bytes)?;
    let selection: stb_engine::messages::Request =
        serde_json::from_value(serde_json::Value::Object(request.selection))
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let path = request.path;
    let facets = state
        .warehouse
        .read(move |client| {
            stb_engine::messages::facets(client, &relation, &selection, &path)
                .map_err(|e| ApiError::engine(&e))
        })
        .await?;
    Ok(Json(facets))
}
