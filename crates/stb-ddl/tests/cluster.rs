//! Cluster DDL on the real engine, as far as this machine can host it.
//!
//! The local engine (chDB) cannot be a replica: it has no Keeper, never starts the
//! interserver endpoint, and refuses `ON CLUSTER` ("Replicated DDL queries are
//! disabled"); docs/clusters.md says what was tried. So every statement of every topology
//! is parsed by the engine (`formatQuery` refuses what it cannot parse), and the sharded
//! topology's statements run on the engine's own one-shard cluster (`stb_local`, from the
//! local stack's configuration) in the forms it accepts: without `ON CLUSTER`, and with
//! each replicated engine in its plain form. Rows then go through the `Distributed` tables
//! and materialized views as they would on a cluster of one shard.

use stb_ddl::cluster::{Cluster, DropKind, Placement, Topology};
use stb_ddl::{Column, MaterializedView, QualifiedName, Table, View, string_literal};
use stb_test_support::{TestDatabase, execute};

const CLUSTER: &str = "stb_local";

fn table(database: &str, name: &str, engine: &str) -> Table {
    Table {
        name: QualifiedName::new(database, name),
        columns: vec![
            Column::new("customer_id", "UInt64"),
            Column::new("amount", "UInt64"),
        ],
        engine: engine.to_owned(),
        order_by: vec!["customer_id".to_owned()],
        partition_by: None,
        ttl: None,
        settings: Vec::new(),
    }
}

/// A model chain as `cluster` creates it: orders (a plain table), totals (a summing table
/// fed by a materialized view over the orders on the same shard), a view over the totals.
fn chain(cluster: &Cluster, database: &str) -> Vec<String> {
    let key = Some("customer_id");
    let mut statements = Vec::new();
    for (name, engine) in [
        ("tbl__orders", "MergeTree()"),
        ("tbl__totals", "SummingMergeTree(amount)"),
    ] {
        statements.extend(
            cluster
                .create_table(&table(database, name, engine), key, Placement::ByKey)
                .expect("a MergeTree-family table"),
        );
    }
    let orders = cluster.storage_name(&QualifiedName::new(database, "tbl__orders"));
    statements.push(cluster.create_materialized_view(&MaterializedView {
        name: QualifiedName::new(database, "mv__totals"),
        target: QualifiedName::new(database, "tbl__totals"),
        query: format!("SELECT customer_id, amount FROM {orders}"),
        refresh: None,
    }));
    statements.push(cluster.create_view(&View {
        name: QualifiedName::new(database, "view__revenue"),
        query: format!("SELECT sum(amount) AS revenue FROM {database}.tbl__totals"),
    }));
    statements
}

/// `statement` in the form this single engine accepts (see
/// [`stb_test_support::on_one_server`]).
fn on_this_engine(statement: &str) -> String {
    stb_test_support::on_one_server(statement, CLUSTER)
}

#[test]
fn every_topology_s_statements_parse_on_the_engine() {
    let database = "shop";
    for topology in [
        Topology::ReplicatedDatabase,
        Topology::OnCluster,
        Topology::Sharded,
        Topology::Cloud,
    ] {
        let cluster = Cluster::new(topology, CLUSTER);
        let mut statements = chain(&cluster, database);
        let name = QualifiedName::new(database, "tbl__totals");
        let copy = QualifiedName::new(database, "tbl__totals__20261205T000000Z_a1b2c3");
        statements.push(cluster.bind_view(&name, &copy));
        statements.push(cluster.exchange(&name, &copy));
        statements.extend(cluster.drop(DropKind::Table, &copy));
        statements.extend(cluster.drop(DropKind::View, &name));
        // What a build runs besides creating the models' objects.
        statements.push(cluster.create_database(database));
        statements.push(cluster.rename(&name, &copy));
        statements.extend(
            cluster
                .create_table_if_not_exists(
                    &table(database, "raw__orders", "MergeTree()"),
                    None,
                    Placement::WhereWritten,
                )
                .expect("a landing"),
        );
        statements.push(
            cluster.create_landing_view_if_not_exists(&MaterializedView {
                name: QualifiedName::new(database, "mv__orders"),
                target: QualifiedName::new(database, "raw__orders"),
                query: format!(
                    "SELECT 1 AS customer_id, 2 AS amount FROM {database}.kafka__orders"
                ),
                refresh: None,
            }),
        );
        // Runs on one server of a shard: no ON CLUSTER.
        let sync = cluster.sync_replica(&name);
        let formatted = execute(&format!(
            "SELECT formatQuery({}) FORMAT TSVRaw",
            string_literal(&sync)
        ));
        assert!(formatted.starts_with("SYSTEM SYNC REPLICA"), "{formatted}");
        if let Some(flush) = cluster.flush_distributed(&name) {
            statements.push(flush);
        }
        for statement in statements {
            let formatted = execute(&format!(
                "SELECT formatQuery({}) FORMAT TSVRaw",
                string_literal(&statement)
            ));
            assert!(
                !formatted.trim().is_empty(),
                "{topology:?}: {statement} read as nothing"
            );
            if topology.names_cluster() {
                assert!(
                    formatted.contains(&format!("ON CLUSTER {CLUSTER}")),
                    "{topology:?}: the engine read {formatted} from {statement}"
                );
            }
        }
    }
}

#[test]
fn a_sharded_chain_places_rows_through_its_distributed_tables() {
    let db = TestDatabase::create("cluster");
    let cluster = Cluster::new(Topology::Sharded, CLUSTER);
    for statement in chain(&cluster, &db.name) {
        execute(&on_this_engine(&statement));
    }
    // Inserted through the orders' Distributed table: each row goes to the shard its key
    // names (the only one here), where the view sums it into the totals' shard.
    execute(&format!(
        "INSERT INTO {}.tbl__orders (customer_id, amount) SELECT number % 3, 10 FROM numbers(30) SETTINGS distributed_foreground_insert = 1",
        db.name
    ));
    assert_eq!(
        execute(&format!(
            "SELECT customer_id, sum(amount), any(_shard_num) FROM {}.tbl__totals GROUP BY customer_id ORDER BY customer_id",
            db.name
        )),
        "0\t100\t1\n1\t100\t1\n2\t100\t1\n"
    );
    assert_eq!(
        execute(&format!(
            "SELECT count() FROM {}.tbl__orders_local",
            db.name
        )),
        "30\n",
        "the rows live in the local part"
    );
    assert_eq!(
        execute(&format!("SELECT revenue FROM {}.view__revenue", db.name)),
        "300\n"
    );
    let engines = execute(&format!(
        "SELECT name, engine FROM system.tables WHERE database = '{}' ORDER BY name",
        db.name
    ));
    assert_eq!(
        engines,
        "mv__totals\tMaterializedView\ntbl__orders\tDistributed\ntbl__orders_local\tMergeTree\ntbl__totals\tDistributed\ntbl__totals_local\tSummingMergeTree\nview__revenue\tView\n"
    );
}

#[test]
fn what_the_engine_cannot_host_fails_as_the_docs_say() {
    // Recorded so that docs/clusters.md is corrected the day the local engine can be a
    // replica: then these run, and the test suite should run them for real.
    let db = TestDatabase::create("cluster_refused");
    let cluster = Cluster::new(Topology::OnCluster, CLUSTER);
    let statements = cluster
        .create_table(
            &table(&db.name, "tbl__orders", "MergeTree()"),
            None,
            Placement::ByKey,
        )
        .expect("a table");
    let refused = stb_test_support::http()
        .post(&stb_test_support::stack().clickhouse_url)
        .body(statements[0].clone())
        .send()
        .expect("an answer");
    let status = refused.status();
    let body = refused.text().unwrap_or_default();
    assert!(
        !status.is_success() && body.contains("QUERY_IS_PROHIBITED"),
        "{status}: {body}"
    );
}
