//! Kafka administration for managed sources. StreamBuild never reads messages itself (the
//! warehouse's Kafka engine does); it talks to the broker only to reset the consumer group
//! of a landing it is about to create, and to report partitions, watermarks and lag.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// How long one broker request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach a source's brokers: its broker list and the Kafka engine settings that also
/// concern a client (security protocol and SASL credentials).
#[derive(Clone, PartialEq, Eq)]
pub struct Brokers {
    pub list: String,
    /// The source's `settings` as ClickHouse names them (`kafka_sasl_password`, ...).
    pub settings: Vec<(String, String)>,
}

impl std::fmt::Debug for Brokers {
    // Broker lists and settings can hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Brokers(..)")
    }
}

/// The client setting a ClickHouse Kafka engine setting corresponds to.
fn client_setting(engine_setting: &str) -> Option<&'static str> {
    match engine_setting {
        "kafka_security_protocol" => Some("security.protocol"),
        "kafka_sasl_mechanism" => Some("sasl.mechanism"),
        "kafka_sasl_username" => Some("sasl.username"),
        "kafka_sasl_password" => Some("sasl.password"),
        _ => None,
    }
}

impl Brokers {
    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.list)
            .set("socket.timeout.ms", "5000")
            .set("api.version.request.timeout.ms", "5000")
            .set("log_level", "3");
        for (key, value) in &self.settings {
            if let Some(name) = client_setting(key) {
                let value = if name == "security.protocol" {
                    value.to_ascii_lowercase()
                } else {
                    value.clone()
                };
                config.set(name, value);
            }
        }
        config
    }
}

/// What happened to a consumer group's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupReset {
    Deleted,
    /// The group had no committed offsets: nothing to do.
    NotFound,
    /// The broker refused or could not be reached.
    Failed(String),
}

/// Deletes `group`, so a fresh landing table consumes from the earliest retained message
/// instead of offsets a previous landing committed. Best effort: the caller warns on
/// failure and goes on.
#[must_use]
pub fn reset_group(brokers: &Brokers, group: &str) -> GroupReset {
    let admin: AdminClient<DefaultClientContext> = match brokers.config().create() {
        Ok(admin) => admin,
        Err(error) => return GroupReset::Failed(error.to_string()),
    };
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    match futures_executor::block_on(admin.delete_groups(&[group], &options)) {
        Ok(results) => match results.into_iter().next() {
            Some(Ok(_)) => GroupReset::Deleted,
            Some(Err((_, RDKafkaErrorCode::GroupIdNotFound))) | None => GroupReset::NotFound,
            Some(Err((_, code))) => GroupReset::Failed(code.to_string()),
        },
        Err(error) => GroupReset::Failed(error.to_string()),
    }
}

/// A topic the broker knows, with its partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub partitions: usize,
}

/// Every topic on the brokers (internal ones, starting with `__`, left out), by name.
///
/// # Errors
/// The broker could not be reached.
pub fn list_topics(brokers: &Brokers) -> Result<Vec<Topic>, String> {
    let consumer: BaseConsumer = brokers.config().create().map_err(|e| failure(&e))?;
    let metadata = consumer
        .fetch_metadata(None, REQUEST_TIMEOUT)
        .map_err(|e| failure(&e))?;
    let mut topics: Vec<Topic> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none() && !t.name().starts_with("__"))
        .map(|t| Topic {
            name: t.name().to_owned(),
            partitions: t.partitions().len(),
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(topics)
}

/// One partition of a topic as the broker and a consumer group see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub partition: i32,
    /// The first retained offset.
    pub low: i64,
    /// One past the last offset.
    pub high: i64,
    /// The group's committed offset, if it has one.
    pub committed: Option<i64>,
}

impl PartitionLag {
    /// Messages the group has not consumed; `None` when it never committed on a partition
    /// that holds messages (nobody can say where it would start).
    #[must_use]
    pub fn lag(&self) -> Option<i64> {
        match self.committed {
            Some(committed) => Some((self.high - committed).max(0)),
            None if self.high == self.low => Some(0),
            None => None,
        }
    }
}

fn failure(error: &KafkaError) -> String {
    error.to_string()
}

/// Partitions, watermarks and `group`'s committed offsets for `topic`.
///
/// # Errors
/// The broker could not be reached or does not know the topic.
pub fn topic_lag(brokers: &Brokers, topic: &str, group: &str) -> Result<Vec<PartitionLag>, String> {
    let consumer: BaseConsumer = brokers
        .config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| failure(&e))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|e| failure(&e))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(format!("the broker knows no partitions of topic '{topic}'"));
    }
    let mut wanted = TopicPartitionList::new();
    for partition in &partitions {
        wanted.add_partition(topic, *partition);
    }
    let committed = consumer
        .committed_offsets(wanted, REQUEST_TIMEOUT)
        .map_err(|e| failure(&e))?;
    partitions
        .iter()
        .map(|&partition| {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
                .map_err(|e| failure(&e))?;
            let committed =
                committed
                    .find_partition(topic, partition)
                    .and_then(|p| match p.offset() {
                        Offset::Offset(offset) => Some(offset),
                        _ => None,
                    });
            Ok(PartitionLag {
                partition,
                low,
                high,
                committed,
            })
        })
        .collect()
}

/// Creates `topic` with `partitions` partitions; with `replace`, deletes it first (its
/// messages too). An existing topic is left as it is otherwise.
///
/// # Errors
/// The broker refused or could not be reached.
pub fn create_topic(
    brokers: &Brokers,
    topic: &str,
    partitions: i32,
    replace: bool,
) -> Result<(), String> {
    use rdkafka::admin::{NewTopic, TopicReplication};
    let admin: AdminClient<DefaultClientContext> =
        brokers.config().create().map_err(|e| failure(&e))?;
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    if replace {
        let deleted = futures_executor::block_on(admin.delete_topics(&[topic], &options))
            .map_err(|e| failure(&e))?;
        for result in deleted {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((_, code)) => return Err(format!("deleting topic '{topic}': {code}")),
            }
        }
    }
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let created = futures_executor::block_on(admin.create_topics([&new], &options))
        .map_err(|e| failure(&e))?;
    for result in created {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(format!("creating topic '{topic}': {code}")),
        }
    }
    Ok(())
}

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub partition: i32,
    pub key: String,
    pub value: String,
    pub timestamp_ms: i64,
}

/// Sends `messages` to `topic` and waits until the broker has them all.
///
/// # Errors
/// A message the broker did not take.
pub fn produce(brokers: &Brokers, topic: &str, messages: &[Message]) -> Result<(), String> {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let producer: ThreadedProducer<Deliveries> = brokers
        .config()
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create_with_context(Deliveries::default())
        .map_err(|e| failure(&e))?;
    for message in messages {
        let record = BaseRecord::to(topic)
            .partition(message.partition)
            .key(&message.key)
            .payload(&message.value)
            .timestamp(message.timestamp_ms);
        producer
            .send(record)
            .map_err(|(error, _)| format!("queueing a message for '{topic}': {error}"))?;
    }
    producer
        .flush(Duration::from_secs(60))
        .map_err(|e| format!("delivering to '{topic}': {e}"))?;
    let failed = producer
        .context()
        .failed
        .load(std::sync::atomic::Ordering::SeqCst);
    if failed > 0 {
        return Err(format!("{failed} messages to '{topic}' were not delivered"));
    }
    Ok(())
}

/// Counts messages the broker did not take.
#[derive(Default)]
struct Deliveries {
    failed: std::sync::atomic::AtomicUsize,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, (): ()) {
        if result.is_err() {
            self.failed
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_unknown_only_without_a_commit_on_a_partition_with_messages() {
        let partition = |committed, low, high| PartitionLag {
            partition: 0,
            low,
            high,
            committed,
        };
        assert_eq!(partition(Some(7), 0, 10).lag(), Some(3));
        assert_eq!(partition(Some(12), 0, 10).lag(), Some(0));
        assert_eq!(partition(None, 4, 4).lag(), Some(0));
        assert_eq!(partition(None, 0, 4).lag(), None);
    }

    #[test]
    fn only_client_relevant_settings_reach_the_client() {
        assert_eq!(client_setting("kafka_sasl_password"), Some("sasl.password"));
        assert_eq!(client_setting("kafka_poll_timeout_ms"), None);
        let brokers = Brokers {
            list: "user:secret@host:9092".into(),
            settings: vec![("kafka_sasl_password".into(), "p".into())],
        };
        assert_eq!(format!("{brokers:?}"), "Brokers(..)");
    }
}
