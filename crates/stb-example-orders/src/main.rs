//! `orders-producer`: sends the demo's commerce events to Kafka. The same range of event
//! numbers always gives the same events, so a demo run can be checked exactly.

use std::process::ExitCode;

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
}

/// The topic's partitions: an order's events share one, so they stay in order.
const PARTITIONS: u64 = 3;
const KINDS: [&str; 3] = ["created", "paid", "shipped"];
/// 2026-11-01T00:00:00Z in milliseconds.
const FIRST_EVENT_MS: i64 = 1_793_491_200_000;

/// Event `n`: every order has three events, one second apart per event number.
fn event(n: u64) -> Message {
    let order = n / 3;
    let kind = KINDS[usize::try_from(n % 3).unwrap_or(0)];
    let customer = (order * 7) % 25;
    let amount_cents = 500 + (order * 37) % 9_500;
    let millis = FIRST_EVENT_MS + i64::try_from(n).unwrap_or(i64::MAX / 2_000) * 1_000;
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
    let messages: Vec<Message> = (args.from..args.from + args.count).map(event).collect();
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
        let first = event(4);
        assert_eq!(first, event(4));
        assert_eq!(first.key, "order-000001");
        assert!(first.value.contains("\"kind\":\"paid\""));
        assert!(first.value.contains("\"event_id\":\"evt-00000004\""));
        assert_eq!(event(3).partition, event(5).partition);
        assert_eq!(event(4).timestamp_ms - event(3).timestamp_ms, 1_000);
    }
}
