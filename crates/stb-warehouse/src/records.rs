//! The lifecycle rows commands leave: one fingerprint per rebuilt model (the baseline the
//! next plan diffs against), the manifest, test and audit results, and one terminal
//! invocation row. The schema of these tables is in [`crate::metadata`]; the reads are
//! beside it ([`crate::fingerprints`], [`crate::events`], [`crate::statements`]).

use crate::statements::sha256_hex as sql_hash;
use crate::{Client, WarehouseError};

fn literal(text: &str) -> String {
    stb_ddl::string_literal(text)
}

fn table(database: &str, name: &str) -> String {
    stb_ddl::QualifiedName::new(database, name).to_string()
}

/// A model as its fingerprint records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDefinition<'a> {
    pub name: &'a str,
    /// The compiled query.
    pub query: &'a str,
    /// The identity JSON `--changed` compares (kind, relation, columns, storage).
    pub identity: String,
}

/// Appends the direct fingerprints of `models` as built by `workflow_id`.
///
/// # Errors
/// The insert failed (callers report it without failing the build).
pub fn write_fingerprints(
    client: &Client,
    database: &str,
    workflow_id: &str,
    models: &[ModelDefinition<'_>],
) -> Result<(), WarehouseError> {
    if models.is_empty() {
        return Ok(());
    }
    let rows: Vec<String> = models
        .iter()
        .map(|model| {
            let identity = format!("{database}.{}", model.name);
            let hash = sql_hash(model.query);
            format!(
                "({}, {}, {}, {}, {}, {}, {}, now64(3, 'UTC'))",
                literal(&sql_hash(&format!("{identity}:{hash}:{workflow_id}"))),
                literal(&identity),
                literal(model.query),
                literal(&hash),
                literal(&model.identity),
                literal(workflow_id),
                literal(env!("CARGO_PKG_VERSION")),
            )
        })
        .collect();
    client.execute(
        &format!(
            "INSERT INTO {} (fingerprint_id, logical_model_identity, definition_sql, definition_hash, identity_metadata, workflow_id, tool_version, applied_at) VALUES {}",
            table(database, "_streambuild_direct_fingerprints"),
            rows.join(", ")
        ),
        None,
    )?;
    Ok(())
}

/// A command's terminal state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation<'a> {
    pub invocation_id: &'a str,
    pub project_identity: &'a str,
    pub target_identity: &'a str,
    pub command: &'a str,
    pub mode: Option<&'a str>,
    /// `succeeded`, `failed` or `cancelled`.
    pub outcome: &'a str,
    pub exit_code: i32,
    /// `applied` or `failed` once the warehouse was touched.
    pub materialized_outcome: Option<&'a str>,
    /// The virtual deployment the invocation built or audited.
    pub deployment_id: Option<&'a str>,
    pub workflow_id: Option<&'a str>,
    pub selected_node_count: usize,
    /// Milliseconds since the Unix epoch, UTC.
    pub started_at_ms: u128,
    pub duration_ms: u128,
    pub error_message: Option<&'a str>,
    pub summary_json: &'a str,
}

/// Longest error message kept (1 MiB) and summary (16 KiB).
const MAX_ERROR_BYTES: usize = 1 << 20;
const MAX_SUMMARY_BYTES: usize = 16 * 1024;

fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends the invocation's terminal row.
///
/// # Errors
/// The insert failed.
pub fn write_invocation(
    client: &Client,
    database: &str,
    invocation: &Invocation<'_>,
) -> Result<(), WarehouseError> {
    let optional = |value: Option<&str>| value.map_or_else(|| "NULL".to_owned(), literal);
    let summary = if invocation.summary_json.len() > MAX_SUMMARY_BYTES {
        serde_json::json!({"summary_truncated": true, "original_bytes": invocation.summary_json.len()})
            .to_string()
    } else {
        invocation.summary_json.to_owned()
    };
    let started = invocation.started_at_ms;
    client.execute(
        &format!(
            "INSERT INTO {} (invocation_id, project_identity, target_identity, command, mode, outcome, exit_code, materialized_outcome, deployment_id, workflow_id, selected_node_count, started_at, completed_at, duration_ms, error_message, summary_json, tool_version) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, fromUnixTimestamp64Milli({started}, 'UTC'), now64(3, 'UTC'), {}, {}, {}, {})",
            table(database, "_streambuild_invocations"),
            literal(invocation.invocation_id),
            literal(invocation.project_identity),
            literal(invocation.target_identity),
            literal(invocation.command),
            optional(invocation.mode),
            literal(invocation.outcome),
            invocation.exit_code,
            optional(invocation.materialized_outcome),
            optional(invocation.deployment_id),
            optional(invocation.workflow_id),
            invocation.selected_node_count,
            invocation.duration_ms,
            optional(invocation.error_message.map(|m| cut(m, MAX_ERROR_BYTES))),
            literal(&summary),
            literal(env!("CARGO_PKG_VERSION")),
        ),
        None,
    )?;
    Ok(())
}

/// One relation StreamBuild owns in the target, as a manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedResource<'a> {
    pub pipeline: &'a str,
    /// `model` or `source`.
    pub logical_type: &'a str,
    pub logical_name: &'a str,
    /// `table`, `materialized_view`, `view`, `kafka_table`, `landing_table`, `landing_view`.
    pub role: &'a str,
    pub relation: &'a str,
}

/// What a manifest row records about the project at the start of a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest<'a> {
    pub invocation_id: &'a str,
    pub project_identity: &'a str,
    pub target_name: &'a str,
    /// SHA-256 of the compiled manifest.
    pub fingerprint: &'a str,
    pub pipelines: Vec<&'a str>,
    pub resources: Vec<OwnedResource<'a>>,
}

/// Appends the project's manifest: which pipelines and relations this project owns in
/// the target, so later destruction and diagnosis know what is StreamBuild's.
///
/// # Errors
/// The insert failed.
pub fn write_manifest(
    client: &Client,
    database: &str,
    manifest: &Manifest<'_>,
) -> Result<(), WarehouseError> {
    let pipelines: Vec<String> = manifest.pipelines.iter().map(|p| literal(p)).collect();
    let resources: Vec<String> = manifest
        .resources
        .iter()
        .map(|r| {
            format!(
                "({}, {}, {}, {}, {}, {}, {})",
                literal(r.pipeline),
                literal(r.logical_type),
                literal(r.logical_name),
                literal(r.role),
                literal(database),
                literal(r.relation),
                literal(r.role),
            )
        })
        .collect();
    let revision = std::env::var("STREAMBUILD_PROJECT_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty());
    client.execute(
        &format!(
            "INSERT INTO {} (manifest_id, invocation_id, project_identity, target_name, target_database, is_production, project_revision, manifest_fingerprint, manifest_version, pipelines, resources, tool_version, published_at) VALUES ({}, {}, {}, {}, {}, false, {}, {}, 1, [{}], [{}], {}, now64(6, 'UTC'))",
            table(database, "_streambuild_manifests"),
            literal(&uuid::Uuid::new_v4().to_string()),
            literal(manifest.invocation_id),
            literal(manifest.project_identity),
            literal(manifest.target_name),
            literal(database),
            revision.as_deref().map_or_else(|| "NULL".to_owned(), literal),
            literal(manifest.fingerprint),
            pipelines.join(", "),
            resources.join(", "),
            literal(env!("CARGO_PKG_VERSION")),
        ),
        None,
    )?;
    Ok(())
}

/// The result of one test or audit, as `_streambuild_node_results` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResult<'a> {
    /// `test` or `audit`.
    pub kind: &'a str,
    pub name: &'a str,
    /// `passed`, `warning`, `failed`, `error` or `deferred`.
    pub status: &'a str,
    pub severity: Option<&'a str>,
    pub failure_count: u64,
    pub warmup_seconds: u64,
    /// The SQL that ran, so a changed definition shows in the records.
    pub definition: &'a str,
    pub payload_json: String,
    pub error_message: Option<&'a str>,
    /// A scheduled run's slot: when it was due (ms since the epoch, UTC) and its cadence
    /// in seconds.
    pub schedule: Option<(u128, u64)>,
}

/// Appends test and audit results of `invocation_id`; `trigger` is `build` or `manual`.
///
/// # Errors
/// The insert failed.
pub fn write_node_results(
    client: &Client,
    database: &str,
    invocation_id: &str,
    target: &str,
    trigger: &str,
    results: &[NodeResult<'_>],
) -> Result<(), WarehouseError> {
    if results.is_empty() {
        return Ok(());
    }
    let optional = |value: Option<&str>| value.map_or_else(|| "NULL".to_owned(), literal);
    let rows: Vec<String> = results
        .iter()
        .map(|r| {
            let definition = sql_hash(r.definition);
            format!(
                "({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, now64(3, 'UTC'), {}, {})",
                literal(&uuid::Uuid::new_v4().to_string()),
                literal(invocation_id),
                literal(r.kind),
                literal(r.name),
                literal(&format!("{}:{}", r.kind, r.name)),
                literal(&definition),
                literal(&sql_hash(&format!("{definition}:{invocation_id}"))),
                literal(target),
                literal(trigger),
                r.schedule.map_or_else(
                    || "NULL".to_owned(),
                    |(at, _)| format!("fromUnixTimestamp64Milli({at}, 'UTC')")
                ),
                r.schedule
                    .map_or_else(|| "NULL".to_owned(), |(_, every)| every.to_string()),
                r.warmup_seconds,
                literal(r.status),
                optional(r.severity),
                r.failure_count,
                literal(&r.payload_json),
                optional(r.error_message.map(|m| cut(m, MAX_ERROR_BYTES))),
            )
        })
        .collect();
    client.execute(
        &format!(
            "INSERT INTO {} (result_id, invocation_id, node_kind, node_name, binding_key, definition_fingerprint, execution_fingerprint, target_identity, trigger, scheduled_for, cadence_seconds, warmup_seconds, status, severity, failure_count, completed_at, payload_json, error_message) VALUES {}",
            table(database, "_streambuild_node_results"),
            rows.join(", ")
        ),
        None,
    )?;
    Ok(())
}
