//! Sensors and providers as the reference authors them: loaded at compile time, listed by
//! `stb sensors list`, and every declaration against the rules a located error.

use assert_cmd::Command;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

use crate::conformance::{copy_project, reference_project};

fn stb() -> Command {
    Command::cargo_bin("stb").expect("the stb binary")
}

/// A project with one pipeline (`pl__orders`, model `orders_clean`) plus `extra` files.
fn project(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files: Vec<(&str, &str)> = vec![
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"shop\"\n",
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
    files.extend_from_slice(extra);
    stb_test_support::project_dir(&files)
}

fn list(dir: &std::path::Path) -> (bool, Value) {
    let output = stb()
        .args(["sensors", "list", "--json", "--project-dir"])
        .arg(dir)
        .output()
        .expect("stb runs");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_reference_demo_s_sensor_and_provider_load_unchanged() {
    let demo = copy_project(&reference_project("orders_demo"));
    let (ok, listed) = list(demo.path());
    assert!(ok, "{listed:#}");
    assert_eq!(listed["settings"]["enabled"], true);
    assert_eq!(listed["settings"]["tickRetentionDays"], 7);
    let sensors = listed["sensors"].as_array().expect("sensors");
    assert_eq!(sensors.len(), 1, "{listed:#}");
    let quality = &sensors[0];
    assert_eq!(quality["name"], "quality_alerts");
    assert_eq!(quality["kind"], "event");
    assert_eq!(quality["eventType"], "AuditCompleted");
    assert_eq!(quality["file"], "sensors/quality.py");
    assert_eq!(quality["defaultStatus"], "running");
    assert_eq!(quality["effectiveStatus"], "running");
    assert_eq!(quality["override"], Value::Null);
    assert_eq!(quality["retryPolicy"]["maxAttempts"], 3);
    assert_eq!(quality["retryPolicy"]["backoffSeconds"], 5.0);
    assert_eq!(quality["timeoutSeconds"], 60.0);
    assert_eq!(quality["targets"], Value::Null);
    assert_eq!(quality["triggers"], Value::Null);
    assert_eq!(
        quality["providers"],
        serde_json::json!(["console_notifier"])
    );
    assert_eq!(
        quality["description"],
        "Print a local notification when an audit newly fails or recovers."
    );
    let source = std::fs::read_to_string(demo.path().join("sensors/quality.py")).expect("read");
    assert_eq!(
        quality["fingerprint"],
        sha256(&format!("quality_alerts\0sensors/quality.py\0{source}"))
    );
    assert_eq!(
        listed["providers"],
        serde_json::json!([{"name": "console_notifier", "class": "ConsoleNotifier", "file": "providers/console.py", "line": 6}])
    );
    // The text form says the same.
    stb()
        .args(["sensors", "list", "--project-dir"])
        .arg(demo.path())
        .assert()
        .success()
        .stdout(predicates::str::contains("quality_alerts"))
        .stdout(predicates::str::contains("on AuditCompleted"))
        .stdout(predicates::str::contains("3 attempt(s), 5s backoff"))
        .stdout(predicates::str::contains(
            "provider console_notifier ConsoleNotifier (providers/console.py)",
        ));
}

const ALERTS: &str = r#"from streambuild.events import AuditCompleted, RunCompleted
from streambuild.sensors import DefaultSensorStatus, PollingSensorResult, SensorRetryPolicy, event_sensor, polling_sensor


@event_sensor(
    on=AuditCompleted,
    default_status=DefaultSensorStatus.RUNNING,
    retry_policy=SensorRetryPolicy(max_attempts=1, backoff_seconds=0),
)
def flaky_alerts(ctx):
    """Alert on audit completions; the demo webhook always fails."""

    raise RuntimeError("simulated alert delivery failure")


@event_sensor(on=RunCompleted, name="prod_runs", targets={"prod"}, maximum_event_age_seconds=60)
def paused_watch(ctx):
    """Stopped by default until an operator starts it.

    Only production's runs."""


@polling_sensor(minimum_interval_seconds=60)
def kafka_lag_watch(ctx):
    return PollingSensorResult(cursor="42")
"#;

#[test]
fn event_and_polling_sensors_are_listed_with_what_they_declare() {
    let dir = project(&[
        ("sensors/team/alerts.py", ALERTS),
        // Private: never loaded, so its syntax error is no error.
        ("sensors/_drafts.py", "def broken(:\n"),
    ]);
    let (ok, listed) = list(dir.path());
    assert!(ok, "{listed:#}");
    assert_eq!(listed["settings"]["enabled"], false);
    let names: Vec<&str> = listed["sensors"]
        .as_array()
        .expect("sensors")
        .iter()
        .map(|s| s["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["flaky_alerts", "kafka_lag_watch", "prod_runs"]);
    let sensor = |name: &str| {
        listed["sensors"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["name"] == name))
            .cloned()
            .expect("listed")
    };
    let runs = sensor("prod_runs");
    assert_eq!(runs["eventType"], "RunCompleted");
    assert_eq!(runs["targets"], serde_json::json!(["prod"]));
    assert_eq!(runs["maximumEventAgeSeconds"], 60.0);
    assert_eq!(runs["defaultStatus"], "stopped");
    assert_eq!(
        runs["description"],
        "Stopped by default until an operator starts it."
    );
    let lag = sensor("kafka_lag_watch");
    assert_eq!(lag["kind"], "polling");
    assert_eq!(lag["minimumIntervalSeconds"], 60.0);
    assert_eq!(lag["description"], Value::Null);
    assert_eq!(sensor("flaky_alerts")["file"], "sensors/team/alerts.py");
}

/// `stb sensors list --json` on a broken project: its one error.
fn one_error(files: &[(&str, &str)]) -> Value {
    let dir = project(files);
    let (ok, reported) = list(dir.path());
    assert!(!ok, "{reported:#}");
    let errors = reported["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{reported:#}");
    errors[0].clone()
}

#[test]
fn declarations_against_the_rules_are_located_errors() {
    let homemade = one_error(&[(
        "sensors/bad.py",
        "from streambuild.sensors import event_sensor\n\n\nclass HomemadeEvent:\n    pass\n\n\n@event_sensor(on=HomemadeEvent)\ndef homemade(ctx):\n    pass\n",
    )]);
    assert_eq!(homemade["code"], "STB-DISCOVER-022");
    assert_eq!(homemade["location"]["file"], "sensors/bad.py");
    assert_eq!(homemade["location"]["line"], 8);
    assert!(
        homemade["message"]
            .as_str()
            .is_some_and(|m| m.contains("Unsupported sensor event type 'HomemadeEvent'")),
        "{homemade:#}"
    );

    let twice = one_error(&[
        (
            "sensors/a.py",
            "from streambuild.events import AuditCompleted\nfrom streambuild.sensors import event_sensor\n\n@event_sensor(on=AuditCompleted)\ndef alerts(ctx):\n    pass\n",
        ),
        (
            "sensors/b.py",
            "from streambuild.events import RunCompleted\nfrom streambuild.sensors import event_sensor\n\n@event_sensor(on=RunCompleted, name=\"alerts\")\ndef other(ctx):\n    pass\n",
        ),
    ]);
    assert_eq!(twice["code"], "STB-DISCOVER-022");
    assert_eq!(
        twice["message"],
        "Sensor name collision for 'alerts' in 'sensors/a.py' and 'sensors/b.py'"
    );

    let like_a_model = one_error(&[(
        "sensors/a.py",
        "from streambuild.events import AuditCompleted\nfrom streambuild.sensors import event_sensor\n\n@event_sensor(on=AuditCompleted)\ndef orders_clean(ctx):\n    pass\n",
    )]);
    assert_eq!(like_a_model["code"], "STB-DISCOVER-023");
    assert_eq!(like_a_model["location"]["file"], "sensors/a.py");

    let retry = one_error(&[(
        "sensors/a.py",
        "from streambuild.events import AuditCompleted\nfrom streambuild.sensors import SensorRetryPolicy, event_sensor\n\n@event_sensor(on=AuditCompleted, retry_policy=SensorRetryPolicy(max_attempts=0))\ndef alerts(ctx):\n    pass\n",
    )]);
    assert!(
        retry["message"]
            .as_str()
            .is_some_and(|m| m.contains("SensorRetryPolicy.max_attempts must be at least 1")),
        "{retry:#}"
    );

    let unknown_provider = one_error(&[
        (
            "providers/slack.py",
            "from streambuild.providers import Provider\n\nclass OpsSlack(Provider):\n    webhook_url: str = \"https://hooks.example.invalid/ops\"\n",
        ),
        (
            "sensors/a.py",
            "from providers.slack import OpsSlack\nfrom streambuild.events import AuditCompleted\nfrom streambuild.sensors import event_sensor\n\n@event_sensor(on=AuditCompleted)\ndef alerts(ctx, slack: OpsSlack):\n    pass\n",
        ),
    ]);
    assert_eq!(
        unknown_provider["message"],
        "Provider parameter 'slack' requires provider 'slack', but it was not found"
    );

    let invalid_settings = one_error(&[(
        "providers/pager.py",
        "from streambuild.providers import Provider\n\nclass Pager(Provider):\n    stb_test_pager_routing_key_never_set: str\n",
    )]);
    assert_eq!(invalid_settings["code"], "STB-DISCOVER-022");
    let message = invalid_settings["message"].as_str().expect("a message");
    assert!(
        message.starts_with("Provider 'pager' in providers/pager.py has invalid settings:\nstb_test_pager_routing_key_never_set: Field required [missing]"),
        "{message}"
    );
}

#[test]
fn sensor_settings_resolve_key_by_key_from_the_local_file_to_the_project() {
    let dir = project(&[
        (
            "streambuild_project.toml",
            "name = \"shop\"\ndefault_target = \"dev\"\n[sensors]\nenabled = true\ntick_retention_days = 30\nmaximum_event_age = \"1h\"\n[targets.dev]\ndatabase = \"shop\"\n[targets.dev.sensors]\ntick_retention_days = 7\n",
        ),
        (
            "streambuild_local.toml",
            "[targets.dev.sensors]\nenabled = false\n",
        ),
    ]);
    let (ok, listed) = list(dir.path());
    assert!(ok, "{listed:#}");
    assert_eq!(
        listed["settings"],
        serde_json::json!({"enabled": false, "tickRetentionDays": 7, "maximumEventAgeSeconds": 3600})
    );
}

const DISPATCHED: &str = r#"import pathlib

from streambuild.events import AuditCompleted, AuditTransition
from streambuild.sensors import DefaultSensorStatus, SensorRetryPolicy, event_sensor

PROJECT = pathlib.Path(__file__).parent.parent


@event_sensor(on=AuditCompleted, default_status=DefaultSensorStatus.RUNNING)
def alerts(ctx):
    """Writes one line per new failure."""
    event = ctx.event
    if event.transition != AuditTransition.NEW_FAILURE:
        return
    line = f"{event.audit_name} {event.transition} {event.failure_count} {event.sample_column_names[0]}={event.sample_rows[0][0]}\n"
    ctx.step("notify", lambda: (PROJECT / "alerts.log").open("a").write(line))


@event_sensor(
    on=AuditCompleted,
    default_status=DefaultSensorStatus.RUNNING,
    retry_policy=SensorRetryPolicy(max_attempts=2, backoff_seconds=0),
)
def webhook(ctx):
    """Fails until the webhook is up."""
    if ctx.event.transition != AuditTransition.NEW_FAILURE:
        return
    if not (PROJECT / "webhook_up").exists():
        raise RuntimeError("webhook down")
"#;

fn dispatched_project(database: &str) -> tempfile::TempDir {
    let files = [
        (
            "streambuild_project.toml",
            format!("name = \"sensed\"\ndefault_target = \"dev\"\n[sensors]\nenabled = true\n[targets.dev]\ndatabase = \"{database}\"\n"),
        ),
        (
            "sources/payments.yml",
            "sources:\n  - name: payments\n    kind: stream_table\n    table_name: payments_existing\n    replay_boundary:\n      mode: timestamp\n      columns:\n        _replay_timestamp: ts\n".to_owned(),
        ),
        (
            "pipelines/pl__pay/clean.sql",
            "MODEL (order_by [\"id\"]);\nSELECT id::UInt64 AS id, amount::Int64 AS amount, ts::DateTime64(3, 'UTC') AS _replay_timestamp\nFROM __source(\"payments\")\n".to_owned(),
        ),
        (
            "audits/amounts.sql",
            "AUDIT (name no_negative_amounts, severity error);\nSELECT id, amount FROM __ref(\"clean\") WHERE amount < 0 ORDER BY id\n".to_owned(),
        ),
        ("sensors/alerts.py", DISPATCHED.to_owned()),
    ];
    stb_test_support::project_dir(&files)
}

/// A database of the test's own with the adopted `payments_existing` table: ten payments,
/// three of them negative (the audit fails on them).
fn payments_database(prefix: &str) -> stb_test_support::TestDatabase {
    let db = stb_test_support::TestDatabase::create(prefix);
    stb_test_support::execute(&format!(
        "CREATE TABLE {}.payments_existing (id UInt64, amount Int64, ts DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id",
        db.name
    ));
    stb_test_support::execute(&format!(
        "INSERT INTO {}.payments_existing SELECT number, toInt64(number) - 3, now64(3, 'UTC') FROM numbers(10)",
        db.name
    ));
    db
}

/// `stb sensors <args> --json` on the project, with the ledger at `store`.
fn sensors_json(dir: &std::path::Path, store: &str, args: &[&str]) -> (bool, Value) {
    let mut all = vec!["sensors"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--control-store-url", store]);
    let output = stb_test_support::stb_on_project(dir, &all, "");
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stb {all:?}: not JSON ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

#[test]
fn an_audit_failure_fires_each_sensor_once_across_two_dispatchers_and_a_dead_letter_is_retried() {
    let db = payments_database("sensed");
    let dir = dispatched_project(&db.name);
    let store_name = stb_test_support::unique_name("sensors");
    let created = std::process::Command::new("psql")
        .args([
            stb_test_support::postgres_url(),
            "-qAtc",
            &format!("CREATE DATABASE {store_name}"),
        ])
        .output()
        .expect("psql");
    assert!(created.status.success(), "{created:?}");
    let store = stb_test_support::postgres_database_url(&store_name);

    // First pass: each sensor starts at the head of its stream (no history replayed).
    let (ok, first) = sensors_json(dir.path(), &store, &["run"]);
    assert!(ok, "{first:#}");
    assert_eq!(
        (first["started"].clone(), first["evaluated"].clone()),
        (2.into(), 0.into())
    );

    // The build audits what it rebuilt: three negative amounts, a new failure.
    let build =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(
        build.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );

    // Two dispatchers at once on one store: the lease lets one deliver; the event fires
    // the sensor once.
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("stb"))
            .args([
                "sensors",
                "run",
                "--json",
                "--control-store-url",
                &store,
                "--project-dir",
            ])
            .arg(dir.path())
            .envs(stb_test_support::warehouse_env())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("stb starts")
    };
    let (a, b) = (spawn(), spawn());
    let passes: Vec<Value> = [a, b]
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("stb ends");
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            serde_json::from_slice(&output.stdout).expect("JSON")
        })
        .collect();
    assert!(
        passes
            .iter()
            .any(|p| p["leaseHeld"] == true && p["evaluated"].as_u64() >= Some(2)),
        "one dispatcher delivered the event to both sensors: {passes:?}"
    );
    let log = || std::fs::read_to_string(dir.path().join("alerts.log")).unwrap_or_default();
    assert_eq!(log(), "no_negative_amounts new_failure 3 id=0\n");

    // The webhook fails its second attempt too (in whichever pass makes it): out of
    // attempts, dead-lettered.
    let mut dead_lettered = 0;
    for _ in 0..3 {
        let (ok, pass) = sensors_json(dir.path(), &store, &["run"]);
        assert!(ok, "{pass:#}");
        dead_lettered += pass["deadLettered"].as_u64().unwrap_or(0);
        if dead_lettered > 0 {
            break;
        }
    }
    assert_eq!(dead_lettered, 1);
    let (_, listed) = sensors_json(dir.path(), &store, &["list"]);
    assert_eq!(listed["deadLetterCount"], 1, "{listed:#}");
    let letter = &listed["deadLetters"][0];
    assert_eq!(letter["sensorName"], "webhook");
    assert_eq!(letter["status"], "dead_lettered");
    assert_eq!(letter["errorMessage"], "RuntimeError: webhook down");
    let event_id = letter["eventId"].as_str().expect("an event id").to_owned();
    let webhook = listed["sensors"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == "webhook"))
        .expect("listed");
    assert_eq!(webhook["lastTick"]["status"], "dead_lettered");

    // A skip needs a reason; a retry once the webhook is up succeeds and clears it.
    let (ok, blank) = sensors_json(
        dir.path(),
        &store,
        &["skip", "webhook", &event_id, "--reason", " "],
    );
    assert!(!ok);
    assert_eq!(blank["error"]["code"], "STB-SENSOR-003");
    std::fs::write(dir.path().join("webhook_up"), "").expect("flag");
    let (ok, retried) = sensors_json(dir.path(), &store, &["retry", "webhook", &event_id]);
    assert!(ok, "{retried:#}");
    assert_eq!(
        retried,
        serde_json::json!({"sensorName": "webhook", "eventId": event_id, "status": "succeeded"})
    );
    let (_, listed) = sensors_json(dir.path(), &store, &["list"]);
    assert_eq!(listed["deadLetterCount"], 0, "{listed:#}");
    let (ok, again) = sensors_json(dir.path(), &store, &["retry", "webhook", &event_id]);
    assert!(!ok, "no longer a dead letter: {again:#}");

    // Nothing left to deliver; the alert was sent once.
    let (ok, idle) = sensors_json(dir.path(), &store, &["run"]);
    assert!(ok, "{idle:#}");
    assert_eq!(idle["evaluated"], 0, "{idle:#}");
    assert_eq!(log().lines().count(), 1);
}

/// A PostgreSQL control store of the test's own: its URL.
fn postgres_store(prefix: &str) -> String {
    let name = stb_test_support::unique_name(prefix);
    let created = std::process::Command::new("psql")
        .args([
            stb_test_support::postgres_url(),
            "-qAtc",
            &format!("CREATE DATABASE {name}"),
        ])
        .output()
        .expect("psql");
    assert!(created.status.success(), "{created:?}");
    stb_test_support::postgres_database_url(&name)
}

#[test]
fn two_dev_servers_on_one_store_fire_an_audit_failure_once_and_retry_a_dead_letter_through_the_api()
{
    use crate::dev_server::{PASSWORD, banner, call, dev, sign_in, stop};
    let db = payments_database("sensed_dev");
    let dir = dispatched_project(&db.name);
    let store = postgres_store("sensors_dev");
    let created = stb_test_support::stb_on_project(
        dir.path(),
        &[
            "admin",
            "--control-store-url",
            &store,
            "create-user",
            "--username",
            "ops",
            "--authentication-source",
            "password",
            "--role",
            "admin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(created.status.success(), "{created:?}");
    // Killed if the test fails before it stops them.
    struct Running(Vec<std::process::Child>);
    impl Drop for Running {
        fn drop(&mut self) {
            for child in &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let mut running = Running(Vec::new());
    let servers: Vec<_> = (0..2)
        .map(|_| {
            let mut child = dev(
                dir.path(),
                &[
                    "--ui-port",
                    "0",
                    "--auth-mode",
                    "password",
                    "--auth-insecure-cookie",
                    "--control-store-url",
                    &store,
                ],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("stb dev starts");
            let (api, lines) = banner(&mut child);
            let session = sign_in(&api, "ops");
            running.0.push(child);
            (api, lines, session)
        })
        .collect();
    let sensors = |(api, session): (&str, &(String, String))| {
        let (status, body, _) = call(api, "GET", "/sensors", Some((&session.0, &session.1)), None);
        assert_eq!(status, 200, "{body}");
        body
    };
    let each = || {
        servers
            .iter()
            .map(|(api, _, session)| sensors((api.as_str(), session)))
            .collect::<Vec<Value>>()
    };
    // One server holds the lease and has started the sensors at the stream's head; the
    // other stands by.
    let mut healths = Vec::new();
    let settled = stb_test_support::wait_for(Duration::from_secs(90), || {
        healths = each().into_iter().map(|s| s["health"].clone()).collect();
        healths
            .iter()
            .filter(|h| h["leaseHeld"] == true && !h["lastSuccessfulTick"].is_null())
            .count()
            == 1
            && healths.iter().filter(|h| h["state"] == "standby").count() == 1
    });
    assert!(settled, "{healths:#?}");
    let listed = &each()[0];
    let alerts = listed["sensors"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == "alerts"))
        .expect("listed");
    assert_eq!(
        (alerts["kind"].clone(), alerts["eventType"].clone()),
        ("event".into(), "AuditCompleted".into())
    );
    assert_eq!(alerts["effectiveStatus"], "running");

    let build =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(
        build.status.code(),
        Some(1),
        "the audit fails: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    // The webhook fails twice (one attempt a pass) and is dead-lettered.
    let (api, session) = (&servers[0].0, &servers[0].2);
    let auth = Some((session.0.as_str(), session.1.as_str()));
    let mut letters = Value::Null;
    let dead = stb_test_support::wait_for(Duration::from_secs(90), || {
        letters = call(api, "GET", "/sensors/dead-letters", auth, None).1;
        letters["deadLetters"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    });
    assert!(dead, "{letters:#}");
    let log = std::fs::read_to_string(dir.path().join("alerts.log")).unwrap_or_default();
    assert_eq!(
        log, "no_negative_amounts new_failure 3 id=0\n",
        "once across both servers"
    );
    let letter = &letters["deadLetters"][0];
    assert_eq!(
        (letter["sensorName"].clone(), letter["errorMessage"].clone()),
        ("webhook".into(), "RuntimeError: webhook down".into())
    );
    let event_id = letter["eventId"].as_str().expect("an event id").to_owned();
    let (status, ticks, _) = call(api, "GET", "/sensors/webhook/ticks?limit=10", auth, None);
    assert_eq!(status, 200, "{ticks}");
    let statuses: Vec<&str> = ticks["ticks"]
        .as_array()
        .expect("ticks")
        .iter()
        .filter_map(|t| t["status"].as_str())
        .collect();
    assert_eq!(
        statuses,
        ["dead_lettered", "failed", "failed"],
        "newest first: {ticks:#}"
    );
    let (status, bad, _) = call(
        api,
        "GET",
        "/sensors/webhook/ticks?after=yesterday",
        auth,
        None,
    );
    assert_eq!(
        (status, bad["detail"].clone()),
        (
            400,
            "after must be an ISO timestamp, received 'yesterday'".into()
        )
    );
    let (status, _, _) = call(api, "GET", "/sensors/nope/ticks", auth, None);
    assert_eq!(status, 404);

    // Retry from the API once the webhook is up: it succeeds and leaves the dead letters.
    std::fs::write(dir.path().join("webhook_up"), "").expect("flag");
    let body = format!(r#"{{"sensorName": "webhook", "eventId": "{event_id}"}}"#);
    let (status, retried, _) = call(
        api,
        "POST",
        "/sensors/dead-letters/retry",
        auth,
        Some(&body),
    );
    assert_eq!(status, 200, "{retried}");
    assert_eq!(
        retried,
        serde_json::json!({"sensorName": "webhook", "eventId": event_id, "status": "succeeded"})
    );
    let (_, letters, _) = call(api, "GET", "/sensors/dead-letters", auth, None);
    assert_eq!(letters["deadLetters"], serde_json::json!([]));
    // An operator stops a sensor: the override shows on the other server too.
    let (status, stopped, _) = call(
        api,
        "POST",
        "/sensors/alerts/status",
        auth,
        Some(r#"{"status": "stopped"}"#),
    );
    assert_eq!(
        (status, stopped),
        (
            200,
            serde_json::json!({"sensorName": "alerts", "status": "stopped"})
        )
    );
    let other = &each()[1];
    let alerts = other["sensors"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == "alerts"))
        .expect("listed");
    assert_eq!(
        (
            alerts["effectiveStatus"].clone(),
            alerts["override"].clone()
        ),
        ("stopped".into(), "stopped".into())
    );
    for ((_, lines, _), child) in servers.into_iter().zip(std::mem::take(&mut running.0)) {
        stop(child, lines);
    }
    let log = std::fs::read_to_string(dir.path().join("alerts.log")).unwrap_or_default();
    assert_eq!(log.lines().count(), 1);
}

/// A sensor whose events are always too old: it must never receive one.
const TOO_OLD: &str = r#"import pathlib

from streambuild.events import AuditCompleted
from streambuild.sensors import DefaultSensorStatus, event_sensor


@event_sensor(on=AuditCompleted, default_status=DefaultSensorStatus.RUNNING, maximum_event_age_seconds=0.001)
def stale(ctx):
    (pathlib.Path(__file__).parent.parent / "stale.log").write_text(ctx.event.id)
"#;

#[test]
fn the_reference_demo_s_sensor_runs_unchanged_on_an_audit_failure() {
    let db = payments_database("sensed_demo");
    let dir = dispatched_project(&db.name);
    // The reference's own files, byte for byte, in place of this test's sensors.
    let demo = reference_project("orders_demo");
    std::fs::remove_file(dir.path().join("sensors/alerts.py")).expect("rm");
    std::fs::create_dir_all(dir.path().join("providers")).expect("mkdir");
    for file in ["sensors/quality.py", "providers/console.py"] {
        std::fs::copy(demo.join(file), dir.path().join(file)).expect("copy");
    }
    std::fs::write(dir.path().join("sensors/stale.py"), TOO_OLD).expect("write");
    let run = || stb_test_support::stb_on_project(dir.path(), &["sensors", "run", "--json"], "");
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let build =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(build.status.code(), Some(1), "the audit fails");
    let second = run();
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let pass: Value = serde_json::from_slice(&second.stdout).expect("JSON");
    assert_eq!(
        (pass["evaluated"].clone(), pass["succeeded"].clone()),
        (1.into(), 1.into()),
        "{pass:#}"
    );
    // ConsoleNotifier prints to the process's console: the sensor worker's stderr.
    let console = String::from_utf8_lossy(&second.stderr);
    assert!(
        console.contains(
            "[orders-demo] ERROR: no_negative_amounts on dev has 3 failing row(s). Inspect: http://127.0.0.1:8000/quality?audit=no_negative_amounts. Sample: {\"id\":"
        ),
        "{console}"
    );
    assert!(
        !dir.path().join("stale.log").exists(),
        "an event past maximum_event_age is not delivered"
    );
    // Delivered once: a third pass has nothing to do.
    let third = run();
    let pass: Value = serde_json::from_slice(&third.stdout).expect("JSON");
    assert_eq!(pass["evaluated"], 0, "{pass:#}");
    assert!(!String::from_utf8_lossy(&third.stderr).contains("[orders-demo]"));
}

#[test]
fn a_dev_server_stops_while_a_sensor_s_handler_still_runs() {
    use crate::dev_server::{banner, call, dev, stop};
    let db = payments_database("sensed_stop");
    let dir = dispatched_project(&db.name);
    // One sensor whose handler outlives any test: it says it started, then sleeps.
    std::fs::write(
        dir.path().join("sensors/alerts.py"),
        "import os, pathlib, time\nfrom streambuild.events import AuditCompleted\nfrom streambuild.sensors import DefaultSensorStatus, event_sensor\n\n\n@event_sensor(on=AuditCompleted, default_status=DefaultSensorStatus.RUNNING, timeout_seconds=3600)\ndef slow(ctx):\n    (pathlib.Path(__file__).parent.parent / \"started\").write_text(str(os.getpid()))\n    time.sleep(3000)\n",
    )
    .expect("write");
    let build =
        stb_test_support::stb_on_project(dir.path(), &["build", "--auto-approve", "--json"], "");
    assert_eq!(build.status.code(), Some(1), "the audit fails");
    let mut child = dev(dir.path(), &["--ui-port", "0", "--auth-mode", "disabled"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("stb dev starts");
    let (api, lines) = banner(&mut child);
    let mut health = Value::Null;
    let started = stb_test_support::wait_for(Duration::from_secs(90), || {
        health = call(&api, "GET", "/sensors", None, None).1["health"].clone();
        !health["lastSuccessfulTick"].is_null()
    });
    assert!(started, "{health:#}");
    let audit = stb_test_support::stb_on_project(dir.path(), &["audit", "--json"], "");
    assert_eq!(
        audit.status.code(),
        Some(1),
        "the audit fails again: an event"
    );
    let handler = dir.path().join("started");
    assert!(
        stb_test_support::wait_for(Duration::from_secs(90), || handler.exists()),
        "the handler started"
    );
    let worker = std::fs::read_to_string(&handler).expect("the worker's pid");
    // SIGTERM now: the server ends (and says so) without waiting out the handler, and its
    // sensor worker does not outlive it.
    stop(child, lines);
    let proc_dir = std::path::Path::new("/proc").join(worker.trim());
    assert!(
        stb_test_support::wait_for(Duration::from_secs(30), || !proc_dir.exists()),
        "the sensor worker {worker} still runs"
    );
}
