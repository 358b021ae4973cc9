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

/// Refuses a plan of `project`'s target on `database` that its cluster cannot have.
///
/// # Errors
/// [`UNSUPPORTED_CODE`] for `on_cluster` and `sharded`; [`NOT_REPLICATED_CODE`] for a
/// `replicated` target whose database is missing or of another engine; the warehouse's
/// error when the database's engine cannot be read.
pub fn check_target(project: &Project, client: &Client, database: &str) -> Result<(), EngineError> {
    let Some(cluster) = &project.cluster else {
        return Ok(());
    };
    match cluster.topology {
        Topology::Cloud => Ok(()),
        Topology::OnCluster | Topology::Sharded => Err(EngineError::new(
            UNSUPPORTED_CODE,
            format!(
                "target '{}' is on the {} cluster '{}' ({} topology), which stb cannot plan or build yet",
                project.target,
                cluster.topology.as_str(),
                cluster.name,
                cluster.topology.as_str()
            ),
            "`stb compile` checks the models for it and docs/clusters.md shows the DDL it will run; plan and build on a Replicated database (topology = \"replicated\") or ClickHouse Cloud today",
        )),
        Topology::ReplicatedDatabase => {
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
                    "target '{}' says its database {database} is a Replicated database, but it {found}",
                    project.target
                ),
                format!(
                    "create it on the cluster first: CREATE DATABASE {} ENGINE = Replicated('/clickhouse/databases/{database}', '{{shard}}', '{{replica}}'); nothing was changed",
                    stb_ddl::identifier(database)
                ),
            )
            .of_kind(ErrorKind::Conflict))
        }
    }
}
