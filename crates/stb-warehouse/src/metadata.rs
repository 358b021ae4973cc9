//! Lifecycle metadata: the append-only `_streambuild_*` tables in the target database, and
//! the idempotent migration that creates them.
//!
//! The migration only adds: databases and tables `IF NOT EXISTS`, columns `IF NOT EXISTS`,
//! then the schema version row. Two processes may run it at once; the loser of a creation
//! race sees "already exists", which counts as done. A database whose metadata is newer than
//! this build understands is refused rather than written to.

use stb_ddl::{Column, QualifiedName, Table};

use crate::client::Client;
use crate::error::{ErrorKind, WarehouseError};

/// The metadata schema this build writes.
pub const SCHEMA_VERSION: u64 = 7;

/// Whether `relation` is one of StreamBuild's lifecycle tables (`_streambuild_*`): never a
/// project's, never dropped with one.
#[must_use]
pub fn is_lifecycle_table(relation: &str) -> bool {
    relation.starts_with("_streambuild_")
}

const LC: &str = "LowCardinality(String)";
const N: &str = "Nullable(String)";
const S: &str = "String";
const TS: &str = "DateTime64(3, 'UTC')";

// ClickHouse's TABLE_ALREADY_EXISTS: a concurrent migration created it first.
pub(crate) const TABLE_ALREADY_EXISTS: u32 = 57;

fn table(database: &str, name: &str, columns: &[(&str, &str)], order_by: &[&str]) -> Table {
    Table {
        name: QualifiedName::new(database, name),
        columns: columns.iter().map(|(n, t)| Column::new(n, t)).collect(),
        engine: "MergeTree".to_owned(),
        order_by: order_by.iter().map(|o| (*o).to_owned()).collect(),
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    }
}

/// Every metadata table of `database`, in creation order.
#[must_use]
pub fn tables(database: &str) -> Vec<Table> {
    let mut statements = vec![
        table(
            database,
            "_streambuild_schema_versions",
            &[("version", "UInt64"), ("applied_at", TS)],
            &["version"],
        ),
        table(
            database,
            "_streambuild_virtual_object_state",
            &[
                ("state_id", S),
                ("observation_id", S),
                ("state_kind", LC),
                ("deployment_id", N),
                ("logical_database_name", N),
                ("logical_object_type", S),
                ("logical_object_name", S),
                ("physical_database_name", N),
                ("physical_relation_name", N),
                ("logical_model_database", N),
                ("logical_model_name", N),
                ("is_selected_root", "Bool"),
                ("object_fingerprint", S),
                ("canonical_query", N),
                ("observed_at", TS),
            ],
            &[
                "state_kind",
                "state_id",
                "logical_object_type",
                "logical_object_name",
            ],
        ),
        table(
            database,
            "_streambuild_virtual_deployments",
            &[
                ("deployment_id", S),
                ("workflow_fingerprint", S),
                ("replay_lineage_mode", S),
                ("boundary_time", TS),
                ("created_at", TS),
                ("tool_version", S),
            ],
            &["deployment_id"],
        ),
        table(
            database,
            "_streambuild_virtual_replay_boundaries",
            &[
                ("deployment_id", S),
                ("root_database_name", N),
                ("root_object_type", S),
                ("root_object_name", S),
                ("anchor_database_name", N),
                ("anchor_object_type", S),
                ("anchor_object_name", S),
                ("boundary_kind", LC),
                ("value_kind", LC),
                ("partition_value", N),
                ("lower_value", N),
                ("cutoff_value", S),
                ("cutoff_inclusive", "Bool"),
                ("captured_at", TS),
            ],
            &[
                "deployment_id",
                "root_object_type",
                "root_object_name",
                "boundary_kind",
                "ifNull(partition_value, '')",
            ],
        ),
        table(
            database,
            "_streambuild_virtual_publications",
            &[
                ("publication_id", S),
                ("deployment_id", S),
                ("operation", "LowCardinality(String) DEFAULT 'promote'"),
                ("previous_deployment_id", N),
                ("logical_database_name", S),
                ("logical_view_name", S),
                ("physical_database_name", S),
                ("physical_relation_name", S),
                ("published_at", TS),
            ],
            &[
                "publication_id",
                "logical_database_name",
                "logical_view_name",
            ],
        ),
        table(
            database,
            "_streambuild_direct_fingerprints",
            &[
                ("fingerprint_id", S),
                ("logical_model_identity", S),
                ("definition_sql", S),
                ("definition_hash", S),
                ("identity_metadata", S),
                ("workflow_id", S),
                ("tool_version", S),
                ("applied_at", TS),
            ],
            &["logical_model_identity", "applied_at", "fingerprint_id"],
        ),
        table(
            database,
            "_streambuild_manifests",
            &[
                ("manifest_id", S),
                ("invocation_id", S),
                ("project_identity", S),
                ("target_name", S),
                ("target_database", S),
                ("is_production", "Bool"),
                ("project_revision", N),
                ("manifest_fingerprint", S),
                ("manifest_version", "UInt64"),
                ("pipelines", "Array(String)"),
                (
                    "resources",
                    "Array(Tuple(pipeline_name String, logical_type String, logical_name String, resource_role String, resource_database String, resource_name String, resource_kind String))",
                ),
                ("tool_version", S),
                ("published_at", "DateTime64(6, 'UTC')"),
            ],
            &[
                "project_identity",
                "target_name",
                "target_database",
                "published_at",
                "manifest_id",
            ],
        ),
        table(
            database,
            "_streambuild_invocations",
            &[
                ("invocation_id", S),
                ("project_identity", S),
                ("target_identity", S),
                ("command", LC),
                ("mode", N),
                ("outcome", LC),
                ("exit_code", "Int32"),
                ("materialized_outcome", N),
                ("deployment_id", N),
                ("workflow_id", N),
                ("selected_node_count", "UInt64"),
                ("started_at", TS),
                ("completed_at", TS),
                ("duration_ms", "UInt64"),
                ("error_message", N),
                ("summary_json", S),
                ("tool_version", S),
            ],
            &[
                "project_identity",
                "target_identity",
                "completed_at",
                "invocation_id",
            ],
        ),
        table(
            database,
            "_streambuild_node_results",
            &[
                ("result_id", S),
                ("invocation_id", S),
                ("node_kind", LC),
                ("node_name", S),
                ("binding_key", S),
                ("definition_fingerprint", S),
                ("execution_fingerprint", S),
                ("target_identity", S),
                ("trigger", LC),
                ("scheduled_for", "Nullable(DateTime64(3, 'UTC'))"),
                ("cadence_seconds", "Nullable(UInt64)"),
                ("warmup_seconds", "UInt64"),
                ("status", LC),
                ("severity", N),
                ("failure_count", "UInt64"),
                ("completed_at", TS),
                ("payload_json", S),
                ("error_message", N),
            ],
            &["node_kind", "node_name", "completed_at", "result_id"],
        ),
        table(
            database,
            "_streambuild_run_events",
            &[
                ("invocation_id", S),
                ("sequence", "UInt64"),
                // The server's clock, so client skew never reads as a silent run.
                ("emitted_at", "DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')"),
                ("event_kind", LC),
                ("step_id", N),
                ("phase", N),
                ("payload_json", S),
            ],
            &["invocation_id", "sequence"],
        ),
    ];
    let mut statements_table = table(
        database,
        "_streambuild_run_statements",
        &[
            ("invocation_id", S),
            ("statement_sequence", "UInt64"),
            ("step_id", S),
            ("phase", LC),
            ("intent", LC),
            ("sql", S),
            ("sql_sha256", "FixedString(64)"),
            ("workflow_sha256", "FixedString(64)"),
            ("workflow_revision", "UInt64"),
            ("recorded_at", TS),
        ],
        &["invocation_id", "statement_sequence"],
    );
    // Re-persisted with a higher revision when a replay placeholder is realised.
    statements_table.engine = "ReplacingMergeTree(workflow_revision)".to_owned();
    statements.push(statements_table);
    statements
}

/// The migration's statements for `database`, in order.
#[must_use]
pub fn migration(database: &str) -> Vec<String> {
    let db = stb_ddl::identifier(database);
    let mut statements = vec![format!("CREATE DATABASE IF NOT EXISTS {db}")];
    statements.extend(tables(database).iter().map(Table::render_if_not_exists));
    statements.push(format!(
        "DROP TABLE IF EXISTS {}",
        QualifiedName::new(database, "_streambuild_owned_resources")
    ));
    let publications = QualifiedName::new(database, "_streambuild_virtual_publications");
    statements.push(format!(
        "ALTER TABLE {publications} ADD COLUMN IF NOT EXISTS operation LowCardinality(String) DEFAULT 'promote', ADD COLUMN IF NOT EXISTS previous_deployment_id Nullable(String)"
    ));
    let versions = QualifiedName::new(database, "_streambuild_schema_versions");
    statements.push(format!(
        "INSERT INTO {versions} (version, applied_at) SELECT {SCHEMA_VERSION}, now64(3, 'UTC') WHERE NOT EXISTS (SELECT 1 FROM {versions} WHERE version = {SCHEMA_VERSION})"
    ));
    statements
}

fn failure(message: String) -> WarehouseError {
    WarehouseError {
        kind: ErrorKind::Other,
        server_code: None,
        message,
    }
}

/// Creates or completes `database`'s metadata tables. Metadata already at this schema
/// version, with every table present, costs two reads and no DDL: every command that
/// writes records starts here.
///
/// # Errors
/// Metadata written by a newer StreamBuild, a pre-production `_streambuild_node_results`,
/// or a failed statement.
pub fn migrate(client: &Client, database: &str) -> Result<(), WarehouseError> {
    let db = stb_ddl::string_literal(database);
    let expected = tables(database);
    let names: Vec<String> = expected
        .iter()
        .map(|table| stb_ddl::string_literal(&table.name.name))
        .collect();
    let present = client.query(&format!(
        "SELECT count() AS n, countIf(name = '_streambuild_schema_versions') AS versions FROM system.tables WHERE database = {db} AND name IN ({})",
        names.join(", ")
    ))?;
    let count = |column: &str| -> usize {
        present
            .text(0, column)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    if count("versions") == 1 {
        let versions = QualifiedName::new(database, "_streambuild_schema_versions");
        let found = client.query(&format!("SELECT max(version) AS v FROM {versions}"))?;
        let version: u64 = found.text(0, "v").and_then(|v| v.parse().ok()).unwrap_or(0);
        if version > SCHEMA_VERSION {
            return Err(failure(format!(
                "the StreamBuild metadata in '{database}' is schema version {version}; this stb understands up to {SCHEMA_VERSION}. Upgrade stb"
            )));
        }
        if version == SCHEMA_VERSION && count("n") == expected.len() {
            return Ok(());
        }
    }
    let node_results = client.query(&format!(
        "SELECT name FROM system.columns WHERE database = {db} AND table = '_streambuild_node_results'"
    ))?;
    if !node_results.data.is_empty()
        && !(0..node_results.data.len())
            .any(|row| node_results.text(row, "name").as_deref() == Some("binding_key"))
    {
        return Err(failure(format!(
            "'{database}._streambuild_node_results' predates the current metadata schema; drop this pre-production metadata table and run again"
        )));
    }
    for statement in migration(database) {
        match client.execute(&statement, None) {
            Err(error) if error.server_code == Some(TABLE_ALREADY_EXISTS) => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_migration_is_pinned() {
        insta::assert_snapshot!(super::migration("shop").join(";\n\n"));
    }
}
