//! The official `clickhouse` crate against the local server: what StreamBuild itself will use.

use clickhouse::{Client, Compression, Row};
use serde::{Deserialize, Serialize};
use stb_test_support::{TestDatabase, stack};

#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
struct Event {
    id: u64,
    name: String,
    amount: f64,
}

fn client(database: &str, compression: Compression) -> Client {
    Client::default()
        .with_url(&stack().clickhouse_url)
        .with_database(database)
        .with_compression(compression)
}

fn events(count: u64) -> Vec<Event> {
    (0..count)
        .map(|id| Event {
            id,
            name: format!("event-{id}"),
            amount: f64::from(u32::try_from(id).expect("small")) * 1.5,
        })
        .collect()
}

/// The blocking test harness runs outside the runtime; only the client's calls are async.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

async fn round_trip(database: &str, compression: Compression) {
    let client = client(database, compression);
    client
        .query("CREATE TABLE events (id UInt64, name String, amount Float64) ENGINE = MergeTree ORDER BY id")
        .execute()
        .await
        .expect("create");
    let expected = events(2_000);
    let mut insert = client.insert::<Event>("events").await.expect("insert");
    for event in &expected {
        insert.write(event).await.expect("write");
    }
    insert.end().await.expect("end");

    let all = client
        .query("SELECT ?fields FROM events ORDER BY id")
        .fetch_all::<Event>()
        .await
        .expect("fetch_all");
    assert_eq!(all, expected);

    let one = client
        .query("SELECT ?fields FROM events WHERE id = ?")
        .bind(7_u64)
        .fetch_one::<Event>()
        .await
        .expect("fetch_one");
    assert_eq!(one, expected[7]);

    let count = client
        .query("SELECT count() FROM events WHERE amount > {min:Float64}")
        .param("min", 1_000.0_f64)
        .fetch_one::<u64>()
        .await
        .expect("param");
    assert_eq!(
        count,
        expected.iter().filter(|e| e.amount > 1_000.0).count() as u64
    );

    let mut cursor = client
        .query("SELECT ?fields FROM events ORDER BY id")
        .fetch::<Event>()
        .expect("cursor");
    let mut seen = 0_u64;
    while let Some(event) = cursor.next().await.expect("next") {
        assert_eq!(event.id, seen);
        seen += 1;
    }
    assert_eq!(seen, 2_000);
    let summary = cursor.summary().expect("X-ClickHouse-Summary");
    assert_eq!(summary.read_rows(), Some(2_000));
}

#[test]
fn rows_round_trip_without_compression() {
    let db = TestDatabase::create("crate");
    block_on(round_trip(&db.name, Compression::None));
}

#[test]
fn rows_round_trip_with_lz4_compression() {
    let db = TestDatabase::create("crate_lz4");
    block_on(round_trip(&db.name, Compression::Lz4));
}

#[test]
fn server_errors_reach_the_client_with_their_code() {
    let client = client("default", Compression::None);
    let error = block_on(
        client
            .query("SELECT * FROM no_such_table_for_crate_test")
            .fetch_all::<u8>(),
    )
    .expect_err("unknown table");
    let text = error.to_string();
    assert!(
        text.contains("UNKNOWN_TABLE") || text.contains("Code: 60"),
        "{text}"
    );
}
