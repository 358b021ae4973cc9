//! The adapter against the local stack's ClickHouse server.

use stb_test_support::{PrivateClickHouse, TestDatabase, stack};
use stb_warehouse::{Client, ConnectionConfig, ErrorKind, Secret};

fn client(database: Option<&str>) -> Client {
    let port = stack().clickhouse_port;
    Client::new(ConnectionConfig {
        port,
        database: database.map(str::to_owned),
        ..ConnectionConfig::default()
    })
    .expect("a client")
}

#[test]
fn queries_return_named_typed_rows() {
    let client = client(None);
    let rows = client
        .query("SELECT number AS n, toString(number) AS s FROM system.numbers LIMIT 3;")
        .expect("query");
    assert_eq!(rows.names, ["n", "s"]);
    assert_eq!(rows.types, ["UInt64", "String"]);
    assert_eq!(rows.data.len(), 3);
    assert_eq!(rows.text(2, "n").as_deref(), Some("2"));
    assert_eq!(rows.text(1, "s").as_deref(), Some("1"));
    assert_eq!(client.requests(), 1);
}

#[test]
fn statements_carry_their_query_id_and_report_written_rows() {
    let db = TestDatabase::create("warehouse_exec");
    let client = client(Some(&db.name));
    client
        .execute(
            "CREATE TABLE t (n UInt64) ENGINE = MergeTree ORDER BY n",
            None,
        )
        .expect("create");
    let id = uuid::Uuid::new_v4().to_string();
    let summary = client
        .execute("INSERT INTO t SELECT number FROM numbers(25)", Some(&id))
        .expect("insert");
    assert_eq!(summary.written_rows, Some(25));
    client.execute("SYSTEM FLUSH LOGS", None).expect("flush");
    let logged = client
        .query(&format!(
            "SELECT count() AS c FROM system.query_log WHERE query_id = '{id}' AND type = 'QueryFinish'"
        ))
        .expect("query_log");
    assert_eq!(logged.text(0, "c").as_deref(), Some("1"));
}

#[test]
fn errors_are_classified() {
    let client = client(None);
    let kind = |sql: &str| client.query(sql).expect_err(sql).kind;
    assert_eq!(
        kind("SELECT 1 FROM stb_no_such_database.t"),
        ErrorKind::DatabaseNotFound
    );
    assert_eq!(
        kind("SELECT 1 FROM system.no_such_table"),
        ErrorKind::RelationNotFound
    );
    let syntax = client.query("SELEC 1").expect_err("syntax");
    assert_eq!(syntax.kind, ErrorKind::Other);
    assert_eq!(syntax.server_code, Some(62));
    // Nothing listens on port 9: a transport failure, retried, then reported.
    let nowhere = Client::new(ConnectionConfig {
        port: 9,
        ..ConnectionConfig::default()
    })
    .expect("client");
    assert_eq!(
        nowhere.query("SELECT 1").expect_err("refused").kind,
        ErrorKind::Timeout
    );
    assert_eq!(nowhere.requests(), 3, "a read is tried three times");
    assert_eq!(
        nowhere.execute("SELECT 1", None).expect_err("refused").kind,
        ErrorKind::Timeout
    );
    assert_eq!(nowhere.requests(), 4, "a statement is never retried");
}

#[test]
fn a_wrong_password_is_an_authentication_error_that_never_shows_it() {
    let server = PrivateClickHouse::start("svc", Some("right-password"));
    let connect = |password: &str| {
        Client::new(ConnectionConfig {
            port: server.started.port,
            username: "svc".into(),
            password: Secret::new(password),
            ..ConnectionConfig::default()
        })
        .expect("client")
    };
    let error = connect("wrong-password-1234")
        .query("SELECT 1")
        .expect_err("refused");
    assert_eq!(error.kind, ErrorKind::Authentication);
    assert!(
        !error.message.contains("wrong-password-1234"),
        "{}",
        error.message
    );
    let rows = connect("right-password")
        .query("SELECT 1 AS one")
        .expect("accepted");
    assert_eq!(rows.text(0, "one").as_deref(), Some("1"));
}

#[test]
fn the_catalog_takes_three_queries_whatever_its_size() {
    let db = TestDatabase::create("warehouse_catalog");
    let client = client(Some(&db.name));
    client
        .execute(
            "CREATE TABLE orders (id String, amount Float64 DEFAULT 0, at DateTime) ENGINE = MergeTree PARTITION BY toYYYYMM(at) ORDER BY id",
            None,
        )
        .expect("table");
    client
        .execute(
            "CREATE VIEW big AS SELECT id FROM orders WHERE amount > 100",
            None,
        )
        .expect("view");
    let before = client.requests();
    let catalog = client.load_catalog(&db.name).expect("catalog");
    assert_eq!(client.requests() - before, 3);
    assert!(!catalog.timezone.is_empty());
    let orders = catalog.relation("orders").expect("orders");
    assert_eq!(orders.engine, "MergeTree");
    assert_eq!(orders.sorting_key, "id");
    assert_eq!(orders.partition_key, "toYYYYMM(at)");
    let columns: Vec<(&str, &str, &str)> = orders
        .columns
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.data_type.as_str(),
                c.default_expression.as_str(),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("id", "String", ""),
            ("amount", "Float64", "0"),
            ("at", "DateTime", "")
        ]
    );
    let view = catalog.relation("big").expect("view");
    assert_eq!(view.engine, "View");
    assert!(
        view.as_select.contains("amount > 100"),
        "{}",
        view.as_select
    );
    for i in 0..40 {
        client
            .execute(
                &format!("CREATE TABLE extra_{i} (x UInt8) ENGINE = Memory"),
                None,
            )
            .expect("extra");
    }
    let before = client.requests();
    let catalog = client.load_catalog(&db.name).expect("catalog");
    assert_eq!(catalog.relations().len(), 42);
    assert_eq!(
        client.requests() - before,
        3,
        "constant in the number of relations"
    );
}

#[test]
fn a_plan_reads_every_relation_but_only_the_definitions_it_names_or_that_cost_little() {
    let db = TestDatabase::create("warehouse_catalog_plan");
    let client = client(Some(&db.name));
    for statement in [
        "CREATE TABLE orders (id String, amount Float64 DEFAULT 0) ENGINE = MergeTree ORDER BY id",
        "CREATE TABLE totals (id String, amount Float64) ENGINE = SummingMergeTree ORDER BY id",
        "CREATE MATERIALIZED VIEW to_totals TO totals AS SELECT id, amount FROM orders",
        "CREATE MATERIALIZED VIEW named_view TO totals AS SELECT id, amount * 2 AS amount FROM orders",
        "CREATE MATERIALIZED VIEW hourly REFRESH EVERY 1 HOUR TO totals AS SELECT id, sum(amount) AS amount FROM orders GROUP BY id",
        "CREATE VIEW big AS SELECT id FROM orders WHERE amount > 100",
        "CREATE VIEW small AS SELECT id FROM orders WHERE amount < 1",
        "CREATE TABLE scratch (x UInt8) ENGINE = Memory",
    ] {
        client.execute(statement, None).expect(statement);
    }
    let before = client.requests();
    let (catalog, stamp) = client
        .load_catalog_stamped(
            &db.name,
            &[],
            &stb_warehouse::Depth::Plan {
                defined: vec![
                    "named_view".to_owned(),
                    "small".to_owned(),
                    "absent".to_owned(),
                ],
            },
            None,
        )
        .expect("catalog");
    assert_eq!(stamp, None);
    assert_eq!(
        client.requests() - before,
        5,
        "time zone, relations, plain views (side by side with them), columns, refreshable views"
    );
    let listed: Vec<&str> = catalog
        .relations()
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(listed, sorted, "the two reads merged in name order");
    let mut names: Vec<&str> = catalog
        .relations()
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "big",
            "hourly",
            "named_view",
            "orders",
            "scratch",
            "small",
            "to_totals",
            "totals"
        ],
        "every relation, each once (a named plain view too)"
    );
    let relation = |name: &str| catalog.relation(name).expect(name);
    // A table of the MergeTree family: engine, keys and columns, no definition.
    let orders = relation("orders");
    assert_eq!(
        (
            orders.engine.as_str(),
            orders.sorting_key.as_str(),
            orders.defined
        ),
        ("MergeTree", "id", false)
    );
    assert_eq!(orders.create_table_query, "");
    assert_eq!(orders.columns.len(), 2);
    assert!(!relation("totals").defined);
    assert_eq!(relation("totals").engine, "SummingMergeTree");
    // A materialized view not named: listed, nothing else read.
    let to_totals = relation("to_totals");
    assert_eq!(
        (to_totals.engine.as_str(), to_totals.defined),
        ("MaterializedView", false)
    );
    assert!(to_totals.columns.is_empty());
    // Named, and cheap engines: defined.
    let named = relation("named_view");
    assert!(named.defined);
    assert_eq!(
        named.columns.len(),
        2,
        "a named view's columns are read too"
    );
    assert!(
        named.create_table_query.contains("amount * 2"),
        "{}",
        named.create_table_query
    );
    assert!(relation("big").defined);
    assert!(relation("big").as_select.contains("amount > 100"));
    assert!(relation("small").defined);
    assert!(relation("small").as_select.contains("amount < 1"));
    assert!(relation("scratch").defined);
    assert_eq!(relation("scratch").columns.len(), 1);
    // The refreshable view is known without its definition.
    assert_eq!(
        catalog
            .refreshable()
            .map(|views| views.iter().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["hourly"])
    );
    // The same relations as a full read, definitions aside.
    let full = client.load_catalog(&db.name).expect("full");
    for relation in full.relations() {
        let light = catalog.relation(&relation.name).expect("listed");
        assert_eq!(light.engine, relation.engine, "{}", relation.name);
        if light.engine != "MaterializedView" {
            assert_eq!(light.columns, relation.columns, "{}", relation.name);
            assert_eq!(light.sorting_key, relation.sorting_key);
        }
        if light.defined {
            assert_eq!(light.create_table_query, relation.create_table_query);
        }
    }
    assert_eq!(full.refreshable(), catalog.refreshable());
}

/// Waits until every relation of `database` was last changed two seconds ago or more by
/// the server's clock (a view changed more recently is read, never kept in the cache).
fn wait_until_settled(client: &Client, database: &str) {
    loop {
        let rows = client
            .query(&format!(
                "SELECT count() AS recent FROM system.tables WHERE database = '{database}' AND metadata_modification_time > now() - 2"
            ))
            .expect("recent");
        if rows.text(0, "recent").as_deref() == Some("0") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_plan_read_takes_unchanged_relations_from_the_cache_and_reads_changed_ones() {
    let db = TestDatabase::create("warehouse_catalog_cache");
    let client = client(Some(&db.name));
    let name = &db.name;
    for statement in [
        "CREATE TABLE t1 (id String) ENGINE = MergeTree ORDER BY id".to_owned(),
        "CREATE TABLE t2 (id String, n UInt64 DEFAULT 1) ENGINE = ReplacingMergeTree ORDER BY id"
            .to_owned(),
        format!("CREATE MATERIALIZED VIEW t1_to_t2 TO {name}.t2 AS SELECT id FROM {name}.t1"),
        "CREATE TABLE scratch (x UInt8) ENGINE = Memory".to_owned(),
        format!("CREATE VIEW a AS SELECT * FROM {name}.t1"),
        format!("CREATE VIEW b AS SELECT * FROM {name}.t2"),
        format!("CREATE VIEW c AS SELECT * FROM {name}.t2"),
    ] {
        client.execute(&statement, None).expect(&statement);
    }
    let depth = stb_warehouse::Depth::Plan { defined: vec![] };
    let read_to = |depth: &stb_warehouse::Depth,
                   cache: Option<&mut stb_warehouse::CatalogCache>| {
        client
            .load_catalog_stamped(name, &[], depth, cache)
            .expect("catalog")
            .0
    };
    let read = |cache: Option<&mut stb_warehouse::CatalogCache>| read_to(&depth, cache);
    let as_select = |catalog: &stb_warehouse::Catalog, view: &str| {
        catalog.relation(view).expect(view).as_select.clone()
    };

    // Relations changed just now are read and not kept.
    let mut cache = stb_warehouse::CatalogCache::default();
    let fresh = read(Some(&mut cache));
    assert_eq!(
        fresh,
        read(None),
        "the same catalog with a cache as without"
    );
    // Nothing changed in the two seconds before the read is kept: every relation still
    // that recent by the server's clock after the read was that recent at the read (on a
    // loaded machine some may have aged past the two seconds before it, and be kept).
    let still_recent = client
        .query(&format!(
            "SELECT name FROM system.tables WHERE database = '{name}' AND metadata_modification_time > now() - 2"
        ))
        .expect("recent relations");
    let kept = serde_json::to_value(&cache).expect("saved");
    for row in 0..still_recent.data.len() {
        let relation = still_recent.text(row, "name").expect("name");
        assert!(
            kept["relations"].get(&relation).is_none(),
            "{relation} changed in the last two seconds and was kept"
        );
    }

    wait_until_settled(&client, name);
    // An empty cache (the first plan after a deployment) is filled without listing the
    // relations first: each is kept under the identity and time read in its own row.
    let mut cache = stb_warehouse::CatalogCache::default();
    let before = client.requests();
    let first = read(Some(&mut cache));
    assert_eq!(
        client.requests() - before,
        5,
        "time zone, the three reads side by side, refreshable views: no listing"
    );
    assert_eq!(first, read(None));
    assert_eq!(
        cache.len(),
        5,
        "the tables and the views; not the materialized view, listed by name every time, nor the Memory table, whose definition is read"
    );
    assert!(cache.changed());

    // What a later plan loads: proven to be served from the cache by altering kept reads
    // by hand (the server's copies are unchanged, so only the cache says so).
    let mut saved = serde_json::to_value(&cache).expect("saved");
    let kept = saved["relations"]["a"]["relation"]["as_select"]
        .as_str()
        .expect("a kept")
        .to_owned();
    saved["relations"]["a"]["relation"]["as_select"] = kept.replace(".t1", ".t9").into();
    saved["relations"]["a"]["relation"]["columns"][0]["data_type"] = "FixedString(9)".into();
    saved["relations"]["t2"]["relation"]["sorting_key"] = "n".into();
    let mut loaded: stb_warehouse::CatalogCache = serde_json::from_value(saved).expect("loaded");
    assert!(!loaded.changed());
    let before = client.requests();
    let served = read(Some(&mut loaded));
    assert_eq!(
        client.requests() - before,
        6,
        "time zone, the relations' list, the relations the cache cannot hold (the Memory table: other relations, views and columns, side by side), refreshable views"
    );
    assert_eq!(as_select(&served, "a"), format!("SELECT * FROM {name}.t9"));
    let columns = &served.relation("a").expect("a").columns;
    assert_eq!(
        columns
            .iter()
            .map(|c| (c.name.as_str(), c.data_type.as_str()))
            .collect::<Vec<_>>(),
        [("id", "FixedString(9)")],
        "the view's columns come from the cache"
    );
    assert_eq!(served.relation("t2").expect("t2").sorting_key, "n");
    assert_eq!(
        served.relation("scratch"),
        first.relation("scratch"),
        "read again"
    );
    assert!(!loaded.changed(), "nothing new to save");

    // Altered, replaced, exchanged and dropped relations are read again (or forgotten) at
    // once.
    for statement in [
        "ALTER TABLE t1 ADD COLUMN note String".to_owned(),
        format!("CREATE OR REPLACE VIEW b AS SELECT * FROM {name}.t1"),
        "EXCHANGE TABLES a AND c".to_owned(),
    ] {
        client.execute(&statement, None).expect(&statement);
    }
    let changed = read(Some(&mut cache));
    assert_eq!(changed, read(None));
    assert_eq!(
        changed.relation("t1").expect("t1").columns.len(),
        2,
        "the added column"
    );
    assert_eq!(as_select(&changed, "b"), format!("SELECT * FROM {name}.t1"));
    assert_eq!(as_select(&changed, "a"), format!("SELECT * FROM {name}.t2"));
    assert_eq!(as_select(&changed, "c"), format!("SELECT * FROM {name}.t1"));
    client.execute("DROP VIEW c", None).expect("drop");
    let dropped = read(Some(&mut cache));
    assert!(dropped.relation("c").is_none());
    // An exchange keeps each view's modification time and swaps identities: `a` is read
    // again for its new identity and kept; t1 was altered and `b` replaced just now; `c`
    // is gone; t2 is unchanged.
    let kept: Vec<String> = serde_json::to_value(&cache).expect("saved")["relations"]
        .as_object()
        .expect("relations")
        .keys()
        .cloned()
        .collect();
    assert_eq!(kept, ["a", "t2"]);

    // A plan that names a table wants its definition: the kept read without it is not
    // used.
    wait_until_settled(&client, name);
    read(Some(&mut cache));
    let naming = stb_warehouse::Depth::Plan {
        defined: vec!["t2".to_owned()],
    };
    let named = read_to(&naming, Some(&mut cache));
    assert_eq!(named, read_to(&naming, None));
    assert!(named.relation("t2").expect("t2").defined);

    // Another database starts over: nothing of this one is used there.
    let other = TestDatabase::create("warehouse_catalog_cache_other");
    client
        .execute(
            &format!("CREATE VIEW {}.a AS SELECT 1 AS one", other.name),
            None,
        )
        .expect("other view");
    let elsewhere = client
        .load_catalog_stamped(&other.name, &[], &depth, Some(&mut cache))
        .expect("other catalog")
        .0;
    assert_eq!(as_select(&elsewhere, "a"), "SELECT 1 AS one");
}

#[test]
fn the_catalog_read_carries_the_stamp_of_every_database_named_at_no_extra_request() {
    let target = TestDatabase::create("warehouse_stamp");
    let other = TestDatabase::create("warehouse_stamp_source");
    let client = client(Some(&target.name));
    let databases = [target.name.clone(), other.name.clone()];
    let stamp_now = || {
        client
            .query(&format!(
                "SELECT ({}) AS stamp",
                stb_warehouse::catalog_stamp_sql(&databases)
            ))
            .expect("stamp")
            .text(0, "stamp")
            .expect("a value")
    };
    let before = client.requests();
    let (_, stamp) = client
        .load_catalog_stamped(&target.name, &databases, &stb_warehouse::Depth::Full, None)
        .expect("catalog");
    assert_eq!(client.requests() - before, 3, "the stamp rides along");
    let stamp = stamp.expect("a stamp");
    assert_eq!(stamp, stamp_now());
    // StreamBuild's own tables do not count; a relation in either database does.
    client
        .execute(
            "CREATE TABLE _streambuild_lock_like (x UInt8) ENGINE = Memory",
            None,
        )
        .expect("own table");
    assert_eq!(stamp_now(), stamp);
    client
        .execute(
            &format!(
                "CREATE TABLE {}.events (x UInt8) ENGINE = Memory",
                other.name
            ),
            None,
        )
        .expect("source table");
    assert_ne!(stamp_now(), stamp, "a source database's change shows");
    let (_, without) = client
        .load_catalog_stamped(&target.name, &[], &stb_warehouse::Depth::Full, None)
        .expect("catalog");
    assert_eq!(without, None);
}

#[test]
fn the_definitions_read_carries_the_stamp_in_the_same_request() {
    let target = TestDatabase::create("warehouse_definitions_stamp");
    let client = client(Some(&target.name));
    let databases = [target.name.clone()];
    let names = ["kept".to_owned(), "missing".to_owned()];
    // No relation yet: the stamp still comes back (a first build reads nothing to give back).
    let before = client.requests();
    let (definitions, stamp) = client
        .definitions_stamped(&target.name, &names, &databases)
        .expect("read");
    assert_eq!(client.requests() - before, 1, "one request");
    assert!(definitions.is_empty(), "{definitions:?}");
    let empty = stamp.expect("a stamp with no relation");
    client
        .execute(
            "CREATE TABLE kept (x UInt8) ENGINE = MergeTree ORDER BY x",
            None,
        )
        .expect("table");
    let before = client.requests();
    let (definitions, stamp) = client
        .definitions_stamped(&target.name, &names, &databases)
        .expect("read");
    assert_eq!(client.requests() - before, 1, "one request");
    assert_eq!(
        definitions.keys().collect::<Vec<_>>(),
        vec!["kept"],
        "only what exists"
    );
    let (engine, create) = &definitions["kept"];
    assert_eq!(engine, "MergeTree");
    assert!(create.starts_with("CREATE TABLE"), "{create}");
    let stamp = stamp.expect("a stamp");
    assert_ne!(stamp, empty, "the new table shows in the stamp");
    let alone = client
        .query(&format!(
            "SELECT ({}) AS stamp",
            stb_warehouse::catalog_stamp_sql(&databases)
        ))
        .expect("stamp")
        .text(0, "stamp");
    assert_eq!(Some(stamp), alone, "the same stamp as read on its own");
    // Without databases to stamp: the plain read.
    assert_eq!(
        client
            .definitions_stamped(&target.name, &names, &[])
            .expect("read"),
        (
            client.definitions(&target.name, &names).expect("plain"),
            None
        )
    );
}

/// How many tables `database` holds.
fn table_count(client: &stb_warehouse::Client, database: &str) -> u64 {
    client
        .query(&format!(
            "SELECT count() AS c FROM system.tables WHERE database = '{database}'"
        ))
        .expect("tables")
        .text(0, "c")
        .and_then(|c| c.parse().ok())
        .expect("a count")
}

#[test]
fn the_target_lock_is_a_mutex_that_checks_its_owner() {
    use stb_warehouse::{LockError, TargetLock, lock_holder};
    let db = TestDatabase::create("warehouse_lock");
    let client = client(None);
    let first = TargetLock::acquire(&client, &db.name, "run-a", false).expect("free");
    let held = TargetLock::acquire(&client, &db.name, "run-b", false).expect_err("held");
    assert!(
        matches!(&held, LockError::Held { owner, .. } if owner == "run-a"),
        "{held}"
    );
    assert_eq!(held.code(), "STB-LOCK-001");
    assert_eq!(
        lock_holder(&client, &db.name).expect("read").as_deref(),
        Some("run-a")
    );
    first.release().expect("released");
    assert_eq!(lock_holder(&client, &db.name).expect("read"), None);

    // Someone broke run-c's lock and run-d took it: run-c must not release run-d's lock.
    let third = TargetLock::acquire(&client, &db.name, "run-c", false).expect("free again");
    TargetLock::of_owner(&client, &db.name, "run-c")
        .release()
        .expect("broken by an operator");
    let fourth = TargetLock::acquire(&client, &db.name, "run-d", false).expect("free");
    let changed = third.release().expect_err("not ours any more");
    assert!(
        matches!(changed, LockError::OwnershipChanged { .. }),
        "{changed}"
    );
    assert_eq!(
        lock_holder(&client, &db.name).expect("read").as_deref(),
        Some("run-d")
    );
    fourth.release().expect("released");
    // A release that stopped half way (its release table left) does not stop the next.
    let fifth = TargetLock::acquire(&client, &db.name, "run-e", false).expect("free");
    let hex = stb_warehouse::statements::sha256_hex("run-e");
    client
        .execute(
            &format!(
                "CREATE TABLE {}._streambuild_target_mutation_lock_release_{} (guard UInt8) ENGINE = TinyLog",
                db.name,
                &hex[..16]
            ),
            None,
        )
        .expect("a leftover release table");
    fifth.release().expect("released over the leftover");
    assert_eq!(lock_holder(&client, &db.name).expect("read"), None);
    assert_eq!(
        table_count(&client, &db.name),
        0,
        "no release tables left behind"
    );
}

/// A resumed build takes over the lock its suspended run kept, and only from that run:
/// of two resumes, one gets it; a lock someone else holds (or nobody) is never taken.
#[test]
fn a_lock_is_taken_over_only_from_the_run_that_holds_it() {
    use stb_warehouse::{LockError, TargetLock, lock_holder};
    let db = TestDatabase::create("warehouse_lock_takeover");
    let client = client(None);
    let nobody = TargetLock::take_over(&client, &db.name, "suspended", "resumer")
        .expect_err("nothing to take");
    assert!(
        matches!(&nobody, LockError::Held { owner, .. } if owner == "nobody"),
        "{nobody}"
    );
    let kept = TargetLock::acquire(&client, &db.name, "suspended", false).expect("free");
    let wrong = TargetLock::take_over(&client, &db.name, "another", "resumer")
        .expect_err("not held by that run");
    assert!(
        matches!(&wrong, LockError::Held { owner, .. } if owner == "suspended"),
        "{wrong}"
    );
    assert_eq!(
        lock_holder(&client, &db.name).expect("read").as_deref(),
        Some("suspended"),
        "a refused take-over leaves the lock as it was"
    );
    let taken = std::thread::scope(|scope| {
        let tries: Vec<_> = ["resumer-1", "resumer-2"]
            .into_iter()
            .map(|to| {
                let client = &client;
                let database = db.name.as_str();
                scope.spawn(move || {
                    TargetLock::take_over(client, database, "suspended", to)
                        .map(|lock| lock.owner().to_owned())
                        .ok()
                })
            })
            .collect();
        tries
            .into_iter()
            .filter_map(|t| t.join().expect("a try"))
            .collect::<Vec<_>>()
    });
    assert_eq!(taken.len(), 1, "exactly one resume takes it: {taken:?}");
    assert_eq!(
        lock_holder(&client, &db.name).expect("read").as_deref(),
        Some(taken[0].as_str())
    );
    drop(kept);
    TargetLock::of_owner(&client, &db.name, &taken[0])
        .release()
        .expect("the new owner releases it");
    assert_eq!(table_count(&client, &db.name), 0, "nothing left behind");
}

/// A lock released between another run's CREATE and its look at the holder is free: that
/// run gets it or finds it held by whoever got it first, never a raw "already exists".
#[test]
fn a_lock_released_while_another_run_asks_for_it_is_taken_or_held_never_an_error() {
    use stb_warehouse::{LockError, TargetLock};
    let db = TestDatabase::create("warehouse_lock_release_race");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (taken, held) = std::thread::scope(|scope| {
        let holder = scope.spawn(|| {
            let client = client(None);
            for _ in 0..150 {
                if let Ok(lock) = TargetLock::acquire(&client, &db.name, "run-holder", false) {
                    lock.release().expect("the holder releases its own lock");
                }
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let asker = scope.spawn(|| {
            let client = client(None);
            let (mut taken, mut held) = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match TargetLock::acquire(&client, &db.name, "run-asker", false) {
                    Ok(lock) => {
                        taken += 1;
                        lock.release().expect("the asker releases its own lock");
                    }
                    Err(LockError::Held { .. }) => held += 1,
                    Err(other) => panic!("neither taken nor held: {other}"),
                }
            }
            (taken, held)
        });
        holder.join().expect("holder");
        asker.join().expect("asker")
    });
    eprintln!("the asker took the lock {taken} times and found it held {held} times");
    assert!(taken + held > 0);
}

#[test]
fn concurrent_acquirers_get_exactly_one_lock() {
    use stb_warehouse::TargetLock;
    let db = TestDatabase::create("warehouse_lock_race");
    let winners: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let name = db.name.clone();
                scope.spawn(move || {
                    let client = client(None);
                    let owner = format!("run-{i}");
                    TargetLock::acquire(&client, &name, &owner, false)
                        .map(|lock| lock.owner().to_owned())
                        .ok()
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(winners.len(), 1, "{winners:?}");
    let client = client(None);
    TargetLock::of_owner(&client, &db.name, &winners[0])
        .release()
        .expect("released");
}

#[test]
fn the_lock_can_create_its_database() {
    use stb_warehouse::TargetLock;
    let name = stb_test_support::unique_name("t_lock_new_db");
    let client = client(None);
    let lock = TargetLock::acquire(&client, &name, "run-x", true).expect("created");
    lock.release().expect("released");
    client
        .execute(&format!("DROP DATABASE {name} SYNC"), None)
        .expect("cleanup");
}

fn metadata_tables(client: &Client, database: &str) -> Vec<String> {
    let rows = client
        .query(&format!(
            "SELECT name FROM system.tables WHERE database = '{database}' AND name LIKE '\\_streambuild\\_%' ORDER BY name"
        ))
        .expect("tables");
    (0..rows.data.len())
        .filter_map(|row| rows.text(row, "name"))
        .collect()
}

#[test]
fn the_metadata_migration_is_idempotent_and_safe_to_race() {
    use stb_warehouse::metadata::{SCHEMA_VERSION, migrate, tables};
    let name = stb_test_support::unique_name("t_metadata");
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let name = name.clone();
            scope.spawn(move || migrate(&client(None), &name).expect("migrates"));
        }
    });
    let client = client(None);
    migrate(&client, &name).expect("again");
    let mut expected: Vec<String> = tables(&name)
        .iter()
        .map(|t| {
            t.name
                .to_string()
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    expected.sort();
    assert_eq!(metadata_tables(&client, &name), expected);
    assert_eq!(expected.len(), 11);
    // Up to date: two reads, no DDL.
    let counted = stb_warehouse::Client::new(client.config().clone()).expect("client");
    migrate(&counted, &name).expect("up to date");
    assert_eq!(counted.requests(), 2);
    // A metadata table dropped by hand is put back although the version row says current.
    client
        .execute(
            &format!("DROP TABLE {name}._streambuild_run_events SYNC"),
            None,
        )
        .expect("drop one");
    migrate(&client, &name).expect("repairs");
    assert_eq!(metadata_tables(&client, &name), expected);
    let version = client
        .query(&format!(
            "SELECT max(version) AS v FROM {name}._streambuild_schema_versions"
        ))
        .expect("version");
    assert_eq!(version.text(0, "v"), Some(SCHEMA_VERSION.to_string()));
    // The server stamps run events itself.
    client
        .execute(
            &format!("INSERT INTO {name}._streambuild_run_events (invocation_id, sequence, event_kind, payload_json) VALUES ('r', 1, 'run_heartbeat', '{{}}')"),
            None,
        )
        .expect("event");
    let age = client
        .query(&format!(
            "SELECT dateDiff('second', emitted_at, now64(3, 'UTC')) < 60 AS fresh FROM {name}._streambuild_run_events"
        ))
        .expect("age");
    assert_eq!(age.text(0, "fresh").as_deref(), Some("1"));

    // Metadata from a newer StreamBuild is never written to.
    client
        .execute(
            &format!(
                "INSERT INTO {name}._streambuild_schema_versions VALUES (99, now64(3, 'UTC'))"
            ),
            None,
        )
        .expect("newer");
    let refused = migrate(&client, &name).expect_err("newer schema");
    assert!(
        refused.message.contains("schema version 99"),
        "{}",
        refused.message
    );
    client
        .execute(&format!("DROP DATABASE {name} SYNC"), None)
        .expect("cleanup");
}

#[test]
fn a_pre_production_node_results_table_is_refused() {
    let db = TestDatabase::create("warehouse_old_meta");
    let client = client(None);
    client
        .execute(
            &format!("CREATE TABLE {}._streambuild_node_results (result_id String) ENGINE = MergeTree ORDER BY result_id", db.name),
            None,
        )
        .expect("old table");
    let refused = stb_warehouse::metadata::migrate(&client, &db.name).expect_err("old");
    assert!(
        refused
            .message
            .contains("drop this pre-production metadata table"),
        "{}",
        refused.message
    );
}

/// A database with StreamBuild's metadata, a client to read it, and a second client whose
/// requests count only the writes of the sink under test.
fn events_database(
    prefix: &str,
) -> (
    TestDatabase,
    std::sync::Arc<stb_warehouse::Client>,
    std::sync::Arc<stb_warehouse::Client>,
) {
    let db = TestDatabase::create(prefix);
    let shared = std::sync::Arc::new(client(None));
    stb_warehouse::metadata::migrate(&shared, &db.name).expect("metadata");
    let counted =
        std::sync::Arc::new(stb_warehouse::Client::new(shared.config().clone()).expect("client"));
    (db, shared, counted)
}

#[test]
fn queued_run_events_go_out_in_order_in_few_writes() {
    use stb_warehouse::events::RunEventSink;
    use std::sync::Arc;
    let (db, shared, counted) = events_database("warehouse_event_queue");
    let sink = Arc::new(RunEventSink::new(Arc::clone(&counted), &db.name, "run-q"));
    let writer = sink.heartbeat(std::time::Duration::from_secs(60));
    let sequences: Vec<u64> = (0..200)
        .map(|i| {
            sink.queue(
                "statement_completed",
                Some(&format!("step-{i}")),
                None,
                &serde_json::json!({"i": i}),
            )
        })
        .collect();
    drop(writer);
    assert!(!sink.take_failure());
    assert_eq!(sequences, (1..=200).collect::<Vec<_>>());
    let rows = shared
        .query(&format!(
            "SELECT sequence, step_id FROM {}._streambuild_run_events WHERE invocation_id = 'run-q' ORDER BY sequence",
            db.name
        ))
        .expect("events");
    let written: Vec<(String, String)> = (0..rows.data.len())
        .filter_map(|r| Some((rows.text(r, "sequence")?, rows.text(r, "step_id")?)))
        .collect();
    let expected: Vec<(String, String)> = (0..200)
        .map(|i| ((i + 1).to_string(), format!("step-{i}")))
        .collect();
    assert_eq!(written, expected, "every event once, in order");
    // What the live feed and `stb runs show` read: numbered order, not the order of the
    // numbers' text (10 before 2).
    let read: Vec<u64> = stb_warehouse::runs::events_of(&shared, &db.name, "run-q")
        .expect("read back")
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(read, (1..=200).collect::<Vec<_>>());
    assert!(
        counted.requests() < 200,
        "{} writes for 200 events",
        counted.requests()
    );
}

/// What a recovery reads back (a restore point, a resume point) is kept whole however
/// large; any other event's oversized payload is replaced by a marker.
#[test]
fn the_records_a_recovery_reads_are_kept_whole_whatever_their_size() {
    use stb_warehouse::events::{MAX_PAYLOAD_BYTES, RunEventSink};
    use std::sync::Arc;
    let (db, shared, _) = events_database("warehouse_event_whole");
    let sink = RunEventSink::new(Arc::clone(&shared), &db.name, "run-whole");
    let big = serde_json::json!({"workflow": "x".repeat(MAX_PAYLOAD_BYTES * 4)});
    for kind in [
        "resume_point",
        "restore_point",
        "resume_models",
        "statement_progress",
    ] {
        sink.emit(kind, None, None, &big).expect("written");
    }
    let events = stb_warehouse::runs::events_of(&shared, &db.name, "run-whole").expect("read");
    let sizes: Vec<(String, bool)> = events
        .iter()
        .map(|e| (e.kind.clone(), e.payload.len() > MAX_PAYLOAD_BYTES))
        .collect();
    assert_eq!(
        sizes,
        [
            ("resume_point".to_owned(), true),
            ("restore_point".to_owned(), true),
            ("resume_models".to_owned(), true),
            ("statement_progress".to_owned(), false),
        ]
    );
}

/// A statement's start goes out at once (unlock kills by its query id); its completion
/// waits for the next statement's start and both share one INSERT; a completion left
/// alone still goes out, after the lazy delay.
#[test]
fn a_completion_waits_for_the_next_start_and_they_share_one_write() {
    use stb_warehouse::events::RunEventSink;
    use std::sync::Arc;
    let (db, shared, counted) = events_database("warehouse_event_lazy");
    // Longer than any test: a completion goes out only with the next start.
    let sink = Arc::new(
        RunEventSink::new(Arc::clone(&counted), &db.name, "run-lazy")
            .with_lazy_delay(std::time::Duration::from_secs(3600)),
    );
    let writer = sink.heartbeat(std::time::Duration::from_secs(3600));
    let queue = |kind: &str, step: &str| {
        sink.queue(kind, Some(step), None, &serde_json::json!({}));
    };
    let writes_reach = |n: usize| {
        let reached = stb_test_support::wait_for(std::time::Duration::from_secs(60), || {
            counted.requests() >= n
        });
        assert!(reached, "{n} writes never happened");
    };
    queue("statement_started", "step-1");
    writes_reach(1);
    queue("statement_progress", "step-1");
    queue("statement_completed", "step-1");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        counted.requests(),
        1,
        "a completion alone is not written at once"
    );
    queue("statement_started", "step-2");
    writes_reach(2);
    assert_eq!(
        counted.requests(),
        2,
        "progress, completion and the next start in one INSERT"
    );
    // A start queued lazily (a short DDL's) waits for company too.
    sink.queue_lazy(
        "statement_completed",
        Some("step-2"),
        None,
        &serde_json::json!({}),
    );
    sink.queue_lazy(
        "statement_started",
        Some("step-3"),
        None,
        &serde_json::json!({}),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(counted.requests(), 2, "a lazy start is not written at once");
    queue("statement_started", "step-4");
    writes_reach(3);
    drop(writer);
    assert!(!sink.take_failure());
    assert_eq!(
        counted.requests(),
        3,
        "the lazy start went with the next urgent one"
    );
    let kinds = shared
        .query(&format!(
            "SELECT arrayStringConcat(groupArray(event_kind), ' ') AS kinds FROM (SELECT event_kind FROM {}._streambuild_run_events WHERE invocation_id = 'run-lazy' ORDER BY sequence)",
            db.name
        ))
        .expect("events");
    assert_eq!(
        kinds.text(0, "kinds").as_deref(),
        Some(
            "statement_started statement_progress statement_completed statement_started statement_completed statement_started statement_started"
        )
    );

    // With the default delay, a completion that nothing follows is written all the same.
    let alone = Arc::new(RunEventSink::new(
        Arc::clone(&shared),
        &db.name,
        "run-alone",
    ));
    let writer = alone.heartbeat(std::time::Duration::from_secs(3600));
    alone.queue(
        "statement_completed",
        Some("step-1"),
        None,
        &serde_json::json!({}),
    );
    let seen = stb_test_support::wait_for(std::time::Duration::from_secs(60), || {
        shared
            .query(&format!(
                "SELECT count() AS n FROM {}._streambuild_run_events WHERE invocation_id = 'run-alone'",
                db.name
            ))
            .ok()
            .and_then(|rows| rows.text(0, "n"))
            .as_deref()
            == Some("1")
    });
    assert!(seen, "a lone completion is written after the lazy delay");
    drop(writer);
}

#[test]
fn run_events_are_ordered_truncated_and_kept_across_failures() {
    use stb_warehouse::events::{MAX_PAYLOAD_BYTES, RunEventSink};
    use std::sync::Arc;
    let db = TestDatabase::create("warehouse_events");
    let shared = Arc::new(client(None));
    stb_warehouse::metadata::migrate(&shared, &db.name).expect("metadata");
    let sink = Arc::new(RunEventSink::new(Arc::clone(&shared), &db.name, "run-1"));
    let big = "x".repeat(MAX_PAYLOAD_BYTES + 10);
    assert_eq!(
        sink.emit("run_started", None, None, &serde_json::json!({"big": big}))
            .expect("start"),
        1
    );
    {
        let _heartbeat = sink.heartbeat(std::time::Duration::from_millis(100));
        std::thread::sleep(std::time::Duration::from_millis(450));
    }
    let last = sink
        .emit(
            "statement_started",
            Some("step-1"),
            Some("replay"),
            &serde_json::json!({"big": big}),
        )
        .expect("statement");
    let rows = shared
        .query(&format!(
            "SELECT sequence, event_kind, ifNull(phase, '') AS phase, length(payload_json) AS bytes FROM {}._streambuild_run_events WHERE invocation_id = 'run-1' ORDER BY sequence",
            db.name
        ))
        .expect("events");
    let kinds: Vec<String> = (0..rows.data.len())
        .filter_map(|r| rows.text(r, "event_kind"))
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("statement_started"));
    let heartbeats = kinds.iter().filter(|k| *k == "run_heartbeat").count();
    assert!((2..=5).contains(&heartbeats), "{kinds:?}");
    let sequences: Vec<u64> = (0..rows.data.len())
        .filter_map(|r| rows.text(r, "sequence")?.parse().ok())
        .collect();
    assert_eq!(
        sequences,
        (1..=last).collect::<Vec<_>>(),
        "no gaps, no repeats"
    );
    let bytes = |row: usize| {
        rows.text(row, "bytes")
            .and_then(|b| b.parse::<usize>().ok())
    };
    assert!(
        bytes(0) > Some(MAX_PAYLOAD_BYTES),
        "run_started is kept whole"
    );
    assert!(
        bytes(rows.data.len() - 1) < Some(100),
        "others are truncated"
    );

    // The warehouse refuses (the table is gone): the event waits and goes out with the next.
    shared
        .execute(
            &format!(
                "RENAME TABLE {0}._streambuild_run_events TO {0}.events_aside",
                db.name
            ),
            None,
        )
        .expect("aside");
    assert!(
        sink.emit("statement_completed", None, None, &serde_json::json!({}))
            .is_err()
    );
    shared
        .execute(
            &format!(
                "RENAME TABLE {0}.events_aside TO {0}._streambuild_run_events",
                db.name
            ),
            None,
        )
        .expect("back");
    sink.emit(
        "run_completed",
        None,
        None,
        &serde_json::json!({"outcome": "succeeded"}),
    )
    .expect("flushes the backlog");
    let tail = shared
        .query(&format!(
            "SELECT event_kind FROM {}._streambuild_run_events WHERE invocation_id = 'run-1' ORDER BY sequence DESC LIMIT 2",
            db.name
        ))
        .expect("tail");
    assert_eq!(tail.text(0, "event_kind").as_deref(), Some("run_completed"));
    assert_eq!(
        tail.text(1, "event_kind").as_deref(),
        Some("statement_completed")
    );
}

#[test]
fn an_adopted_table_is_checked_against_the_real_catalog() {
    use stb_warehouse::adopted::{AdoptedTable, validate_adopted};
    let db = TestDatabase::create("warehouse_adopted");
    let client = client(Some(&db.name));
    client
        .execute(
            "CREATE TABLE customers (id UInt64, updated_at DateTime64(3), seq Nullable(Int64)) ENGINE = MergeTree ORDER BY id",
            None,
        )
        .expect("table");
    let catalog = client.load_catalog(&db.name).expect("catalog");
    let good = vec![
        ("_replay_timestamp".to_owned(), "updated_at".to_owned()),
        ("_replay_cursor".to_owned(), "seq".to_owned()),
    ];
    let adopted = AdoptedTable {
        source: "customers",
        table: "customers",
        roles: &good,
    };
    assert_eq!(validate_adopted(&catalog, &adopted), Vec::new());
    let wrong = vec![("_replay_cursor".to_owned(), "updated_at".to_owned())];
    let problems = validate_adopted(
        &catalog,
        &AdoptedTable {
            roles: &wrong,
            ..adopted
        },
    );
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].message.contains("DateTime64(3)"),
        "{problems:?}"
    );
}

#[test]
fn statements_are_persisted_read_back_and_revised() {
    use stb_warehouse::statements::{PlannedStatement, persist_statements, workflow_sha256};
    let db = TestDatabase::create("warehouse_statements");
    let client = client(None);
    stb_warehouse::metadata::migrate(&client, &db.name).expect("metadata");
    let statement = |sql: &str| PlannedStatement {
        step_id: "s".into(),
        phase: "replay".into(),
        intent: "replay".into(),
        sql: sql.into(),
    };
    let mut planned = vec![
        statement("CREATE TABLE a (x UInt8) ENGINE = Memory"),
        statement("INSERT INTO a SELECT 1 WHERE x = 'it''s'"),
        statement("__streambuild_replay_placeholder__"),
    ];
    let first = persist_statements(&client, &db.name, "run-s", &planned, 1).expect("persisted");
    assert_eq!(first, workflow_sha256(&planned));
    // The placeholder is realised: revision 2 replaces the rows.
    planned[2] = statement("INSERT INTO a SELECT 2");
    let second = persist_statements(&client, &db.name, "run-s", &planned, 2).expect("revised");
    assert_ne!(first, second);
    let stored = client
        .query(&format!(
            "SELECT sql FROM {}._streambuild_run_statements FINAL WHERE invocation_id = 'run-s' ORDER BY statement_sequence",
            db.name
        ))
        .expect("read");
    assert_eq!(
        stored.text(2, "sql").as_deref(),
        Some("INSERT INTO a SELECT 2")
    );
    assert_eq!(
        stored.text(1, "sql").as_deref(),
        Some("INSERT INTO a SELECT 1 WHERE x = 'it''s'")
    );
}

#[test]
fn the_latest_fingerprint_per_model_wins() {
    use stb_warehouse::fingerprints::{Fingerprints, latest_fingerprints};
    let db = TestDatabase::create("warehouse_fingerprints");
    let client = client(None);
    let ids = vec![format!("{}.orders", db.name), format!("{}.other", db.name)];
    assert_eq!(
        latest_fingerprints(&client, &db.name, &ids).expect("read"),
        Fingerprints::Absent
    );
    stb_warehouse::metadata::migrate(&client, &db.name).expect("metadata");
    client
        .execute(
            &format!(
                "INSERT INTO {0}._streambuild_direct_fingerprints (fingerprint_id, logical_model_identity, definition_sql, definition_hash, identity_metadata, workflow_id, tool_version, applied_at) VALUES \
                 ('a', '{0}.orders', 'SELECT 1', 'h1', '{{}}', 'w1', 't', '2026-01-01 00:00:00'), \
                 ('b', '{0}.orders', 'SELECT 2', 'h2', '{{}}', 'w2', 't', '2026-01-02 00:00:00'), \
                 ('c', '{0}.orders', 'SELECT 3', 'h3', '{{}}', 'w3', 't', '2026-01-02 00:00:00')",
                db.name
            ),
            None,
        )
        .expect("rows");
    let Fingerprints::Found(found) = latest_fingerprints(&client, &db.name, &ids).expect("read")
    else {
        panic!("found");
    };
    assert_eq!(found.len(), 1, "no row for 'other'");
    let latest = &found[&ids[0]];
    assert_eq!(
        latest.definition_sql, "SELECT 3",
        "same time: the larger id wins"
    );
    assert_eq!(latest.definition_hash, "h3");
}

#[test]
fn type_spellings_are_made_canonical_as_the_server_prints_them() {
    let client = client(None);
    for written in [
        "datetime64(3)",
        "DATETIME64( 3 , 'UTC' )",
        "Nullable(datetime64(3))",
        "bigint unsigned",
        "INT(11)",
        "VARCHAR(255)",
        "double precision",
        "Decimal(18,4)",
        "decimal",
        "Decimal(12)",
        "Decimal64(4)",
        "BINARY(3)",
        "boolean",
        "timestamp",
        "DateTime32",
        "Array(LowCardinality(varchar))",
        "Map(text,  bigint)",
        "Enum8('a'=1,'b' = -2)",
        "AggregateFunction(quantiles(0.5,0.9), bigint)",
        "LowCardinality(Nullable(text))",
    ] {
        let literal = stb_ddl::string_literal(written);
        let printed = client
            .query(&format!(
                "SELECT toTypeName(defaultValueOfTypeName({literal})) AS t"
            ))
            .expect("the server reads the type")
            .text(0, "t")
            .expect("a name");
        assert_eq!(
            stb_sql::types::canonical_type(written),
            printed,
            "{written}"
        );
        // The server's own spelling is its own canonical form.
        assert_eq!(stb_sql::types::canonical_type(&printed), printed);
    }
}

#[test]
fn fingerprints_of_10000_models_and_a_statement_past_256_kib_are_read() {
    use stb_warehouse::fingerprints::{Fingerprints, latest_fingerprints};
    let db = TestDatabase::create("warehouse_large_reads");
    let client = client(None);
    stb_warehouse::metadata::migrate(&client, &db.name).expect("metadata");
    client
        .execute(
            &format!(
                "INSERT INTO {0}._streambuild_direct_fingerprints (fingerprint_id, logical_model_identity, definition_sql, definition_hash, identity_metadata, workflow_id, tool_version, applied_at) \
                 SELECT toString(number), concat('{0}.model_with_a_long_name_', toString(number)), 'SELECT 1', 'h', '{{}}', 'w', 't', '2026-01-01 00:00:00' FROM numbers(10000)",
                db.name
            ),
            None,
        )
        .expect("rows");
    // 10,000 identities: listed in the query, they alone would pass 256 KiB.
    let mut ids: Vec<String> = (0..10_000)
        .map(|n| format!("{}.model_with_a_long_name_{n}", db.name))
        .collect();
    ids.retain(|id| !id.ends_with("_7"));
    let Fingerprints::Found(found) = latest_fingerprints(&client, &db.name, &ids).expect("read")
    else {
        panic!("found");
    };
    // Only the identities asked for.
    assert_eq!(found.len(), 9_999);
    // Any statement longer than the server's default max_query_size is parsed whole.
    let names: Vec<String> = (0..20_000).map(|n| format!("'relation_{n:08}'")).collect();
    let long = format!(
        "SELECT count() AS n FROM system.one WHERE 'x' NOT IN ({})",
        names.join(", ")
    );
    assert!(long.len() > 256 * 1024, "{}", long.len());
    let rows = client.query(&long).expect("a long statement");
    assert_eq!(rows.text(0, "n").as_deref(), Some("1"));
}
