//! Whether a target's cluster can be planned and built, asked once before a plan reads
//! anything else.
//!
//! A `Replicated` database and ClickHouse Cloud take the statements a single server takes
//! (the database runs each on every replica; the cloud's storage is replicated), so their
//! plans and builds are the single server's once the database is known to be one. The
//! `on_cluster` and `sharded` topologies need statements of their own in every step of a
//! build (`ON CLUSTER`, local and `Distributed` tables, replay per shard): `stb plan`
//! shows them ([`stb_plan::cluster`]), over the shards the servers list; a build, a
//! virtual deployment and every other command that would change the cluster is refused
//! rather than run with a connection to one server.

use stb_ddl::cluster::{Cluster, Topology};
use stb_plan::cluster::{ClusterTarget, Shard};
use stb_project::Project;
use stb_warehouse::Client;

use crate::error::{EngineError, ErrorKind};

/// A topology the planner does not write statements for yet.
pub const UNSUPPORTED_CODE: &str = "STB-CLUSTER-001";
/// A `replicated` target whose database is not a `Replicated` database.
pub const NOT_REPLICATED_CODE: &str = "STB-CLUSTER-002";
/// An `on_cluster` or `sharded` target whose cluster the server does not know.
pub const UNKNOWN_CLUSTER_CODE: &str = "STB-CLUSTER-003";

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

/// What a command may do on an `on_cluster` or `sharded` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Show a direct plan (`stb plan`): reads only.
    ShowPlan,
    /// Anything else: builds, virtual deployments, promotions, repairs.
    Change,
}

/// Refuses work on a target whose topology stb cannot run statements on (`on_cluster`,
/// `sharded`): every command that connects asks this first, so none runs single-server
/// DDL on one server of such a cluster; `stb plan` may show a direct plan. Reads nothing.
///
/// # Errors
/// [`UNSUPPORTED_CODE`].
pub fn supported(project: &Project, work: Work) -> Result<(), EngineError> {
    let Some(cluster) = &project.cluster else {
        return Ok(());
    };
    if !cluster.topology.names_cluster() || work == Work::ShowPlan {
        return Ok(());
    }
    Err(EngineError::new(
        UNSUPPORTED_CODE,
        format!(
            "target '{}' is on the cluster '{}' with the {} topology{}, which stb can plan (stb plan shows the statements per shard) but cannot build or change yet",
            project.target,
            cluster.name,
            cluster.topology.as_str(),
            configured_at(project)
        ),
        "`stb plan` shows what a build would run on the cluster, and docs/clusters.md what is not there yet; a Replicated database (topology = \"replicated\") or ClickHouse Cloud (topology = \"cloud\") can be planned and built today. Nothing was changed",
    ))
}

/// Refuses a plan of `project`'s target on `database` that its cluster cannot have, and
/// reads the shards of an `on_cluster` or `sharded` target's cluster, which the plan's
/// statements are written for. `virtual_scope`: the plan builds a virtual deployment
/// (not planned on such clusters yet).
///
/// # Errors
/// [`UNSUPPORTED_CODE`] for a build or a virtual deployment on `on_cluster` and
/// `sharded`; [`UNKNOWN_CLUSTER_CODE`] when the server lists no such cluster;
/// [`NOT_REPLICATED_CODE`] for a `replicated` target whose database is missing or of
/// another engine; the warehouse's error when the server cannot be read.
pub fn check_target(
    project: &Project,
    client: &Client,
    database: &str,
    work: Work,
    virtual_scope: bool,
) -> Result<Option<ClusterTarget>, EngineError> {
    let Some(cluster) = &project.cluster else {
        return Ok(None);
    };
    if cluster.topology.names_cluster() {
        supported(project, work)?;
        if virtual_scope {
            return Err(EngineError::new(
                UNSUPPORTED_CODE,
                format!(
                    "the scope holds virtual pipelines, and target '{}' is on the {} cluster '{}'{}: stb does not plan virtual deployments on such a cluster yet",
                    project.target,
                    cluster.topology.as_str(),
                    cluster.name,
                    configured_at(project)
                ),
                "plan the direct pipelines (--select pipeline:<name>); docs/clusters.md says what a cluster plan covers. Nothing was changed",
            ));
        }
        return shards(project, client, &cluster.cluster()).map(Some);
    }
    if cluster.topology != Topology::ReplicatedDatabase {
        return Ok(None);
    }
    let rows = client
        .query(&format!(
            "SELECT engine FROM system.databases WHERE name = {}",
            stb_ddl::string_literal(database)
        ))
        .map_err(|error| EngineError::from(&error))?;
    let engine = rows.text(0, "engine");
    if engine.as_deref() == Some("Replicated") {
        return Ok(None);
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

/// `cluster` with its shards and their replicas, as the connected server's
/// `system.clusters` lists them (the servers' `<remote_servers>`).
///
/// # Errors
/// [`UNKNOWN_CLUSTER_CODE`] when the server lists none of that name; the warehouse's
/// error when it cannot be read.
fn shards(
    project: &Project,
    client: &Client,
    cluster: &Cluster,
) -> Result<ClusterTarget, EngineError> {
    let rows = client
        .query(&format!(
            "SELECT toString(shard_num) AS shard, host_name, toString(port) AS port \
             FROM system.clusters WHERE cluster = {} ORDER BY shard_num, replica_num",
            stb_ddl::string_literal(&cluster.name)
        ))
        .map_err(|error| EngineError::from(&error))?;
    let mut shards: Vec<Shard> = Vec::new();
    for row in 0..rows.data.len() {
        let shard = rows.text(row, "shard").unwrap_or_default();
        let number = shard.parse::<u32>().map_err(|_| {
            EngineError::new(
                UNKNOWN_CLUSTER_CODE,
                format!(
                    "the server lists a shard '{shard}' of cluster '{}' that is not a number",
                    cluster.name
                ),
                "check the servers' <remote_servers> configuration; nothing was changed",
            )
        })?;
        let replica = format!(
            "{}:{}",
            rows.text(row, "host_name").unwrap_or_default(),
            rows.text(row, "port").unwrap_or_default()
        );
        match shards.last_mut() {
            Some(shard) if shard.number == number => shard.replicas.push(replica),
            _ => shards.push(Shard {
                number,
                replicas: vec![replica],
            }),
        }
    }
    if shards.is_empty() {
        return Err(EngineError::new(
            UNKNOWN_CLUSTER_CODE,
            format!(
                "target '{}' is on the cluster '{}'{}, which the server does not list in system.clusters",
                project.target,
                cluster.name,
                configured_at(project)
            ),
            "name a cluster of the servers' <remote_servers> configuration (SELECT DISTINCT cluster FROM system.clusters lists them); nothing was changed",
        )
        .of_kind(ErrorKind::Conflict));
    }
    Ok(ClusterTarget {
        cluster: cluster.clone(),
        shards,
    })
}
