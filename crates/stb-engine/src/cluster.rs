//! Whether a target's cluster can be planned and built, asked once before a plan reads
//! anything else.
//!
//! A `Replicated` database and ClickHouse Cloud take the statements a single server takes
//! (the database runs each on every replica; the cloud's storage is replicated), so their
//! plans and builds are the single server's once the database is known to be one. The
//! `on_cluster` and `sharded` topologies need statements of their own in every step of a
//! build (`ON CLUSTER`, local and `Distributed` tables, replay per shard): until the
//! planner writes them, a plan is refused rather than made with single-server DDL that
//! would build one server of the cluster.

use stb_ddl::cluster::Topology;
use stb_project::Project;
use stb_warehouse::Client;

use crate::error::{EngineError, ErrorKind};

/// A topology the planner does not write statements for yet.
pub const UNSUPPORTED_CODE: &str = "STB-CLUSTER-001";
/// A `replicated` target whose database is not a `Replicated` database.
pub const NOT_REPLICATED_CODE: &str = "STB-CLUSTER-002";

/// Where the target's cluster is configured, for messages.
fn configured_at(project: &Project) -> String {
    project
        .cluster
        .as_ref()
        .map_or_else(String::new, |cluster| {
            format!(
                " ([targets.{}.cluster] at streambuild_project.toml:{}:{})",
                project.target, cluster.position.line, cluster.position.column
            )
        })
}

/// Refuses any work on a target whose topology the planner writes no statements for
/// (`on_cluster`, `sharded`): every command that connects asks this first, so none runs
/// single-server DDL on one server of such a cluster. Reads nothing.
///
/// # Errors
/// [`UNSUPPORTED_CODE`].
pub fn supported(project: &Project) -> Result<(), EngineError> {
    let Some(cluster) = &project.cluster else {
        return Ok(());
    };
    if !cluster.topology.names_cluster() {
        return Ok(());
    }
    Err(EngineError::new(
        UNSUPPORTED_CODE,
        format!(
            "target '{}' is on the cluster '{}' with the {} topology{}, which stb cannot plan, build or change yet",
            project.target,
            cluster.name,
            cluster.topology.as_str(),
            configured_at(project)
        ),
        "`stb compile` checks the models for it and docs/clusters.md shows the DDL it will run; a Replicated database (topology = \"replicated\") or ClickHouse Cloud (topology = \"cloud\") can be planned and built today. Nothing was changed",
    ))
}

/// Refuses a plan of `project`'s target on `database` that its cluster cannot have:
/// [`supported`], and a `replicated` target's database must be a `Replicated` database.
///
/// # Errors
/// [`UNSUPPORTED_CODE`] for `on_cluster` and `sharded`; [`NOT_REPLICATED_CODE`] for a
/// `replicated` target whose database is missing or of another engine; the warehouse's
/// error when the database's engine cannot be read.
pub fn check_target(project: &Project, client: &Client, database: &str) -> Result<(), EngineError> {
    supported(project)?;
    let Some(cluster) = &project.cluster else {
        return Ok(());
    };
    if cluster.topology != Topology::ReplicatedDatabase {
        return Ok(());
    }
    let rows = client
        .query(&format!(
            "SELECT engine FROM system.databases WHERE name = {}",
            stb_ddl::string_literal(database)
        ))
        .map_err(|error| EngineError::from(&error))?;
    let engine = rows.text(0, "engine");
    if engine.as_deref() == Some("Replicated") {
        return Ok(());
    }
    let found = engine.map_or_else(
        || "does not exist".to_owned(),
        |engine| format!("has the {engine} engine"),
    );
    Err(EngineError::new(
        NOT_REPLICATED_CODE,
        format!(
            "target '{}' says its database {database} is a Replicated database{}, but it {found}",
            project.target,
            configured_at(project)
        ),
        format!(
            "create it on every replica (or with ON CLUSTER <your cluster>): CREATE DATABASE {} ENGINE = Replicated({}, '{{shard}}', '{{replica}}'); nothing was changed",
            stb_ddl::identifier(database),
            stb_ddl::string_literal(&format!("/clickhouse/databases/{database}"))
        ),
    )
    .of_kind(ErrorKind::Conflict))
}
