//! The compiled DDL, run in dependency order on the real engine, builds a working pipeline.

use stb_test_support::{TestDatabase, execute};

use crate::support::{SHOP, compile_files};

#[test]
fn compiled_objects_run_on_clickhouse() {
    let db = TestDatabase::create("compile");
    let project = SHOP[0].1.replace("shop_dev", &db.name);
    let compiled = compile_files(SHOP, &[("streambuild_project.toml", &project)])
        .unwrap_or_else(|d| panic!("{d:#?}"));
    execute(&format!(
        "CREATE TABLE {}.customers_existing (id UInt64, name String, updated_at DateTime64(3)) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    let files = &compiled.files;
    let order = [
        "compiled/resources/sources/orders/raw__orders.sql",
        "compiled/resources/models/pl__customers/customer_names.table.sql",
        "compiled/resources/models/pl__customers/customer_names.mv.sql",
        "compiled/resources/models/pl__orders/orders_clean.table.sql",
        "compiled/resources/models/pl__orders/orders_clean.mv.sql",
        "compiled/resources/models/pl__orders/order_customers.table.sql",
        "compiled/resources/models/pl__orders/order_customers.mv.sql",
        "compiled/resources/models/pl__reporting/customer_counts.view.sql",
    ];
    for path in order {
        execute(&files[path]);
    }
    execute(&format!(
        "INSERT INTO {}.customers_existing VALUES (7, 'Ada', now64(3))",
        db.name
    ));
    execute(&format!(
        "INSERT INTO {}.raw__orders (kafka_key, kafka_value, kafka_topic, kafka_partition, kafka_offset, _replay_partition, _replay_offset, kafka_landed_at, _replay_landed_at) VALUES ('k', '{{\"order_id\":\"o-1\",\"customer_id\":7}}', 't', 0, 0, 0, 0, now64(3), now64(3))",
        db.name
    ));
    assert_eq!(
        execute(&format!(
            "SELECT customer_name, orders FROM {}.view__customer_counts",
            db.name
        )),
        "Ada\t1\n"
    );
}
