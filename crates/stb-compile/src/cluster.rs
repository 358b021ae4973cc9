//! A target on a cluster: every table model must be one the cluster can hold, offline.

use stb_ddl::cluster::{Cluster, ClusterError, Placement};
use stb_diagnostics::Diagnostic;
use stb_project::cluster::ClusterConfig;

use crate::codes;
use crate::model::{AnalysedModel, CompiledModel, at};

/// The problems of one compiled model on `cluster` (`config`'s, made once per compile):
/// an engine that cannot be replicated, or (sharded) no sharding key from the model or
/// the cluster.
pub(crate) fn check(
    config: &ClusterConfig,
    cluster: &Cluster,
    analysed: &AnalysedModel<'_>,
    compiled: &CompiledModel,
) -> Option<Diagnostic> {
    let table = compiled.table.as_ref()?;
    let model = analysed.model;
    let key = analysed
        .header
        .sharding_key
        .as_deref()
        .or(config.sharding_key.as_deref());
    let error = cluster
        .table_storage(&table.engine, key, Placement::ByKey)
        .err()?;
    let topology = config.topology.as_str();
    let (message, hint, offset) = match error {
        ClusterError::NotReplicable { engine } => (
            format!(
                "Model '{}' uses engine {engine}, which has no replicated form for the {topology} cluster",
                model.name
            ),
            "use a MergeTree-family engine (MergeTree, ReplacingMergeTree, AggregatingMergeTree, ...; names are case-sensitive)".to_owned(),
            analysed.engine_offset,
        ),
        ClusterError::Unreadable { engine } => (
            format!(
                "Model '{}' engine {engine} is not one engine name with one argument list, which a cluster needs to write its replicated form",
                model.name
            ),
            "write the engine alone, as \"ReplacingMergeTree(updated_at)\"; keys and partitions have their own MODEL keys (order_by, partition_by)".to_owned(),
            analysed.engine_offset,
        ),
        ClusterError::SharedPath { path } => (
            format!(
                "Model '{}' engine's coordination path '{path}' would be shared by the build's copies of the table on the {topology} cluster",
                model.name
            ),
            "put {uuid} in the path (or {database} and {table}; and {shard} on a sharded cluster), or leave the path out: the cluster's zookeeper_path is used".to_owned(),
            analysed.engine_offset,
        ),
        ClusterError::MissingShardingKey => (
            format!(
                "Model '{}' has no sharding key, which a table on the sharded cluster needs to place its rows",
                model.name
            ),
            "add sharding_key \"<expression>\" to its MODEL (...) (rows with the same key on one shard: the key an aggregate groups by), or a default sharding_key under [targets.<name>.cluster]".to_owned(),
            analysed.header_offset,
        ),
    };
    Some(Diagnostic::new(codes::CLUSTER, message, hint).at(at(model, offset)))
}
