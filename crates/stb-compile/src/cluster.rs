//! A target on a cluster: every table model must be one the cluster can hold, offline.

use stb_ddl::cluster::{ClusterError, Placement};
use stb_diagnostics::Diagnostic;
use stb_project::cluster::ClusterConfig;

use crate::codes;
use crate::model::{AnalysedModel, CompiledModel, at};

/// The problems of one compiled model on `cluster`: an engine that cannot be replicated,
/// or (sharded) no sharding key from the model or the cluster.
pub(crate) fn check(
    cluster: &ClusterConfig,
    analysed: &AnalysedModel<'_>,
    compiled: &CompiledModel,
) -> Option<Diagnostic> {
    let table = compiled.table.as_ref()?;
    let model = analysed.model;
    let key = analysed
        .header
        .sharding_key
        .as_deref()
        .or(cluster.sharding_key.as_deref());
    let error = cluster
        .cluster()
        .create_table(table, key, Placement::ByKey)
        .err()?;
    let topology = cluster.topology.as_str();
    let (message, hint, offset) = match error {
        ClusterError::NotReplicable { engine } => (
            format!(
                "Model '{}' uses engine {engine}, which the {topology} cluster cannot replicate: its rows would live on one server",
                model.name
            ),
            "use a MergeTree-family engine (MergeTree, ReplacingMergeTree, AggregatingMergeTree, ...)".to_owned(),
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
