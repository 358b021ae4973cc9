//! Against the local stack's broker: committed offsets show as lag, and a reset deletes
//! them.

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use stb_kafka::{Brokers, GroupReset, list_topics, reset_group, topic_lag};
use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
use stb_test_support::{stack, unique_name};

#[test]
fn committed_offsets_show_as_lag_and_a_reset_deletes_them() {
    let brokers = Brokers {
        list: stack().kafka_brokers.clone(),
        settings: Vec::new(),
    };
    let topic = unique_name("lag");
    let group = unique_name("group");
    create_topic(&brokers.list, &topic, 2);
    let records: Vec<Record> = (0..6)
        .map(|i| Record {
            partition: i % 2,
            key: i.to_string(),
            value: format!("{{\"n\": {i}}}"),
            headers: Vec::new(),
            timestamp_ms: run_base_ms(),
        })
        .collect();
    produce(&brokers.list, &topic, &records);
    let topics = list_topics(&brokers).expect("topics");
    assert!(
        topics.iter().any(|t| t.name == topic && t.partitions == 2),
        "{topics:?}"
    );
    let lag = topic_lag(&brokers, &topic, &group).expect("lag");
    assert_eq!(lag.len(), 2);
    assert!(
        lag.iter()
            .all(|p| p.high == 3 && p.committed.is_none() && p.lag().is_none())
    );

    // A consumer of the group commits partition 0 at offset 2.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers.list)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset(&topic, 0, Offset::Offset(2))
        .expect("offset");
    consumer.commit(&commit, CommitMode::Sync).expect("commit");
    drop(consumer);
    let lag = topic_lag(&brokers, &topic, &group).expect("lag");
    let first = lag.iter().find(|p| p.partition == 0).expect("partition 0");
    assert_eq!((first.committed, first.lag()), (Some(2), Some(1)));

    assert_eq!(reset_group(&brokers, &group), GroupReset::Deleted);
    let lag = topic_lag(&brokers, &topic, &group).expect("lag");
    assert!(lag.iter().all(|p| p.committed.is_none()), "{lag:?}");
    // Resetting a group with nothing committed is fine either way (the local broker, tansu,
    // answers "deleted" where Kafka answers "group not found").
    assert!(matches!(
        reset_group(&brokers, &group),
        GroupReset::NotFound | GroupReset::Deleted
    ));

    let unreachable = Brokers {
        list: "127.0.0.1:1".into(),
        settings: Vec::new(),
    };
    assert!(matches!(
        reset_group(&unreachable, &group),
        GroupReset::Failed(_)
    ));
}
