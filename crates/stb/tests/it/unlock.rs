//! `stb unlock` against the local stack: breaks a dead run's lock and records it, refuses a
//! live run's lock, and says so when there is nothing to break.

use serde_json::Value;
use stb_test_support::{TestDatabase, stack};
use stb_warehouse::{Client, ConnectionConfig, TargetLock, lock_holder, metadata};

const PROJECT: &[(&str, &str)] = &[
    (
        "streambuild_project.toml",
        "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"not_used_here\"\n",
    ),
    (
        "sources/orders.yml",
        "sources:\n  - name: orders\n    kind: kafka\n    broker_list: b:9092\n    topic: orders\n    replay_boundary: {mode: offsets}\n",
    ),
    (
        "pipelines/pl__orders/orders_clean.sql",
        "SELECT id::UInt64 AS id FROM __source(\"orders\")\n",
    ),
];

fn project() -> tempfile::TempDir {
    stb_test_support::project_dir(PROJECT)
}

fn client() -> Client {
    Client::new(ConnectionConfig {
        port: stack().clickhouse_port,
        ..ConnectionConfig::default()
    })
    .expect("client")
}

fn unlock(dir: &tempfile::TempDir, database: &str) -> (bool, Value) {
    let output = stb_test_support::stb_on_project(
        dir.path(),
        &["unlock", "--json", "--database", database],
        "",
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

#[test]
fn a_dead_runs_lock_is_broken_and_the_break_recorded() {
    let dir = project();
    let db = TestDatabase::create("unlock_dead");
    let client = client();
    metadata::migrate(&client, &db.name).expect("metadata");
    // The run heartbeated a minute ago, then died holding the lock.
    client
        .execute(
            &format!("INSERT INTO {}._streambuild_run_events (invocation_id, sequence, emitted_at, event_kind, payload_json) VALUES ('run-dead', 4, now64(3, 'UTC') - INTERVAL 60 SECOND, 'run_heartbeat', '{{}}')", db.name),
            None,
        )
        .expect("event");
    let _held = TargetLock::acquire(&client, &db.name, "run-dead", false).expect("lock");
    let (ok, json) = unlock(&dir, &db.name);
    assert!(ok, "{json}");
    assert_eq!(json["broken_owner"], "run-dead");
    assert_eq!(lock_holder(&client, &db.name).expect("read"), None);
    let events = client
        .query(&format!(
            "SELECT sequence, payload_json FROM {}._streambuild_run_events WHERE invocation_id = 'run-dead' AND event_kind = 'lock_broken'",
            db.name
        ))
        .expect("events");
    assert_eq!(events.text(0, "sequence").as_deref(), Some("5"));
    assert!(
        events
            .text(0, "payload_json")
            .is_some_and(|p| p.contains("brokenBy")),
        "{events:?}"
    );
    // Nothing left to break.
    let (ok, json) = unlock(&dir, &db.name);
    assert!(ok);
    assert_eq!(json["locked"], false);
    assert!(json.get("broken_owner").is_none());
}

#[test]
fn a_live_runs_lock_is_kept() {
    let dir = project();
    let db = TestDatabase::create("unlock_live");
    let client = client();
    metadata::migrate(&client, &db.name).expect("metadata");
    client
        .execute(
            &format!("INSERT INTO {}._streambuild_run_events (invocation_id, sequence, event_kind, payload_json) VALUES ('run-live', 1, 'run_heartbeat', '{{}}')", db.name),
            None,
        )
        .expect("event");
    let _held = TargetLock::acquire(&client, &db.name, "run-live", false).expect("lock");
    let (ok, json) = unlock(&dir, &db.name);
    assert!(!ok);
    assert_eq!(json["error"]["code"], "STB-LOCK-003", "{json}");
    assert_eq!(
        lock_holder(&client, &db.name).expect("read").as_deref(),
        Some("run-live")
    );
    TargetLock::of_owner(&client, &db.name, "run-live")
        .release()
        .expect("cleanup");
}
