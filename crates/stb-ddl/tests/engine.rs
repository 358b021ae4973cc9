//! The rendered DDL runs on the real engine, and the objects behave: a model table fed by a
//! materialized view from the landing table, and a view over it.

use stb_ddl::{
    Audience, Column, KafkaSettings, MaterializedView, QualifiedName, Table, View,
    kafka_retention_ttl, managed_source,
};
use stb_test_support::{TestDatabase, execute, stack, unique_name};

#[test]
fn generated_objects_are_accepted_and_work_together() {
    let db = TestDatabase::create("ddl");
    let source = managed_source(
        &db.name,
        "orders",
        KafkaSettings {
            broker_list: stack().kafka_brokers.clone(),
            topic: unique_name("ddl_topic"),
            group: "streambuild_ddl_orders".to_owned(),
            format: "JSONAsString".to_owned(),
            settings: vec![("kafka_num_consumers".to_owned(), "1".to_owned())],
            hidden: Vec::new(),
        },
        Some(kafka_retention_ttl(7 * 86_400, true)),
    );
    execute(&source.kafka.render(Audience::Runtime));
    execute(&source.raw.render());
    execute(&source.landing.render());

    let table = Table {
        name: QualifiedName::new(&db.name, "tbl__orders_clean"),
        columns: vec![
            Column::new("order_id", "String"),
            Column::new("_replay_partition", "Int32"),
            Column::new("_replay_offset", "Int64"),
        ],
        engine: "MergeTree()".to_owned(),
        order_by: vec![
            "order_id".to_owned(),
            "_replay_partition".to_owned(),
            "_replay_offset".to_owned(),
        ],
        partition_by: Some("_replay_partition".to_owned()),
        ttl: None,
        settings: vec![("index_granularity".to_owned(), "8192".to_owned())],
    };
    execute(&table.render());
    let model_view = MaterializedView {
        name: QualifiedName::new(&db.name, "mv__orders_clean"),
        target: table.name.clone(),
        query: format!(
            "SELECT\n  JSONExtractString(kafka_value, 'id')::String AS order_id, -- authored\n  _replay_partition::Int32 AS _replay_partition,\n  _replay_offset::Int64 AS _replay_offset\nFROM {}",
            source.raw.name
        ),
        refresh: None,
    };
    execute(&model_view.render());
    let view = View {
        name: QualifiedName::new(&db.name, "view__order_count"),
        query: format!("SELECT count()::UInt64 AS orders FROM {}", table.name),
    };
    execute(&view.render());

    // A row landing in raw__orders flows through the model view into the table.
    execute(&format!(
        "INSERT INTO {} (kafka_key, kafka_value, kafka_topic, kafka_partition, kafka_offset, _replay_partition, _replay_offset, kafka_landed_at, _replay_landed_at) \
         VALUES ('k', '{{\"id\":\"o-1\"}}', 't', 0, 5, 0, 5, now64(3), now64(3))",
        source.raw.name
    ));
    assert_eq!(
        execute(&format!(
            "SELECT order_id, _replay_offset FROM {}",
            table.name
        )),
        "o-1\t5\n"
    );
    assert_eq!(execute(&format!("SELECT orders FROM {}", view.name)), "1\n");
    let engines = execute(&format!(
        "SELECT name, engine FROM system.tables WHERE database = '{}' ORDER BY name",
        db.name
    ));
    assert_eq!(
        engines,
        "kafka__orders\tKafka\nmv__orders\tMaterializedView\nmv__orders_clean\tMaterializedView\nraw__orders\tMergeTree\ntbl__orders_clean\tMergeTree\nview__order_count\tView\n"
    );
}
