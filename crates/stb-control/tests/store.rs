//! One suite of control-store rules, run against SQLite (a file) and a real PostgreSQL
//! server (`scripts/test-postgres.sh`, started by the tests when it is not running).

use stb_control::{ControlStore, ErrorKind, NewUser, Source, StoreError};

const PASSWORD: &str = "correct horse battery";

fn user(name: &str, roles: &[&str]) -> NewUser {
    NewUser {
        username: name.to_owned(),
        display_name: Some(format!("{name} display")),
        email: None,
        source: Source::Password(PASSWORD.to_owned()),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
    }
}

fn kind<T: std::fmt::Debug>(result: Result<T, StoreError>) -> ErrorKind {
    result.expect_err("refused").kind
}

/// A fresh SQLite store in a temporary directory.
async fn sqlite() -> (tempfile::TempDir, ControlStore, String) {
    let dir = tempfile::tempdir().expect("dir");
    let url = stb_control::default_url(dir.path());
    let store = ControlStore::open(&url).await.expect("sqlite store");
    (dir, store, url)
}

/// A fresh PostgreSQL store: a database of its own on the test server.
async fn postgres() -> (ControlStore, String) {
    use sqlx::Connection as _;
    let name = stb_test_support::unique_name("ctl");
    sqlx::any::install_default_drivers();
    let server = stb_test_support::postgres_url().replace("postgresql://", "postgres://");
    let mut admin = sqlx::AnyConnection::connect(&server)
        .await
        .expect("the test PostgreSQL server answers");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create database");
    let url = stb_test_support::postgres_database_url(&name);
    let store = ControlStore::open(&url).await.expect("postgres store");
    (store, url)
}

async fn suite(store: &ControlStore, url: &str) {
    schema(store, url).await;
    accounts(store).await;
    last_admin(store).await;
    concurrent_last_admin(store).await;
    sessions(store).await;
    proxy_provisioning(store).await;
    project_roles(store).await;
    destruction_plans(store, url).await;
    audit_log(store).await;
    sensor_ledger(store, url).await;
}

async fn schema(store: &ControlStore, url: &str) {
    let versions = store.schema_versions().await.expect("versions");
    assert_eq!(
        versions,
        vec![
            ("accounts".to_owned(), 1),
            ("destruction_plans".to_owned(), 1),
            ("sensors".to_owned(), 1)
        ]
    );
    // Opening again migrates nothing and changes nothing.
    let again = ControlStore::open(url).await.expect("reopen");
    assert_eq!(again.schema_versions().await.expect("versions"), versions);
    again.close().await;
}

async fn accounts(store: &ControlStore) {
    let alice = store
        .create_user(&user("  Alice ", &["admin"]), None)
        .await
        .expect("alice");
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.roles, vec!["admin".to_owned()]);
    assert!(alice.is_admin());
    assert_eq!(
        kind(store.create_user(&user("ALICE", &[]), None).await),
        ErrorKind::Conflict
    );
    assert_eq!(
        kind(store.create_user(&user(".bad", &[]), None).await),
        ErrorKind::Validation
    );
    let short = NewUser {
        source: Source::Password("too short".into()),
        ..user("bob", &[])
    };
    assert_eq!(
        kind(store.create_user(&short, None).await),
        ErrorKind::Validation
    );
    assert_eq!(
        kind(store.create_user(&user("bob", &["operator"]), None).await),
        ErrorKind::Validation
    );
    // Nothing of a refused creation remains.
    assert_eq!(store.find_user("bob").await.expect("read"), None);
    let bob = store
        .create_user(&user("bob", &[]), None)
        .await
        .expect("bob");
    assert_eq!(bob.roles, vec!["viewer".to_owned()], "viewer by default");

    // Passwords.
    let signed_in = store
        .verify_password("BOB", PASSWORD)
        .await
        .expect("verify");
    assert_eq!(signed_in.map(|u| u.id), Some(bob.id.clone()));
    assert_eq!(
        store
            .verify_password("bob", "wrong password!")
            .await
            .expect("verify"),
        None
    );
    assert_eq!(
        store
            .verify_password("nobody", PASSWORD)
            .await
            .expect("verify"),
        None
    );
    assert_eq!(
        store
            .verify_password("<bad>", PASSWORD)
            .await
            .expect("verify"),
        None
    );
    store
        .reset_password("bob", "another long secret", None)
        .await
        .expect("reset");
    assert_eq!(
        store
            .verify_password("bob", PASSWORD)
            .await
            .expect("verify"),
        None
    );
    assert!(
        store
            .verify_password("bob", "another long secret")
            .await
            .expect("verify")
            .is_some()
    );
    assert_eq!(
        kind(store.reset_password("bob", "short", None).await),
        ErrorKind::Validation
    );
    assert_eq!(
        kind(store.reset_password("ghost", PASSWORD, None).await),
        ErrorKind::NotFound
    );
    // A disabled account cannot sign in.
    store.set_active("bob", false, None).await.expect("disable");
    assert_eq!(
        store
            .verify_password("bob", "another long secret")
            .await
            .expect("verify"),
        None
    );
    store.set_active("bob", true, None).await.expect("enable");
    // Roles.
    let granted = store.grant_role("bob", "admin", None).await.expect("grant");
    assert_eq!(granted.roles, vec!["admin".to_owned(), "viewer".to_owned()]);
    store
        .revoke_role("bob", "admin", None)
        .await
        .expect("revoke");
    assert_eq!(
        kind(store.revoke_role("bob", "admin", None).await),
        ErrorKind::NotFound
    );
}

async fn last_admin(store: &ControlStore) {
    // alice is the only admin now.
    assert_eq!(
        kind(store.set_active("alice", false, None).await),
        ErrorKind::Policy
    );
    assert_eq!(
        kind(store.revoke_role("alice", "admin", None).await),
        ErrorKind::Policy
    );
    // A second admin lets one go; then that one is the last.
    store.grant_role("bob", "admin", None).await.expect("grant");
    store
        .set_active("alice", false, None)
        .await
        .expect("disable alice");
    assert_eq!(
        kind(store.revoke_role("bob", "admin", None).await),
        ErrorKind::Policy,
        "a disabled admin does not count"
    );
    store
        .set_active("alice", true, None)
        .await
        .expect("enable alice");
}

async fn concurrent_last_admin(store: &ControlStore) {
    // alice and bob are both admins: disabling both at once leaves one.
    let disable = |name: &'static str| {
        let store = store.clone();
        tokio::spawn(async move { store.set_active(name, false, None).await })
    };
    let (first, second) = (disable("alice"), disable("bob"));
    let (first, second) = (first.await.expect("task"), second.await.expect("task"));
    let admins = [
        store.find_user("alice").await.expect("read"),
        store.find_user("bob").await.expect("read"),
    ]
    .into_iter()
    .flatten()
    .filter(stb_control::User::is_admin)
    .count();
    assert!(
        first.is_ok() != second.is_ok(),
        "exactly one may go: {first:?} {second:?}"
    );
    assert_eq!(admins, 1);
    store.set_active("alice", true, None).await.expect("enable");
    store.set_active("bob", true, None).await.expect("enable");
    store
        .revoke_role("bob", "admin", None)
        .await
        .expect("revoke");
}

async fn sessions(store: &ControlStore) {
    let bob = store.find_user("bob").await.expect("read").expect("bob");
    let session = store
        .create_session(&bob.id, 60_000)
        .await
        .expect("session");
    assert!(session.token.len() >= 64, "48 random bytes");
    let resolved = store
        .resolve_session(&session.token)
        .await
        .expect("resolve")
        .expect("live");
    assert_eq!(resolved.user.id, bob.id);
    assert_eq!(resolved.csrf_token, session.csrf_token);
    assert_eq!(
        store.resolve_session("not a token").await.expect("resolve"),
        None
    );
    // Logout.
    assert!(store.revoke_session(&session.token).await.expect("revoke"));
    assert_eq!(
        store
            .resolve_session(&session.token)
            .await
            .expect("resolve"),
        None
    );
    // Disabling and password resets revoke every session.
    let one = store
        .create_session(&bob.id, 60_000)
        .await
        .expect("session");
    let two = store
        .create_session(&bob.id, 60_000)
        .await
        .expect("session");
    store
        .reset_password("bob", "a third long secret", None)
        .await
        .expect("reset");
    for token in [&one.token, &two.token] {
        assert_eq!(store.resolve_session(token).await.expect("resolve"), None);
    }
    let three = store
        .create_session(&bob.id, 60_000)
        .await
        .expect("session");
    store.set_active("bob", false, None).await.expect("disable");
    store.set_active("bob", true, None).await.expect("enable");
    assert_eq!(
        store.resolve_session(&three.token).await.expect("resolve"),
        None
    );
    // Expiry is absolute.
    let short = store.create_session(&bob.id, 1).await.expect("session");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(
        store.resolve_session(&short.token).await.expect("resolve"),
        None
    );
    assert!(store.prune_sessions(0).await.expect("prune") >= 4);
}

async fn proxy_provisioning(store: &ControlStore) {
    // Eight first requests at once: one account, the same for all.
    let attempts: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .provision_proxy_user(" NewBie ", Some("New Bie"), None)
                    .await
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for attempt in attempts {
        ids.insert(attempt.await.expect("task").expect("provisioned").id);
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let newbie = store
        .find_user("newbie")
        .await
        .expect("read")
        .expect("newbie");
    assert_eq!(newbie.roles, vec!["viewer".to_owned()]);
    assert_eq!(newbie.display_name.as_deref(), Some("New Bie"));
    // A password account of that name is never linked to a proxy identity.
    assert_eq!(
        kind(store.provision_proxy_user("alice", None, None).await),
        ErrorKind::Conflict
    );
    assert_eq!(
        kind(store.provision_proxy_user("-spoof", None, None).await),
        ErrorKind::Validation
    );
}

async fn project_roles(store: &ControlStore) {
    let bob = store.find_user("bob").await.expect("read").expect("bob");
    let everywhere = store
        .grant_project_role(&bob.id, "shop", "reload_operator", None, None)
        .await
        .expect("grant");
    store
        .grant_project_role(&bob.id, "shop", "moving_operator", Some("prod"), None)
        .await
        .expect("grant pinned");
    assert_eq!(
        kind(
            store
                .grant_project_role(&bob.id, "shop", "reload_operator", None, None)
                .await
        ),
        ErrorKind::Conflict,
        "one active assignment per scope"
    );
    assert_eq!(
        kind(
            store
                .grant_project_role(&bob.id, "shop", "admin", None, None)
                .await
        ),
        ErrorKind::Validation
    );
    let names = |assignments: Vec<stb_control::Assignment>| -> Vec<String> {
        assignments.into_iter().map(|a| a.role_name).collect()
    };
    let dev = store
        .project_roles(&bob.id, "shop", "dev")
        .await
        .expect("read");
    assert_eq!(names(dev), vec!["reload_operator".to_owned()]);
    let prod = store
        .project_roles(&bob.id, "shop", "prod")
        .await
        .expect("read");
    assert_eq!(
        names(prod),
        vec!["moving_operator".to_owned(), "reload_operator".to_owned()]
    );
    assert!(
        store
            .project_roles(&bob.id, "other", "dev")
            .await
            .expect("read")
            .is_empty()
    );
    store
        .revoke_project_role(&everywhere.id, None)
        .await
        .expect("revoke");
    assert_eq!(
        kind(store.revoke_project_role(&everywhere.id, None).await),
        ErrorKind::NotFound
    );
    assert!(
        store
            .project_roles(&bob.id, "shop", "dev")
            .await
            .expect("read")
            .is_empty()
    );
    // Revoked history does not block a new grant.
    store
        .grant_project_role(&bob.id, "shop", "reload_operator", None, None)
        .await
        .expect("grant again");
}

/// Reviewed destruction plans: bound to their actor, reviewed before they are consumed,
/// consumed once (also under a race), expired after their time, refused when edited.
async fn destruction_plans(store: &ControlStore, url: &str) {
    use stb_control::{PLAN_TTL_MS, PlanLookup};
    let payload = serde_json::json!({"operation": "destroy_pipelines", "pipelines": ["pl__a"]});
    let plan = store
        .save_destruction_plan("admin-1", &payload, PLAN_TTL_MS)
        .await
        .expect("saved");
    let id = plan.plan_id.as_str();
    let found = |lookup: PlanLookup| match lookup {
        PlanLookup::Found(plan) => plan,
        other => panic!("expected the plan, got {other:?}"),
    };
    assert_eq!(
        found(store.destruction_plan(id, "admin-1").await.expect("read")).payload,
        payload
    );
    assert_eq!(
        store.destruction_plan(id, "admin-2").await.expect("read"),
        PlanLookup::Missing,
        "another actor's"
    );
    assert_eq!(
        store
            .consume_destruction_plan(id, "admin-1")
            .await
            .expect("consume"),
        PlanLookup::NotReviewed
    );
    assert_eq!(
        store
            .review_destruction_plan(id, "admin-2")
            .await
            .expect("review"),
        PlanLookup::Missing
    );
    let reviewed = found(
        store
            .review_destruction_plan(id, "admin-1")
            .await
            .expect("review"),
    );
    assert_eq!(reviewed.status, "reviewed");
    let again = found(
        store
            .review_destruction_plan(id, "admin-1")
            .await
            .expect("review"),
    );
    assert_eq!(
        again.reviewed_at_ms, reviewed.reviewed_at_ms,
        "reviewed once"
    );
    // Two executions at once: one gets the plan.
    let (first, second) = tokio::join!(
        store.consume_destruction_plan(id, "admin-1"),
        store.consume_destruction_plan(id, "admin-1")
    );
    let outcomes = [first.expect("consume"), second.expect("consume")];
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| matches!(o, PlanLookup::Found(_)))
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        store.destruction_plan(id, "admin-1").await.expect("read"),
        PlanLookup::Missing,
        "consumed"
    );
    // Expired.
    let stale = store
        .save_destruction_plan("admin-1", &payload, -1)
        .await
        .expect("saved");
    assert_eq!(
        store
            .destruction_plan(&stale.plan_id, "admin-1")
            .await
            .expect("read"),
        PlanLookup::Expired
    );
    assert_eq!(
        store
            .review_destruction_plan(&stale.plan_id, "admin-1")
            .await
            .expect("review"),
        PlanLookup::Expired
    );
    // Edited in the database: refused.
    let edited = store
        .save_destruction_plan("admin-1", &payload, PLAN_TTL_MS)
        .await
        .expect("saved");
    {
        use sqlx::Connection as _;
        sqlx::any::install_default_drivers();
        let mut raw = sqlx::AnyConnection::connect(&url.replace("postgresql://", "postgres://"))
            .await
            .expect("a raw connection");
        sqlx::query(
            "UPDATE streambuild_destruction_plans SET payload_json = $1 WHERE plan_id = $2",
        )
        .bind(r#"{"operation": "reset_target"}"#)
        .bind(edited.plan_id.as_str())
        .execute(&mut raw)
        .await
        .expect("edited");
    }
    assert_eq!(
        kind(store.destruction_plan(&edited.plan_id, "admin-1").await),
        ErrorKind::Conflict
    );
}

async fn audit_log(store: &ControlStore) {
    let log = store.audit_log(1_000).await.expect("log");
    let operations: std::collections::BTreeSet<&str> =
        log.iter().map(|e| e.operation.as_str()).collect();
    for expected in [
        "user.created",
        "user.enabled",
        "user.disabled",
        "password.reset",
        "role.granted",
        "role.revoked",
        "project_role.granted",
        "project_role.revoked",
        "session.created",
        "session.revoked",
        "destruction_plan.created",
        "destruction_plan.reviewed",
        "destruction_plan.consumed",
    ] {
        assert!(
            operations.contains(expected),
            "{expected} in {operations:?}"
        );
    }
    let text = serde_json::to_string(&log).expect("json");
    for secret in [PASSWORD, "another long secret", "argon2"] {
        assert!(!text.contains(secret), "no {secret} in the audit log");
    }
    assert!(log.windows(2).all(|w| w[0].id > w[1].id), "newest first");
}

async fn sensor_ledger(store: &ControlStore, url: &str) {
    use stb_control::{Checkpoint, NewTick, SensorStep, TickEnd};
    let target = format!("dev_{}", uuid::Uuid::new_v4().simple());
    let other = ControlStore::open(url)
        .await
        .expect("a second store handle");
    // The lease: one owner at a time; its owner renews it; an expired one is taken over.
    assert!(
        store
            .acquire_sensor_lease(&target, "sensor_dispatch", "a", 60_000)
            .await
            .expect("lease")
    );
    assert!(
        !other
            .acquire_sensor_lease(&target, "sensor_dispatch", "b", 60_000)
            .await
            .expect("lease")
    );
    assert!(
        store
            .acquire_sensor_lease(&target, "sensor_dispatch", "a", 60_000)
            .await
            .expect("renew")
    );
    store
        .release_sensor_lease(&target, "sensor_dispatch", "a")
        .await
        .expect("release");
    assert!(
        other
            .acquire_sensor_lease(&target, "sensor_dispatch", "b", 1)
            .await
            .expect("free")
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        store
            .acquire_sensor_lease(&target, "sensor_dispatch", "a", 60_000)
            .await
            .expect("expired")
    );
    // Two dispatchers claiming the same attempt of the same event: one wins.
    let claim = |owner| NewTick {
        target: &target,
        sensor: "alerts",
        fingerprint: "f1",
        kind: "event",
        event_id: Some("result-1"),
        event_kind: Some("AuditCompleted"),
        attempt: 1,
        owner,
    };
    let (mine, theirs) = (claim("a"), claim("b"));
    let (first, second) = tokio::join!(
        store.start_sensor_tick(&mine),
        other.start_sensor_tick(&theirs)
    );
    let claimed: Vec<String> = [first.expect("claim"), second.expect("claim")]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(claimed.len(), 1, "exactly one claim wins");
    // While it runs, the ledger says so: no dispatcher starts the next attempt meanwhile.
    let running = other
        .sensor_event_attempts(&target, "alerts", "result-1")
        .await
        .expect("attempts");
    assert!(
        running.in_flight_since.is_some() && running.last_attempt == 1,
        "{running:?}"
    );
    let failed = |error: &str| TickEnd {
        status: "failed".into(),
        error_message: Some(error.into()),
        ..TickEnd::default()
    };
    store
        .finish_sensor_tick(&claimed[0], &failed("RuntimeError: down"))
        .await
        .expect("finish");
    let attempts = store
        .sensor_event_attempts(&target, "alerts", "result-1")
        .await
        .expect("attempts");
    assert_eq!(
        (
            attempts.last_attempt,
            attempts.failed_attempts,
            attempts.resolved
        ),
        (1, 1, false)
    );
    assert_eq!(attempts.last_error.as_deref(), Some("RuntimeError: down"));
    let second_attempt = NewTick {
        attempt: 2,
        ..claim("a")
    };
    let dead = store
        .record_sensor_tick(
            &second_attempt,
            &TickEnd {
                status: "dead_lettered".into(),
                error_message: Some("RuntimeError: down".into()),
                ..TickEnd::default()
            },
        )
        .await
        .expect("dead letter")
        .expect("not claimed before");
    let letters = store
        .sensor_dead_letters(&target)
        .await
        .expect("dead letters");
    assert_eq!(
        letters
            .iter()
            .map(|t| t.tick_id.as_str())
            .collect::<Vec<_>>(),
        [dead.as_str()]
    );
    assert_eq!(letters[0].attempt, 2);
    let attempts = store
        .sensor_event_attempts(&target, "alerts", "result-1")
        .await
        .expect("attempts");
    assert!(attempts.resolved && attempts.dead_lettered);
    // A retry that succeeds takes the event off the dead letters.
    let retried = store
        .record_sensor_tick(
            &NewTick {
                attempt: 3,
                ..claim("a")
            },
            &TickEnd {
                status: "succeeded".into(),
                ..TickEnd::default()
            },
        )
        .await
        .expect("retry")
        .expect("a new attempt");
    assert!(
        store
            .sensor_dead_letters(&target)
            .await
            .expect("dead letters")
            .is_empty()
    );
    let ticks = store
        .sensor_ticks(&target, "alerts", 2, (None, None))
        .await
        .expect("ticks");
    assert_eq!(ticks.len(), 2);
    assert_eq!(ticks[0].tick_id, retried, "newest first");
    // Step markers: the newest word on a step wins.
    let step = |status: &str, result: Option<&str>| SensorStep {
        step_key: "compose".into(),
        policy: "at_least_once".into(),
        status: status.into(),
        attempt: 1,
        result_json: result.map(str::to_owned),
        error_message: None,
    };
    store
        .record_sensor_step(&target, "alerts", "result-1", &step("started", None))
        .await
        .expect("step");
    store
        .record_sensor_step(
            &target,
            "alerts",
            "result-1",
            &step("succeeded", Some("\"hi\"")),
        )
        .await
        .expect("step");
    assert_eq!(
        store
            .sensor_steps(&target, "alerts", "result-1")
            .await
            .expect("steps"),
        vec![step("succeeded", Some("\"hi\""))]
    );
    // Overrides and checkpoints.
    store
        .set_sensor_override(&target, "alerts", Some("stopped"), Some("alice"))
        .await
        .expect("override");
    let overrides = store.sensor_overrides(&target).await.expect("overrides");
    assert_eq!(
        (overrides[0].status.as_str(), overrides[0].actor.as_deref()),
        ("stopped", Some("alice"))
    );
    store
        .set_sensor_override(&target, "alerts", None, Some("alice"))
        .await
        .expect("declared in code");
    assert!(
        store
            .sensor_overrides(&target)
            .await
            .expect("overrides")
            .is_empty()
    );
    assert_eq!(
        store
            .sensor_checkpoint(&target, "alerts")
            .await
            .expect("checkpoint"),
        None
    );
    let at = Checkpoint {
        source: "node_results".into(),
        position_at: "2026-01-01 00:00:00.000".into(),
        position_id: "r1".into(),
    };
    store
        .save_sensor_checkpoint(&target, "alerts", &at)
        .await
        .expect("save");
    let later = Checkpoint {
        position_id: "r2".into(),
        ..at
    };
    store
        .save_sensor_checkpoint(&target, "alerts", &later)
        .await
        .expect("move");
    assert_eq!(
        store
            .sensor_checkpoint(&target, "alerts")
            .await
            .expect("checkpoint"),
        Some(later)
    );
    // Retention keeps what an operator still has to act on.
    let unresolved = store
        .record_sensor_tick(
            &NewTick {
                event_id: Some("result-2"),
                ..claim("a")
            },
            &TickEnd {
                status: "dead_lettered".into(),
                ..TickEnd::default()
            },
        )
        .await
        .expect("dead letter")
        .expect("new");
    // An event still waiting for its next attempt keeps its failed tick and its markers;
    // a polling sensor keeps its newest success (its cursor).
    let waiting = NewTick {
        event_id: Some("result-3"),
        ..claim("a")
    };
    store
        .record_sensor_tick(&waiting, &failed("RuntimeError: down"))
        .await
        .expect("failed")
        .expect("new");
    store
        .record_sensor_step(&target, "alerts", "result-3", &step("started", None))
        .await
        .expect("step");
    let poll = |attempt| NewTick {
        sensor: "lag",
        kind: "polling",
        event_id: None,
        event_kind: None,
        attempt,
        ..claim("a")
    };
    let succeeded = |cursor: &str| TickEnd {
        status: "succeeded".into(),
        cursor: Some(cursor.into()),
        ..TickEnd::default()
    };
    store
        .record_sensor_tick(&poll(1), &succeeded("1"))
        .await
        .expect("poll")
        .expect("new");
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store
        .record_sensor_tick(&poll(1), &succeeded("2"))
        .await
        .expect("poll")
        .expect("new");
    let pruned = store
        .prune_sensor_history(&target, i64::MAX)
        .await
        .expect("prune");
    assert_eq!(pruned, 4, "result-1's three ticks and the older poll");
    let attempts = store
        .sensor_event_attempts(&target, "alerts", "result-3")
        .await
        .expect("attempts");
    assert_eq!(attempts.failed_attempts, 1);
    assert_eq!(
        store
            .sensor_steps(&target, "alerts", "result-3")
            .await
            .expect("steps")
            .len(),
        1
    );
    let cursor = store
        .last_succeeded_sensor_tick(&target, "lag")
        .await
        .expect("last")
        .and_then(|t| t.cursor);
    assert_eq!(cursor.as_deref(), Some("2"));
    let left = store
        .sensor_dead_letters(&target)
        .await
        .expect("dead letters");
    assert_eq!(
        left.iter().map(|t| t.tick_id.as_str()).collect::<Vec<_>>(),
        [unresolved.as_str()]
    );
    assert!(
        store
            .sensor_steps(&target, "alerts", "result-1")
            .await
            .expect("steps")
            .is_empty()
    );
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_keeps_the_account_rules() {
    let (_dir, store, url) = sqlite().await;
    suite(&store, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_keeps_the_account_rules() {
    let (store, url) = postgres().await;
    suite(&store, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_a_newer_tool_is_refused() {
    let (_dir, store, url) = sqlite().await;
    store.close().await;
    // Bump the stored version behind the store's back.
    let path = url.trim_start_matches("sqlite://");
    let mut connection = {
        use sqlx::Connection as _;
        sqlx::AnyConnection::connect(&format!("sqlite://{path}"))
            .await
            .expect("connect")
    };
    sqlx::query("UPDATE streambuild_schema_versions SET version = 99 WHERE component = 'accounts'")
        .execute(&mut connection)
        .await
        .expect("bump");
    let refused = ControlStore::open(&url).await.expect_err("newer schema");
    assert_eq!(refused.kind, ErrorKind::Incompatible);
    assert_eq!(refused.code(), "STB-CONTROL-002");
    assert!(refused.message.contains("found 99"), "{}", refused.message);
}
