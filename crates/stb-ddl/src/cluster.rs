//! The same objects on a ClickHouse cluster: one statement per object and topology, from
//! the single-server types of this crate.
//!
//! - [`Topology::ReplicatedDatabase`] and [`Topology::Cloud`]: the statements a single
//!   server gets. A `Replicated` database runs each DDL statement on every replica and
//!   makes `MergeTree`-family tables replicated itself; ClickHouse Cloud stores every table
//!   replicated (`SharedMergeTree`).
//! - [`Topology::OnCluster`]: every statement `ON CLUSTER <name>`, `MergeTree`-family
//!   engines in their `Replicated` form, with a path and replica name made of macros.
//! - [`Topology::Sharded`]: [`Topology::OnCluster`], and each table split in two: its rows
//!   in `<name>_local` on every shard, and `<name>` a `Distributed` table over them that
//!   places each inserted row by the model's sharding key. Materialized views write
//!   through the `Distributed` table (so a row reaches the shard its key names, where an
//!   aggregate merges it with the rows of the same key) and read the local rows of the
//!   shard they run on.

use std::fmt::Write as _;

use crate::{
    Audience, KafkaTable, MaterializedView, QualifiedName, Table, View, identifier, string_literal,
};

/// Where a replicated table keeps its coordination state by default: ClickHouse's own
/// `default_replica_path`. `{uuid}` is the table's identity, which `ON CLUSTER` and a
/// `Replicated` database give every replica alike; unlike `{database}/{table}` it follows
/// the table through `EXCHANGE TABLES` and `RENAME` (a build swaps tables), and a table
/// created again after a drop never meets the state of the dropped one.
pub const DEFAULT_ZOOKEEPER_PATH: &str = "/clickhouse/tables/{uuid}/{shard}";
/// The replica's name, from each server's `<macros>`.
pub const DEFAULT_REPLICA: &str = "{replica}";
/// What a sharded table's local part is called: `<name>_local`.
pub const LOCAL_SUFFIX: &str = "_local";

/// The `MergeTree` family: the engines that have a `Replicated` form.
const REPLICABLE: &[&str] = &[
    "MergeTree",
    "ReplacingMergeTree",
    "SummingMergeTree",
    "AggregatingMergeTree",
    "CollapsingMergeTree",
    "VersionedCollapsingMergeTree",
    "GraphiteMergeTree",
    "CoalescingMergeTree",
];

/// How a target spreads its objects over a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    ReplicatedDatabase,
    OnCluster,
    Sharded,
    Cloud,
}

impl Topology {
    /// The word a project file uses for it (`[targets.<name>.cluster] topology`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReplicatedDatabase => "replicated",
            Self::OnCluster => "on_cluster",
            Self::Sharded => "sharded",
            Self::Cloud => "cloud",
        }
    }

    /// The topology a project file names, if any.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        [
            Self::ReplicatedDatabase,
            Self::OnCluster,
            Self::Sharded,
            Self::Cloud,
        ]
        .into_iter()
        .find(|t| t.as_str() == word)
    }

    /// Whether statements name the cluster (`ON CLUSTER`), which then needs a name.
    #[must_use]
    pub fn names_cluster(self) -> bool {
        matches!(self, Self::OnCluster | Self::Sharded)
    }
}

/// A target's cluster, as the DDL needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub topology: Topology,
    /// The cluster's name in the servers' `<remote_servers>`; used when
    /// [`Topology::names_cluster`].
    pub name: String,
    /// A replicated table's coordination path ([`DEFAULT_ZOOKEEPER_PATH`]).
    pub zookeeper_path: String,
    /// A replicated table's replica name ([`DEFAULT_REPLICA`]).
    pub replica: String,
}

/// Why an object cannot be placed on a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterError {
    /// An engine outside the `MergeTree` family: it has no replicated form.
    NotReplicable { engine: String },
    /// An engine expression that is not a name with one argument list.
    Unreadable { engine: String },
    /// A replicated engine written with a coordination path that more than one table
    /// would share (no `{uuid}` or `{database}` and `{table}`; no `{shard}` when sharded).
    SharedPath { path: String },
    /// A sharded table without a key that says which shard a row belongs to.
    MissingShardingKey,
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotReplicable { engine } => write!(
                f,
                "engine {engine} has no replicated form: only MergeTree-family engines are kept alike on every replica"
            ),
            Self::Unreadable { engine } => write!(
                f,
                "engine {engine} is not a name with one list of arguments"
            ),
            Self::SharedPath { path } => write!(
                f,
                "the coordination path '{path}' would be shared by more than one table"
            ),
            Self::MissingShardingKey => {
                f.write_str("a table on a sharded cluster needs a sharding key")
            }
        }
    }
}

/// An engine expression split into its name and its arguments (`None` without
/// parentheses); `None` when it is not a name followed by at most one argument list
/// (text after the list's closing parenthesis, an unclosed list, a name with spaces).
fn split_engine(engine: &str) -> Option<(&str, Option<&str>)> {
    let engine = engine.trim();
    let Some(open) = engine.find('(') else {
        return (!engine.is_empty() && !engine.contains(char::is_whitespace))
            .then_some((engine, None));
    };
    let name = engine[..open].trim_end();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let (mut depth, mut quoted, mut escaped) = (0_usize, false, false);
    for (at, c) in engine[open..].char_indices() {
        if quoted {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '\'') => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '\'' => quoted = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    let close = open + at;
                    return engine[close + 1..]
                        .trim()
                        .is_empty()
                        .then(|| (name, Some(engine[open + 1..close].trim())));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a replicated table's coordination `path` names one table only: it holds
/// `{uuid}`, or both `{database}` and `{table}`, and (on a sharded cluster) `{shard}`.
#[must_use]
pub fn path_is_unique(path: &str, sharded: bool) -> bool {
    (path.contains("{uuid}") || (path.contains("{database}") && path.contains("{table}")))
        && (!sharded || path.contains("{shard}"))
}

/// The first argument of an argument list when it is a string literal (a replicated
/// engine's coordination path).
fn first_string_argument(arguments: &str) -> Option<&str> {
    let rest = arguments.trim_start().strip_prefix('\'')?;
    rest.find('\'').map(|end| &rest[..end])
}

impl Cluster {
    /// A cluster of `topology` named `name` with the default path and replica.
    #[must_use]
    pub fn new(topology: Topology, name: &str) -> Self {
        Self {
            topology,
            name: name.to_owned(),
            zookeeper_path: DEFAULT_ZOOKEEPER_PATH.to_owned(),
            replica: DEFAULT_REPLICA.to_owned(),
        }
    }

    /// ` ON CLUSTER <name>` when the topology names the cluster, else nothing.
    #[must_use]
    pub fn on_cluster(&self) -> String {
        if self.topology.names_cluster() {
            format!(" ON CLUSTER {}", identifier(&self.name))
        } else {
            String::new()
        }
    }

    /// `engine` as this topology stores it: the `Replicated` form where the statements
    /// name the cluster, as written elsewhere. An engine outside the `MergeTree` family is
    /// refused in every topology (a `Replicated` database and the cloud would keep its
    /// rows on one replica).
    ///
    /// # Errors
    /// [`ClusterError::NotReplicable`] for an engine outside the family,
    /// [`ClusterError::Unreadable`] for one that is not a name and an argument list, and
    /// [`ClusterError::SharedPath`] for a replicated engine whose written path more than
    /// one table would share.
    pub fn engine(&self, engine: &str) -> Result<String, ClusterError> {
        let unreadable = || ClusterError::Unreadable {
            engine: engine.trim().to_owned(),
        };
        let (name, arguments) = split_engine(engine).ok_or_else(unreadable)?;
        let base = name.strip_prefix("Replicated").unwrap_or(name);
        let base = base.strip_prefix("Shared").unwrap_or(base);
        if !REPLICABLE.contains(&base) {
            return Err(ClusterError::NotReplicable {
                engine: engine.trim().to_owned(),
            });
        }
        if let Some(path) = arguments
            .filter(|_| name != base)
            .and_then(first_string_argument)
            && !path_is_unique(path, self.topology == Topology::Sharded)
        {
            // The author's own path: a build's copy of the table would share it.
            return Err(ClusterError::SharedPath {
                path: path.to_owned(),
            });
        }
        if !self.topology.names_cluster() || name != base {
            // Already replicated (or shared) as the author wrote it, or replicated by the
            // database or the cloud.
            return Ok(engine.trim().to_owned());
        }
        let mut parts = vec![
            string_literal(&self.zookeeper_path),
            string_literal(&self.replica),
        ];
        parts.extend(arguments.filter(|a| !a.is_empty()).map(str::to_owned));
        Ok(format!("Replicated{base}({})", parts.join(", ")))
    }

    /// Where a table's rows live: `<name>_local` on a sharded cluster, else the table.
    #[must_use]
    pub fn storage_name(&self, name: &QualifiedName) -> QualifiedName {
        if self.topology == Topology::Sharded {
            QualifiedName::new(&name.database, &format!("{}{LOCAL_SUFFIX}", name.name))
        } else {
            name.clone()
        }
    }

    /// The statements that create `table`, in order: on a sharded cluster its local part
    /// and then the `Distributed` table over it (placing rows by `sharding_key`, which a
    /// table written only on the shard that holds its rows, a landing, goes without).
    ///
    /// # Errors
    /// The engine cannot be replicated, or a sharded table that rows are inserted into
    /// through its `Distributed` table has no sharding key.
    pub fn create_table(
        &self,
        table: &Table,
        sharding_key: Option<&str>,
        placement: Placement,
    ) -> Result<Vec<String>, ClusterError> {
        self.create_table_with(Create::Always, table, sharding_key, placement)
    }

    /// [`Self::create_table`] with `IF NOT EXISTS`: a build creates a missing landing and
    /// never replaces one.
    ///
    /// # Errors
    /// As [`Self::create_table`].
    pub fn create_table_if_not_exists(
        &self,
        table: &Table,
        sharding_key: Option<&str>,
        placement: Placement,
    ) -> Result<Vec<String>, ClusterError> {
        self.create_table_with(Create::IfNotExists, table, sharding_key, placement)
    }

    fn create_table_with(
        &self,
        create: Create,
        table: &Table,
        sharding_key: Option<&str>,
        placement: Placement,
    ) -> Result<Vec<String>, ClusterError> {
        let (engine, key) = self.table_storage(&table.engine, sharding_key, placement)?;
        let storage = Table {
            name: self.storage_name(&table.name),
            engine,
            ..table.clone()
        };
        let mut statements = vec![storage.render_named(
            create.table(),
            &format!("{}{}", storage.name, self.on_cluster()),
        )];
        if self.topology == Topology::Sharded {
            statements.push(self.distributed(create, table, &storage.name, key));
        }
        Ok(statements)
    }

    /// What [`Self::create_table`] stores a table with, checked without writing any DDL:
    /// the engine as this topology stores it and, on a sharded cluster, the key its
    /// `Distributed` table places rows by (none for a table written where it is read).
    ///
    /// # Errors
    /// As [`Self::create_table`].
    pub fn table_storage<'k>(
        &self,
        engine: &str,
        sharding_key: Option<&'k str>,
        placement: Placement,
    ) -> Result<(String, Option<&'k str>), ClusterError> {
        let engine = self.engine(engine)?;
        if self.topology != Topology::Sharded {
            return Ok((engine, None));
        }
        let key = match (placement, sharding_key.map(str::trim)) {
            (_, Some(key)) if !key.is_empty() => Some(key),
            (Placement::ByKey, _) => return Err(ClusterError::MissingShardingKey),
            (Placement::WhereWritten, _) => None,
        };
        Ok((engine, key))
    }

    /// `CREATE TABLE <name> ON CLUSTER ... ENGINE = Distributed(...)` over `local`.
    fn distributed(
        &self,
        create: Create,
        table: &Table,
        local: &QualifiedName,
        key: Option<&str>,
    ) -> String {
        let mut text = format!("{} {}{} (\n", create.table(), table.name, self.on_cluster());
        text.push_str(&crate::column_lines(&table.columns));
        let _ = write!(
            text,
            "\n) ENGINE = Distributed({}, {}, {}{})",
            string_literal(&self.name),
            string_literal(&local.database),
            string_literal(&local.name),
            key.map(|k| format!(", {k}")).unwrap_or_default()
        );
        text
    }

    /// A materialized view on every server of the cluster, writing into its target (the
    /// `Distributed` table on a sharded cluster, which places each row by its key). Its
    /// query is the caller's: on a sharded cluster it reads the local parts of its
    /// upstream tables, the rows of the shard it runs on.
    #[must_use]
    pub fn create_materialized_view(&self, view: &MaterializedView) -> String {
        view.render_named(
            "CREATE MATERIALIZED VIEW",
            &format!("{}{}", view.name, self.on_cluster()),
        )
    }

    /// A landing's materialized view: it writes the rows its server consumed into the
    /// local part of the landing (each server of one consumer group lands what it reads).
    #[must_use]
    pub fn create_landing_view(&self, view: &MaterializedView) -> String {
        self.create_materialized_view(&MaterializedView {
            target: self.storage_name(&view.target),
            ..view.clone()
        })
    }

    /// [`Self::create_landing_view`] with `IF NOT EXISTS`: what resumes a paused landing.
    #[must_use]
    pub fn create_landing_view_if_not_exists(&self, view: &MaterializedView) -> String {
        MaterializedView {
            target: self.storage_name(&view.target),
            ..view.clone()
        }
        .render_named(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS",
            &format!("{}{}", view.name, self.on_cluster()),
        )
    }

    /// A plain view on every server.
    #[must_use]
    pub fn create_view(&self, view: &View) -> String {
        format!(
            "CREATE VIEW {}{} AS\n{}",
            view.name,
            self.on_cluster(),
            view.query
        )
    }

    /// A stable view pointed at another relation (`CREATE OR REPLACE VIEW`), on every
    /// server: a virtual deployment's binding.
    #[must_use]
    pub fn bind_view(&self, view: &QualifiedName, target: &QualifiedName) -> String {
        format!(
            "CREATE OR REPLACE VIEW {view}{} AS\nSELECT * FROM {target}",
            self.on_cluster()
        )
    }

    /// A Kafka table on every server, all in the table's one consumer group: the broker
    /// gives each server some of the topic's partitions, so each message is read once
    /// across the cluster.
    #[must_use]
    pub fn create_kafka_table(&self, table: &KafkaTable, audience: Audience) -> String {
        table.render_named(
            audience,
            "CREATE TABLE",
            &format!("{}{}", table.name, self.on_cluster()),
        )
    }

    /// [`Self::create_kafka_table`] with `IF NOT EXISTS`.
    #[must_use]
    pub fn create_kafka_table_if_not_exists(
        &self,
        table: &KafkaTable,
        audience: Audience,
    ) -> String {
        table.render_named(
            audience,
            Create::IfNotExists.table(),
            &format!("{}{}", table.name, self.on_cluster()),
        )
    }

    /// The target database on every server (a `Replicated` database or the cloud: the
    /// server's own statement).
    #[must_use]
    pub fn create_database(&self, database: &str) -> String {
        format!(
            "CREATE DATABASE IF NOT EXISTS {}{}",
            identifier(database),
            self.on_cluster()
        )
    }

    /// A table renamed on every server; on a sharded cluster its local part with it, to
    /// the new name's local part. (The renamed `Distributed` table still names the old
    /// local part: a table is renamed only to be set aside, and is renamed back or
    /// dropped, never read, under its new name.)
    #[must_use]
    pub fn rename(&self, from: &QualifiedName, to: &QualifiedName) -> String {
        let mut pairs = vec![format!("{from} TO {to}")];
        if self.topology == Topology::Sharded {
            pairs.push(format!(
                "{} TO {}",
                self.storage_name(from),
                self.storage_name(to)
            ));
        }
        format!("RENAME TABLE {}{}", pairs.join(", "), self.on_cluster())
    }

    /// Waits on the server it runs on until its replica of `table`'s rows has every part
    /// the other replicas of its shard have: run before a boundary is read there, so
    /// rows another replica consumed are not missed.
    /// (`LIGHTWEIGHT`: it waits for the parts to arrive, not for merges.)
    #[must_use]
    pub fn sync_replica(&self, table: &QualifiedName) -> String {
        format!(
            "SYSTEM SYNC REPLICA {} LIGHTWEIGHT",
            self.storage_name(table)
        )
    }

    /// On a sharded cluster, sends on every server the rows waiting in `table`'s
    /// `Distributed` queue to their shards (an insert through it returns before they are
    /// there, unless `distributed_foreground_insert` is set); `None` elsewhere.
    #[must_use]
    pub fn flush_distributed(&self, table: &QualifiedName) -> Option<String> {
        (self.topology == Topology::Sharded)
            .then(|| format!("SYSTEM FLUSH DISTRIBUTED {table}{}", self.on_cluster()))
    }

    /// Two tables' rows swapped on every server: on a sharded cluster their local parts
    /// (each `Distributed` table keeps reading `<its name>_local`, which now holds the
    /// other's rows).
    #[must_use]
    pub fn exchange(&self, a: &QualifiedName, b: &QualifiedName) -> String {
        format!(
            "EXCHANGE TABLES {} AND {}{}",
            self.storage_name(a),
            self.storage_name(b),
            self.on_cluster()
        )
    }

    /// A relation dropped on every server (`SYNC`: its replicated state goes with it); on
    /// a sharded cluster a table's `Distributed` table and then its local part.
    #[must_use]
    pub fn drop(&self, kind: DropKind, name: &QualifiedName) -> Vec<String> {
        let statement = |kind: &str, name: &QualifiedName| {
            format!("DROP {kind} IF EXISTS {name}{} SYNC", self.on_cluster())
        };
        match kind {
            DropKind::View => vec![statement("VIEW", name)],
            DropKind::Whole => vec![statement("TABLE", name)],
            DropKind::Table if self.topology == Topology::Sharded => vec![
                statement("TABLE", name),
                statement("TABLE", &self.storage_name(name)),
            ],
            DropKind::Table => vec![statement("TABLE", name)],
        }
    }
}

/// Whether a `CREATE` fails on an existing object or leaves it as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    Always,
    IfNotExists,
}

impl Create {
    /// `CREATE TABLE`, with `IF NOT EXISTS` when asked.
    fn table(self) -> &'static str {
        match self {
            Self::Always => "CREATE TABLE",
            Self::IfNotExists => "CREATE TABLE IF NOT EXISTS",
        }
    }
}

/// How the rows of a sharded table reach their shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Inserted through the `Distributed` table, which places them by the sharding key.
    ByKey,
    /// Written on the shard that holds them (a landing: what that server consumed).
    WhereWritten,
}

/// What [`Cluster::drop`] drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// A table, with its local part on a sharded cluster.
    Table,
    View,
    /// A table every server keeps whole, never split into a local part (a Kafka table:
    /// each server's consumer of the one group).
    Whole,
}

#[cfg(test)]
mod tests;
