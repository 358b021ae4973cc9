use super::{Cluster, ClusterError, DropKind, Placement, Topology};
use crate::{
    Audience, Column, KafkaSettings, MaterializedView, QualifiedName, Table, View, managed_source,
};

const TOPOLOGIES: [Topology; 4] = [
    Topology::ReplicatedDatabase,
    Topology::OnCluster,
    Topology::Sharded,
    Topology::Cloud,
];

fn totals(engine: &str) -> Table {
    Table {
        name: QualifiedName::new("shop", "tbl__order_totals"),
        columns: vec![
            Column::new("customer_id", "String"),
            Column::new("amount", "Decimal(18, 4)"),
            Column::new("updated_at", "DateTime64(3)"),
        ],
        engine: engine.to_owned(),
        order_by: vec!["customer_id".to_owned()],
        partition_by: Some("toYYYYMM(updated_at)".to_owned()),
        ttl: None,
        settings: vec![("index_granularity".to_owned(), "8192".to_owned())],
    }
}

/// The landing of a Kafka source `orders`.
fn orders() -> crate::ManagedSource {
    managed_source(
        "shop",
        "orders",
        KafkaSettings {
            broker_list: "kafka:9092".to_owned(),
            topic: "shop.orders".to_owned(),
            group: "streambuild_shop_orders".to_owned(),
            format: "JSONAsString".to_owned(),
            settings: Vec::new(),
            hidden: Vec::new(),
        },
        None,
    )
}

/// Every object a project creates, as `topology` creates it, one statement after another.
fn everything(topology: Topology) -> String {
    let cluster = Cluster::new(topology, "analytics");
    let source = orders();
    let mut statements = vec![cluster.create_kafka_table(&source.kafka, Audience::Artifact)];
    statements.extend(
        cluster
            .create_table(&source.raw, None, Placement::WhereWritten)
            .expect("a landing"),
    );
    statements.push(cluster.create_landing_view(&source.landing));
    for engine in [
        "MergeTree()",
        "ReplacingMergeTree(updated_at)",
        "ReplacingMergeTree(updated_at, is_deleted)",
        "AggregatingMergeTree",
        "CollapsingMergeTree(sign)",
        "VersionedCollapsingMergeTree(sign, version)",
        "GraphiteMergeTree('graphite_rollup')",
        "CoalescingMergeTree",
        "ReplicatedSummingMergeTree('/custom/{uuid}/{shard}', '{replica}', amount)",
    ] {
        statements.extend(
            cluster
                .create_table(
                    &totals(engine),
                    Some("cityHash64(customer_id)"),
                    Placement::ByKey,
                )
                .expect(engine),
        );
    }
    statements.push(cluster.create_materialized_view(&MaterializedView {
        name: QualifiedName::new("shop", "mv__order_totals"),
        target: QualifiedName::new("shop", "tbl__order_totals"),
        query:
            "SELECT customer_id, amount, updated_at FROM shop.tbl__orders_clean_local".to_owned(),
        refresh: None,
    }));
    statements.push(cluster.create_view(&View {
        name: QualifiedName::new("shop", "view__revenue"),
        query: "SELECT sum(amount) AS revenue FROM shop.tbl__order_totals".to_owned(),
    }));
    let stable = QualifiedName::new("shop", "tbl__order_totals");
    let copy = QualifiedName::new("shop", "tbl__order_totals__20261205T000000Z_a1b2c3");
    statements.push(cluster.bind_view(&stable, &copy));
    statements.push(cluster.exchange(&stable, &copy));
    statements.extend(cluster.drop(DropKind::Table, &copy));
    statements.extend(cluster.drop(DropKind::View, &QualifiedName::new("shop", "view__revenue")));
    statements.join(";\n\n")
}

#[test]
fn every_object_in_every_topology() {
    for topology in TOPOLOGIES {
        insta::assert_snapshot!(
            format!("cluster_{}", topology.as_str()),
            everything(topology)
        );
    }
}

#[test]
fn engines_outside_the_merge_tree_family_are_refused_in_every_topology() {
    for topology in TOPOLOGIES {
        let cluster = Cluster::new(topology, "analytics");
        for engine in ["Memory", "Log()", "Null", "Join(ANY, LEFT, id)"] {
            assert_eq!(
                cluster.create_table(&totals(engine), Some("rand()"), Placement::ByKey),
                Err(ClusterError::NotReplicable {
                    engine: engine.to_owned()
                }),
                "{engine} on {topology:?}"
            );
        }
    }
}

#[test]
fn a_sharded_table_written_through_its_distributed_table_needs_a_key() {
    let sharded = Cluster::new(Topology::Sharded, "analytics");
    for key in [None, Some(""), Some("  ")] {
        assert_eq!(
            sharded.create_table(&totals("MergeTree"), key, Placement::ByKey),
            Err(ClusterError::MissingShardingKey)
        );
    }
    // Other topologies have one copy of every row per replica: no key is asked for.
    let replicated = Cluster::new(Topology::OnCluster, "analytics");
    assert!(
        replicated
            .create_table(&totals("MergeTree"), None, Placement::ByKey)
            .is_ok()
    );
}

#[test]
fn engine_arguments_follow_the_path_and_replica() {
    let mut cluster = Cluster::new(Topology::OnCluster, "c");
    cluster.zookeeper_path = "/ch/{shard}/{database}/{table}".to_owned();
    cluster.replica = "{replica}-x".to_owned();
    assert_eq!(
        cluster.engine(" VersionedCollapsingMergeTree(sign, version) "),
        Ok("ReplicatedVersionedCollapsingMergeTree('/ch/{shard}/{database}/{table}', '{replica}-x', sign, version)".to_owned())
    );
    assert_eq!(
        cluster.engine("MergeTree()"),
        Ok("ReplicatedMergeTree('/ch/{shard}/{database}/{table}', '{replica}-x')".to_owned())
    );
    assert_eq!(
        cluster.engine("SharedMergeTree"),
        Ok("SharedMergeTree".to_owned()),
        "the author's own form is kept"
    );
    let plain = Cluster::new(Topology::ReplicatedDatabase, "");
    assert_eq!(plain.engine("MergeTree()"), Ok("MergeTree()".to_owned()));
    assert_eq!(plain.on_cluster(), "");
}

#[test]
fn engines_that_do_not_read_as_one_name_and_one_list_are_refused() {
    let cluster = Cluster::new(Topology::OnCluster, "c");
    for engine in [
        "MergeTree() PARTITION BY f(x)",
        "MergeTree(",
        "Replacing MergeTree",
        "",
        "MergeTree() )",
    ] {
        assert_eq!(
            cluster.engine(engine),
            Err(ClusterError::Unreadable {
                engine: engine.trim().to_owned()
            }),
            "{engine:?}"
        );
    }
    // Parentheses and quotes inside the arguments are the arguments'.
    assert_eq!(
        cluster.engine("SummingMergeTree((a, b))"),
        Ok(
            "ReplicatedSummingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', (a, b))"
                .to_owned()
        )
    );
    assert_eq!(
        cluster.engine("GraphiteMergeTree('rollup (x)')"),
        Ok("ReplicatedGraphiteMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', 'rollup (x)')".to_owned())
    );
}

#[test]
fn a_written_path_that_tables_would_share_is_refused() {
    let sharded = Cluster::new(Topology::Sharded, "c");
    for (engine, path) in [
        (
            "ReplicatedMergeTree('/clickhouse/tables/{shard}/orders', '{replica}')",
            "/clickhouse/tables/{shard}/orders",
        ),
        (
            "ReplicatedMergeTree('/clickhouse/tables/{uuid}', '{replica}')",
            "/clickhouse/tables/{uuid}",
        ),
    ] {
        assert_eq!(
            sharded.engine(engine),
            Err(ClusterError::SharedPath {
                path: path.to_owned()
            })
        );
    }
    // One shard: a path with the table's identity is enough.
    let replicated = Cluster::new(Topology::OnCluster, "c");
    assert!(
        replicated
            .engine("ReplicatedMergeTree('/t/{database}/{table}', '{replica}')")
            .is_ok()
    );
    assert!(super::path_is_unique("/t/{uuid}/{shard}", true));
    assert!(!super::path_is_unique("/t/{table}/{shard}", true));
}

#[test]
fn a_sharded_swap_and_drop_reach_the_local_parts() {
    let sharded = Cluster::new(Topology::Sharded, "c");
    let (a, b) = (
        QualifiedName::new("s", "t"),
        QualifiedName::new("s", "t__new"),
    );
    assert_eq!(
        sharded.exchange(&a, &b),
        "EXCHANGE TABLES s.t_local AND s.t__new_local ON CLUSTER c"
    );
    assert_eq!(
        sharded.drop(DropKind::Table, &b),
        [
            "DROP TABLE IF EXISTS s.t__new ON CLUSTER c SYNC",
            "DROP TABLE IF EXISTS s.t__new_local ON CLUSTER c SYNC"
        ]
    );
}

#[test]
fn topologies_read_back_from_their_words() {
    for topology in TOPOLOGIES {
        assert_eq!(Topology::parse(topology.as_str()), Some(topology));
    }
    assert_eq!(Topology::parse("shards"), None);
}

/// What a build runs besides creating objects, and the `IF NOT EXISTS` forms a landing
/// is created and resumed with, as `topology` writes them.
fn build_statements(topology: Topology) -> String {
    let cluster = Cluster::new(topology, "analytics");
    let source = orders();
    let table = QualifiedName::new("shop", "tbl__order_totals");
    let aside = QualifiedName::new("shop", "tbl__order_totals__stb_aside");
    let mut statements = vec![
        cluster.create_database("shop"),
        cluster.rename(&table, &aside),
        cluster.sync_replica(&source.raw.name),
        cluster
            .flush_distributed(&table)
            .unwrap_or_else(|| "-- no Distributed tables".to_owned()),
        cluster.create_kafka_table_if_not_exists(&source.kafka, Audience::Artifact),
    ];
    statements.extend(
        cluster
            .create_table_if_not_exists(&source.raw, None, Placement::WhereWritten)
            .expect("a landing"),
    );
    statements.push(cluster.create_landing_view_if_not_exists(&source.landing));
    statements.join(";\n\n")
}

#[test]
fn what_a_build_runs_in_every_topology() {
    for topology in TOPOLOGIES {
        insta::assert_snapshot!(
            format!("build_{}", topology.as_str()),
            build_statements(topology)
        );
    }
}

#[test]
fn a_sharded_rename_moves_the_local_part_with_the_table() {
    let sharded = Cluster::new(Topology::Sharded, "c");
    let (a, b) = (
        QualifiedName::new("s", "t"),
        QualifiedName::new("s", "t__aside"),
    );
    assert_eq!(
        sharded.rename(&a, &b),
        "RENAME TABLE s.t TO s.t__aside, s.t_local TO s.t__aside_local ON CLUSTER c"
    );
    assert_eq!(
        sharded.sync_replica(&a),
        "SYSTEM SYNC REPLICA s.t_local LIGHTWEIGHT"
    );
    assert_eq!(
        sharded.flush_distributed(&a).as_deref(),
        Some("SYSTEM FLUSH DISTRIBUTED s.t ON CLUSTER c")
    );
    let one_server = Cluster::new(Topology::Cloud, "");
    assert_eq!(one_server.rename(&a, &b), "RENAME TABLE s.t TO s.t__aside");
    assert_eq!(one_server.flush_distributed(&a), None);
    assert_eq!(
        one_server.create_database("s"),
        "CREATE DATABASE IF NOT EXISTS s"
    );
}
