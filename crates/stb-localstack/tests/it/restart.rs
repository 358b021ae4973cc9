//! A server restart with Kafka tables present: the tables come back, keep consuming from
//! their committed offsets, and MergeTree data survives.

use stb_test_support::kafka::{create_topic, produce};
use stb_test_support::{PrivateClickHouse, execute_at as run, stack, unique_name};

use crate::kafka_landing::{PARTITIONS, assert_exactly_once, create_landing, records};

#[test]
fn restart_keeps_kafka_tables_and_resumes_without_duplicates() {
    let brokers = stack().kafka_brokers.clone();
    let mut server = PrivateClickHouse::start("default", None);
    let database = unique_name("restart");
    let topic = unique_name("restart_events");
    create_topic(&brokers, &topic, PARTITIONS);
    run(&server.url(), &format!("CREATE DATABASE {database}"));
    create_landing(&server.url(), &database, &topic);
    let mut delivered = produce(&brokers, &topic, &records(0, 15));
    assert_exactly_once(&server.url(), &database, &delivered);

    server.restart();
    let tables = run(
        &server.url(),
        &format!(
            "SELECT name, engine FROM system.tables WHERE database = '{database}' ORDER BY name"
        ),
    );
    assert_eq!(
        tables,
        "kafka_events\tKafka\nlanded\tMergeTree\nlanding_view\tMaterializedView\n"
    );
    delivered.extend(produce(&brokers, &topic, &records(15, 15)));
    assert_exactly_once(&server.url(), &database, &delivered);

    // A second restart in a row: the set-aside-and-reattach cycle is repeatable.
    server.restart();
    delivered.extend(produce(&brokers, &topic, &records(30, 6)));
    assert_exactly_once(&server.url(), &database, &delivered);
}
