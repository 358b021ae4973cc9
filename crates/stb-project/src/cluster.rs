//! `[targets.<name>.cluster]`: the ClickHouse cluster a target's objects are spread over.
//!
//! ```toml
//! [targets.prod.cluster]
//! topology = "sharded"          # replicated | on_cluster | sharded | cloud
//! name = "analytics"            # the cluster in the servers' <remote_servers>
//! zookeeper_path = "/clickhouse/tables/{uuid}/{shard}"   # the default
//! replica = "{replica}"         # the default
//! sharding_key = "rand()"       # sharded: for table models that name none
//! ```

use serde::Serialize;
use stb_ddl::cluster::{Cluster, Topology};

use stb_diagnostics::Position;

use crate::codes;
use crate::reader::Reader;
use crate::tree::Node;

const KEYS: &[&str] = &[
    "topology",
    "name",
    "zookeeper_path",
    "replica",
    "sharding_key",
];

/// A target's validated cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterConfig {
    #[serde(skip)]
    pub position: Position,
    #[serde(serialize_with = "topology_word")]
    pub topology: Topology,
    /// Empty unless the topology names the cluster (`on_cluster`, `sharded`).
    pub name: String,
    pub zookeeper_path: String,
    pub replica: String,
    /// The sharding key of a sharded table model that names none (`MODEL (sharding_key
    /// ...)`); without one every such model must name its own.
    pub sharding_key: Option<String>,
}

impl ClusterConfig {
    /// What the DDL needs.
    #[must_use]
    pub fn cluster(&self) -> Cluster {
        Cluster {
            topology: self.topology,
            name: self.name.clone(),
            zookeeper_path: self.zookeeper_path.clone(),
            replica: self.replica.clone(),
        }
    }
}

fn topology_word<S: serde::Serializer>(topology: &Topology, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(topology.as_str())
}

/// A literal, non-empty string setting of the cluster table.
fn literal(reader: &mut Reader<'_>, node: &Node, what: &str) -> Option<String> {
    let text = reader.non_empty_string(node, what)?;
    if text.contains("${") {
        reader.report(
            codes::CONFIG_LITERAL,
            node.position,
            format!("{what} must be literal: the cluster's shape is fixed in the project file"),
            "write the value itself; targets that differ get their own [targets.<name>.cluster]",
        );
        return None;
    }
    Some(text)
}

/// Validates `[targets.<target>.cluster]`: every problem is reported; `None` when any.
pub(crate) fn cluster(reader: &mut Reader<'_>, node: &Node, target: &str) -> Option<ClusterConfig> {
    let what = format!("[targets.{target}.cluster]");
    reader.table(node, &what)?;
    let before = reader.diagnostics.len();
    reader.allowed_keys(node, &what, KEYS);
    let words: Vec<&str> = [
        Topology::ReplicatedDatabase,
        Topology::OnCluster,
        Topology::Sharded,
        Topology::Cloud,
    ]
    .iter()
    .map(|t| t.as_str())
    .collect();
    let topology = match node.get("topology") {
        None => {
            reader.missing(
                node.position,
                &format!("{what} topology"),
                &format!("add topology = one of {}", words.join(", ")),
            );
            None
        }
        Some(value) => literal(reader, value, &format!("{what} topology")).and_then(|word| {
            let topology = Topology::parse(word.trim());
            if topology.is_none() {
                reader.report(
                    codes::CONFIG_VALUE,
                    value.position,
                    format!("{what} topology '{word}' is not one of {}", words.join(", ")),
                    format!(
                        "{}replicated: a Replicated database; on_cluster: ON CLUSTER DDL with replicated engines; sharded: local tables and Distributed tables; cloud: ClickHouse Cloud",
                        stb_diagnostics::suggest::did_you_mean(&word, words.iter().copied())
                    ),
                );
            }
            topology
        }),
    };
    let text = |reader: &mut Reader<'_>, key: &str| {
        node.get(key)
            .and_then(|value| literal(reader, value, &format!("{what} {key}")))
    };
    let name = text(reader, "name");
    let zookeeper_path = text(reader, "zookeeper_path")
        .unwrap_or_else(|| stb_ddl::cluster::DEFAULT_ZOOKEEPER_PATH.to_owned());
    let replica =
        text(reader, "replica").unwrap_or_else(|| stb_ddl::cluster::DEFAULT_REPLICA.to_owned());
    let sharding_key = text(reader, "sharding_key");
    let topology = topology?;
    if topology.names_cluster() && name.is_none() && node.get("name").is_none() {
        reader.missing(
            node.position,
            &format!("{what} name"),
            &format!(
                "the {} topology runs DDL ON CLUSTER: add name = the cluster's name in the servers' <remote_servers>",
                topology.as_str()
            ),
        );
    }
    let at = |key: &str| node.get(key).map_or(node.position, |v| v.position);
    if topology.names_cluster() && !replica.contains('{') {
        reader.report(
            codes::CONFIG_VALUE,
            at("replica"),
            format!("{what} replica '{replica}' would give every server the same replica name"),
            "use a macro each server defines, such as {replica}",
        );
    }
    if topology.names_cluster()
        && !stb_ddl::cluster::path_is_unique(&zookeeper_path, topology == Topology::Sharded)
    {
        reader.report(
            codes::CONFIG_VALUE,
            at("zookeeper_path"),
            format!(
                "{what} zookeeper_path '{zookeeper_path}' does not name one table{}: what it names would share one replicated state",
                if topology == Topology::Sharded {
                    " on one shard"
                } else {
                    ""
                }
            ),
            "put {uuid} in the path (or {database} and {table}), and {shard} on a sharded cluster, as the default /clickhouse/tables/{uuid}/{shard} does",
        );
    }
    // Keys a topology does not use are refused rather than ignored.
    let used: &[&str] = match topology {
        Topology::Sharded => &["name", "zookeeper_path", "replica", "sharding_key"],
        Topology::OnCluster => &["name", "zookeeper_path", "replica"],
        Topology::ReplicatedDatabase | Topology::Cloud => &[],
    };
    for key in ["name", "zookeeper_path", "replica", "sharding_key"] {
        if node.get(key).is_some() && !used.contains(&key) {
            reader.report(
                codes::CONFIG_VALUE,
                at(key),
                format!(
                    "{what} {key} is not used by the {} topology",
                    topology.as_str()
                ),
                if key == "sharding_key" {
                    "remove it, or set topology = \"sharded\""
                } else {
                    "remove it: a Replicated database and ClickHouse Cloud place tables themselves"
                },
            );
        }
    }
    if reader.diagnostics.len() != before {
        return None;
    }
    Some(ClusterConfig {
        position: node.position,
        topology,
        name: if topology.names_cluster() {
            name.unwrap_or_default()
        } else {
            String::new()
        },
        zookeeper_path,
        replica,
        sharding_key,
    })
}
