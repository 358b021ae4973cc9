//! `orders-producer`: sends the demo's commerce events to Kafka. The same range of event
//! numbers always gives the same events (ids, orders, customers, amounts), so a demo run can
//! be checked exactly; only their time follows the run's clock, so no retention, TTL or
//! `now()` comparison can expire them whatever the calendar says.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;
use stb_kafka::{Brokers, Message, create_topic, produce};

/// Send deterministic order events (created, paid, shipped) to a Kafka topic.
#[derive(Debug, Parser)]
#[command(name = "orders-producer", version)]
struct Args {
    /// Kafka brokers (host:port,...).
    #[arg(long, env = "STB_LOCAL_KAFKA_BROKERS")]
    brokers: String,
    /// The topic to send to.
    #[arg(long, default_value = "orders.events")]
    topic: String,
    /// Number of the first event.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// How many events to send.
    #[arg(long, default_value_t = 300)]
    count: u64,
    /// Delete and create the topic (3 partitions) first.
    #[arg(long)]
    reset_topic: bool,
    /// Event time of the last event sent, in Unix milliseconds; earlier events are one
    /// second apart before it. Default: now, so events are always as fresh as the run.
    #[arg(long, value_name = "MILLIS")]
    last_event_time_ms: Option<i64>,
}

/// The topic's partitions: an order's events share one, so they stay in order.
const PARTITIONS: u64 = 3;
const KINDS: [&str; 3] = ["created", "paid", "shipped"];
/// Events of one batch are this far apart.
const EVENT_SPACING_MS: i64 = 1_000;

/// The event time of the batch's first event: the last one lands at `last_ms`.
fn first_event_ms(last_ms: i64, count: u64) -> i64 {
    let earlier = i64::try_from(count.saturating_sub(1)).unwrap_or(i64::MAX / EVENT_SPACING_MS);
    last_ms.saturating_sub(earlier.saturating_mul(EVENT_SPACING_MS))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Event `n` of a batch that starts at `from` with its first event at `first_ms`: every
/// order has three events, one second apart per event number.
fn event(n: u64, from: u64, first_ms: i64) -> Message {
    let order = n / 3;
    let kind = KINDS[usize::try_from(n % 3).unwrap_or(0)];
    let customer = (order * 7) % 25;
    let amount_cents = 500 + (order * 37) % 9_500;
    let position = i64::try_from(n.saturating_sub(from)).unwrap_or(i64::MAX / EVENT_SPACING_MS);
    let millis = first_ms.saturating_add(position.saturating_mul(EVENT_SPACING_MS));
    let value = format!(
        "{{\"event_id\":\"evt-{n:08}\",\"order_id\":\"order-{order:06}\",\"customer_id\":\"customer-{customer:02}\",\"kind\":\"{kind}\",\"amount_cents\":{amount_cents},\"event_time_ms\":{millis}}}"
    );
    Message {
        partition: i32::try_from(order % PARTITIONS).unwrap_or(0),
        key: format!("order-{order:06}"),
        value,
        timestamp_ms: millis,
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let brokers = Brokers {
        list: args.brokers.clone(),
        settings: Vec::new(),
    };
    if args.reset_topic {
        let partitions = i32::try_from(PARTITIONS).unwrap_or(3);
        if let Err(error) = create_topic(&brokers, &args.topic, partitions, true) {
            eprintln!("error: {error}");
            return ExitCode::from(1);
        }
    }
    let first_ms = first_event_ms(args.last_event_time_ms.unwrap_or_else(now_ms), args.count);
    let messages: Vec<Message> = (args.from..args.from + args.count)
        .map(|n| event(n, args.from, first_ms))
        .collect();
    match produce(&brokers, &args.topic, &messages) {
        Ok(()) => {
            println!(
                "produced {} events (evt-{:08} to evt-{:08}) to {}",
                args.count,
                args.from,
                (args.from + args.count).saturating_sub(1),
                args.topic
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_deterministic_and_an_order_stays_in_one_partition() {
        let first = event(4, 0, 0);
        assert_eq!(first, event(4, 0, 0));
        assert_eq!(first.key, "order-000001");
        assert!(first.value.contains("\"kind\":\"paid\""));
        assert!(first.value.contains("\"event_id\":\"evt-00000004\""));
        assert_eq!(event(3, 0, 0).partition, event(5, 0, 0).partition);
        assert_eq!(
            event(4, 0, 0).timestamp_ms - event(3, 0, 0).timestamp_ms,
            1_000
        );
    }

    /// The demo's source keeps 30 days of history by event time: events stamped by the
    /// run's clock are minutes old when they land, whatever the date.
    #[test]
    fn event_times_follow_the_run_clock_so_retention_cannot_expire_them() {
        let before = now_ms();
        let first_ms = first_event_ms(now_ms(), 450);
        let after = now_ms();
        let times: Vec<i64> = (300..450)
            .map(|n| event(n, 300, first_event_ms(after, 150)).timestamp_ms)
            .chain((0..300).map(|n| event(n, 0, first_ms).timestamp_ms))
            .collect();
        let oldest_allowed = before - 450 * 1_000;
        assert!(
            times.iter().all(|t| (oldest_allowed..=after).contains(t)),
            "every event is stamped within the batch's span before now"
        );
        let thirty_days_ms = 30 * 24 * 3_600 * 1_000;
        assert!(times.iter().all(|t| after - t < thirty_days_ms));
        let value = event(449, 300, first_event_ms(after, 150)).value;
        assert!(
            value.contains(&format!("\"event_time_ms\":{after}")),
            "{value}"
        );
    }
}
