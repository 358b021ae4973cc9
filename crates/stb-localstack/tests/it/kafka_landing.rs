//! Kafka end to end: tansu topic -> Kafka engine table -> materialized view -> MergeTree,
//! every (partition, offset) exactly once with key, headers and timestamp intact.

use std::collections::BTreeMap;
use std::time::Duration;

use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{TestDatabase, execute, execute_at, stack, unique_name, wait_for};

pub(crate) const PARTITIONS: i32 = 3;

pub(crate) fn records(first: usize, count: usize) -> Vec<Record> {
    (first..first + count)
        .map(|i| Record {
            partition: i32::try_from(i).expect("small") % PARTITIONS,
            key: format!("key-{i}"),
            value: format!("{{\"seq\":{i}}}"),
            headers: vec![
                ("source".to_owned(), "test".to_owned()),
                ("seq".to_owned(), i.to_string()),
            ],
            timestamp_ms: run_base_ms() + i64::try_from(i).expect("small") * 1_000,
        })
        .collect()
}

/// Kafka table + landing table + view in `database`, reading `topic`.
pub(crate) fn create_landing(url: &str, database: &str, topic: &str) {
    let run = |sql: String| execute_at(url, &sql);
    let brokers = &stack().kafka_brokers;
    run(format!(
        "CREATE TABLE {database}.kafka_events (message String) ENGINE = Kafka \
         SETTINGS kafka_broker_list = '{brokers}', kafka_topic_list = '{topic}', \
         kafka_group_name = '{database}_group', kafka_format = 'JSONAsString'"
    ));
    run(format!(
        "CREATE TABLE {database}.landed (message String, partition UInt64, offset UInt64, \
         timestamp_ms Nullable(DateTime64(3)), key String, header_names Array(String), header_values Array(String)) \
         ENGINE = MergeTree ORDER BY (partition, offset)"
    ));
    run(format!(
        "CREATE MATERIALIZED VIEW {database}.landing_view TO {database}.landed AS \
         SELECT message, _partition AS partition, _offset AS offset, _timestamp_ms AS timestamp_ms, \
         _key AS key, _headers.name AS header_names, _headers.value AS header_values \
         FROM {database}.kafka_events"
    ));
}

/// `(partition, offset) -> copies` in the landing table.
pub(crate) fn landed_offsets(url: &str, database: &str) -> BTreeMap<(i32, i64), u64> {
    let sql = format!(
        "SELECT partition, offset, count() FROM {database}.landed GROUP BY partition, offset"
    );
    execute_at(url, &sql)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let partition = fields.next()?.parse().ok()?;
            let offset = fields.next()?.parse().ok()?;
            let copies = fields.next()?.parse().ok()?;
            Some(((partition, offset), copies))
        })
        .collect()
}

/// Waits until every delivered `(partition, offset)` has landed, then checks each landed
/// exactly once and nothing else landed.
pub(crate) fn assert_exactly_once(url: &str, database: &str, delivered: &[(i32, i64)]) {
    let all_landed = wait_for(Duration::from_secs(60), || {
        let landed = landed_offsets(url, database);
        delivered.iter().all(|key| landed.contains_key(key))
    });
    let landed = landed_offsets(url, database);
    assert!(
        all_landed,
        "not every record landed: delivered {delivered:?}, landed {landed:?}"
    );
    // Give a duplicate the chance to show up before judging.
    std::thread::sleep(Duration::from_millis(1_500));
    let landed = landed_offsets(url, database);
    let expected: BTreeMap<(i32, i64), u64> = delivered.iter().map(|key| (*key, 1)).collect();
    assert_eq!(landed, expected, "each (partition, offset) exactly once");
}

#[test]
fn kafka_messages_land_exactly_once_with_metadata() {
    let stack = stack();
    let db = TestDatabase::create("kafka");
    let topic = unique_name("events");
    create_topic(&stack.kafka_brokers, &topic, PARTITIONS);
    let first = records(0, 30);
    let delivered_before = produce(&stack.kafka_brokers, &topic, &first);
    create_landing(&stack.clickhouse_url, &db.name, &topic);
    let second = records(30, 30);
    let delivered_after = produce(&stack.kafka_brokers, &topic, &second);
    let delivered: Vec<(i32, i64)> = delivered_before
        .into_iter()
        .chain(delivered_after)
        .collect();
    assert_eq!(delivered.len(), 60);
    assert_exactly_once(&stack.clickhouse_url, &db.name, &delivered);

    let sample = execute(&format!(
        "SELECT partition, key, message, toUnixTimestamp64Milli(timestamp_ms), header_names, header_values \
         FROM {}.landed WHERE key = 'key-31'",
        db.name
    ));
    let expected_ms = run_base_ms() + 31_000;
    assert_eq!(
        sample,
        format!("1\tkey-31\t{{\"seq\":31}}\t{expected_ms}\t['source','seq']\t['test','31']\n")
    );

    // The server's config enables the logs StreamBuild reads for lineage evidence; views fed
    // by Kafka log there too.
    let logged = wait_for(Duration::from_secs(20), || {
        execute("SYSTEM FLUSH LOGS");
        let views = execute(&format!(
            "SELECT count() > 0 FROM system.query_views_log \
             WHERE view_name = '{0}.landing_view' AND view_target = '{0}.landed' AND status = 'QueryFinish'",
            db.name
        ));
        let parts = execute(&format!(
            "SELECT count() > 0 FROM system.part_log \
             WHERE database = '{}' AND table = 'landed' AND event_type = 'NewPart'",
            db.name
        ));
        views == "1\n" && parts == "1\n"
    });
    assert!(logged, "query_views_log and part_log record the landing");
}
