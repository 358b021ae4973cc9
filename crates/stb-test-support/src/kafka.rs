//! Kafka helpers for tests: topics and a producer that sends one record per request.
//!
//! tansu 0.6.0 reports a wrong high watermark after a multi-record batch, so the producer
//! disables batching (`linger.ms=0`, one in-flight request, flush after every record).

use std::time::Duration;

use std::sync::Mutex;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, Message};

/// Creates `name` with `partitions` partitions on `brokers` and waits until its metadata
/// shows every partition.
///
/// # Panics
/// When the broker refuses: the test cannot go on.
pub fn create_topic(brokers: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("an admin client");
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let results = futures_executor::block_on(admin.create_topics([&topic], &AdminOptions::new()));
    for result in results.expect("create_topics request") {
        result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
    }
    let producer = producer(brokers);
    let ready = crate::wait_for(Duration::from_secs(20), || {
        producer
            .client()
            .fetch_metadata(Some(name), Duration::from_secs(2))
            .is_ok_and(|metadata| {
                metadata.topics().first().is_some_and(|topic| {
                    topic.partitions().len() == usize::try_from(partitions).unwrap_or(0)
                })
            })
    });
    assert!(ready, "topic {name} did not show {partitions} partitions");
}

/// A message timestamp base for this test process: an hour before it started. Records stamped
/// from it are always recent, so no broker retention, TTL or `now()` comparison can expire
/// them whatever the date, and the same value is returned to every caller in the process so
/// a test can compute the timestamps it expects back.
#[must_use]
pub fn run_base_ms() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        now - 3_600_000
    })
}

/// One record to send.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub key: String,
    pub value: String,
    pub headers: Vec<(String, String)>,
    pub timestamp_ms: i64,
}

/// Remembers each delivery's outcome so [`produce`] can fail loudly on a lost record.
#[derive(Default)]
pub struct DeliveryLog {
    /// `(partition, offset)` of delivered records, in delivery order.
    pub delivered: Mutex<Vec<(i32, i64)>>,
    pub failures: Mutex<Vec<String>>,
}

impl ClientContext for DeliveryLog {}

impl ProducerContext for DeliveryLog {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        match result {
            Ok(message) => lock(&self.delivered).push((message.partition(), message.offset())),
            Err((error, _)) => lock(&self.failures).push(error.to_string()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A producer that sends each record in its own request.
pub fn producer(brokers: &str) -> ThreadedProducer<DeliveryLog> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("max.in.flight.requests.per.connection", "1")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "30000")
        .create_with_context(DeliveryLog::default())
        .expect("a producer")
}

/// Sends `records` to `topic`, waiting for each delivery before the next. Returns the
/// `(partition, offset)` the broker gave each record.
///
/// # Panics
/// When a record cannot be delivered.
pub fn produce(brokers: &str, topic: &str, records: &[Record]) -> Vec<(i32, i64)> {
    let producer = producer(brokers);
    for record in records {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value.as_bytes()),
            });
        }
        let base = BaseRecord::to(topic)
            .partition(record.partition)
            .key(record.key.as_bytes())
            .payload(record.value.as_bytes())
            .headers(headers)
            .timestamp(record.timestamp_ms);
        producer
            .send(base)
            .unwrap_or_else(|(error, _)| panic!("queueing a record for {topic}: {error}"));
        producer
            .flush(Duration::from_secs(30))
            .unwrap_or_else(|error| panic!("delivering a record to {topic}: {error}"));
    }
    let failures = lock(&producer.context().failures).clone();
    assert!(
        failures.is_empty(),
        "records to {topic} were not delivered: {failures:?}"
    );
    lock(&producer.context().delivered).clone()
}
