//! `stb dev` end to end: it refuses unsafe settings; started on a free port with password
//! sign-in, it reaches the warehouse in the background, previews a plan, builds a virtual
//! deployment whose events it streams live, promotes it, and stops on SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{TestDatabase, wait_for};

use crate::deployments::{events_table, insert, project};

fn dev(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("stb"));
    command
        .arg("dev")
        .args(args)
        .arg("--project-dir")
        .arg(dir)
        .envs(stb_test_support::warehouse_env())
        .env_remove("STREAMBUILD_AUTH_MODE")
        .env_remove("STREAMBUILD_CONTROL_STORE_URL");
    command
}

const PASSWORD: &str = "a long enough password";

fn create_users(dir: &std::path::Path, users: &[(&str, &str)]) {
    for (user, role) in users {
        let created = stb_test_support::stb_on_project(
            dir,
            &[
                "admin",
                "create-user",
                "--username",
                user,
                "--authentication-source",
                "password",
                "--role",
                role,
            ],
            &format!("{PASSWORD}\n"),
        );
        assert!(created.status.success(), "{created:?}");
    }
}

type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;

/// `stb dev` on a free port with password sign-in: the process, the API's URL, and the
/// rest of its output.
fn start(dir: &std::path::Path) -> (std::process::Child, String, Lines) {
    let mut child = dev(
        dir,
        &[
            "--ui-port",
            "0",
            "--auth-mode",
            "password",
            "--auth-insecure-cookie",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("stb dev starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let api = loop {
        let line = lines
            .next()
            .expect("the banner names the API")
            .expect("a line");
        if let Some(url) = line.trim().strip_prefix("api") {
            break url.trim().to_owned();
        }
    };
    (child, api, lines)
}

/// One request: its status, JSON answer and the session cookie it set.
fn call(
    api: &str,
    method: &str,
    path: &str,
    session: Option<(&str, &str)>,
    body: Option<&str>,
) -> (u16, Value, Option<String>) {
    let http = stb_test_support::http();
    let mut request = match method {
        "POST" => http.post(format!("{api}{path}")),
        _ => http.get(format!("{api}{path}")),
    };
    if let Some((cookie, csrf)) = session {
        request = request
            .header("cookie", cookie)
            .header("x-streambuild-csrf", csrf);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = request.send().expect("answered");
    let status = response.status().as_u16();
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    let text = response.text().unwrap_or_default();
    (
        status,
        serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        cookie,
    )
}

/// Signs `user` in: its cookie and CSRF token.
fn sign_in(api: &str, user: &str) -> (String, String) {
    let (status, session, cookie) = call(
        api,
        "POST",
        "/auth/login",
        None,
        Some(&format!(
            r#"{{"username": "{user}", "password": "{PASSWORD}"}}"#
        )),
    );
    assert_eq!(status, 200, "{session}");
    (
        cookie.expect("a session cookie"),
        session["csrfToken"].as_str().expect("csrf").to_owned(),
    )
}

/// Stops the server with SIGTERM and checks it says so.
fn stop(mut child: std::process::Child, lines: Lines) {
    let signalled = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(signalled.success());
    let status = child.wait().expect("stops");
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l == "dev server stopped"), "{rest:?}");
}

#[test]
fn unsafe_settings_are_refused_before_anything_starts() {
    let db = TestDatabase::create("dev_refused");
    let dir = project(&db.name);
    for (args, says) in [
        (
            vec!["--ui-host", "0.0.0.0"],
            "authentication is disabled and --ui-host 0.0.0.0 is not a loopback address",
        ),
        (
            vec![
                "--ui-host",
                "0.0.0.0",
                "--auth-mode",
                "password",
                "--auth-insecure-cookie",
            ],
            "insecure password cookies may only be used on a loopback address.",
        ),
        (
            vec![
                "--auth-mode",
                "trusted_proxy",
                "--auth-default-role",
                "admin",
            ],
            "auto-provisioned users are viewers",
        ),
        (
            vec!["--auth-session-ttl-seconds", "0"],
            "must be greater than 0",
        ),
    ] {
        let output = dev(dir.path(), &args).output().expect("stb dev");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("STB-DEV-001"), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn plan_build_live_events_and_promote_through_the_api() {
    let db = TestDatabase::create("dev");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = project(&db.name);
    // A project role that may stage deployments of pl__v, but not promote them.
    std::fs::write(
        dir.path().join("access.yml"),
        "roles:\n  stager:\n    grants:\n      - pipelines: [pl__v]\n        permissions: [deployment.create]\n",
    )
    .expect("access.yml");
    create_users(
        dir.path(),
        &[("ana", "admin"), ("vic", "viewer"), ("olga", "viewer")],
    );
    // Project roles are assigned in the control store (the admin routes come later).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = stb_control::ControlStore::open(&stb_control::default_url(dir.path()))
            .await
            .expect("store");
        let olga = store.find_user("olga").await.expect("read").expect("olga");
        store
            .grant_project_role(&olga.id, "v", "stager", None, None)
            .await
            .expect("grant");
        store.close().await;
    });

    let (child, api, lines) = start(dir.path());
    let http = stb_test_support::http();
    let send = |method: &str, path: &str, session: Option<(&str, &str)>, body: Option<&str>| {
        call(&api, method, path, session, body)
    };
    assert_eq!(send("GET", "/auth/me", None, None).0, 401);
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (vic_cookie, vic_csrf) = sign_in(&api, "vic");
    let vic = Some((vic_cookie.as_str(), vic_csrf.as_str()));
    let (olga_cookie, olga_csrf) = sign_in(&api, "olga");
    let olga = Some((olga_cookie.as_str(), olga_csrf.as_str()));
    // The warehouse is reached in the background.
    let ready = wait_for(Duration::from_secs(30), || {
        send("GET", "/status", me, None).1["warehouse"]["connected"] == true
    });
    assert!(ready, "the warehouse connects");

    // Plan preview: what a build would stage.
    let (status, plan) = {
        let (status, plan, _) = send("GET", "/plan?select=pipeline%3Apl__v", me, None);
        (status, plan)
    };
    assert_eq!(status, 200, "{plan}");
    assert!(plan.to_string().contains("clean"), "{plan}");
    // A value that would be a flag is refused before anything runs.
    assert_eq!(send("GET", "/plan?select=--help", me, None).0, 400);

    // A viewer without a project role may look, not build.
    let build = Some(r#"{"select": ["pipeline:pl__v"]}"#);
    let (status, refused, _) = send("POST", "/build", vic, build);
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["detail"]["reason"], "no_matching_assignment",
        "{refused}"
    );
    assert_eq!(refused["detail"]["permission"], "deployment.create");
    // Build as the stager: a new run, followed live over server-sent events.
    let (status, started, _) = send("POST", "/build", olga, build);
    assert_eq!(status, 202, "{started}");
    let invocation = started["invocationId"].as_str().expect("id").to_owned();
    let feed = http
        .get(format!("{api}/runs/{invocation}/events"))
        .header("cookie", &cookie)
        .send()
        .expect("the feed");
    assert_eq!(
        feed.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let kinds: Vec<String> = BufReader::new(feed)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("event:").map(|k| k.trim().to_owned()))
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("run_started"),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k == "statement_completed"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("run_completed"),
        "{kinds:?}"
    );
    let (status, run, _) = send("GET", &format!("/runs/{invocation}"), me, None);
    assert_eq!(status, 200);
    assert_eq!(run["run"]["status"], "succeeded", "{run}");
    assert_eq!(run["run"]["owner"], "olga", "the run names who started it");
    let deployment = run["run"]["deployment_id"]
        .as_str()
        .expect("staged")
        .to_owned();
    // Staging is not promoting.
    let (status, refused, _) = send(
        "POST",
        &format!("/deployments/{deployment}/promote"),
        olga,
        None,
    );
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["detail"]["reason"], "missing_pipelines",
        "{refused}"
    );
    assert_eq!(
        refused["detail"]["missingPipelines"],
        serde_json::json!(["pl__v"])
    );

    // Promote it: readers now see its copies.
    let (status, promoted, _) = send(
        "POST",
        &format!("/deployments/{deployment}/promote"),
        me,
        None,
    );
    assert_eq!(status, 200, "{promoted}");
    let bound = stb_test_support::execute(&format!(
        "SELECT as_select FROM system.tables WHERE database = '{}' AND name = 'tbl__clean' FORMAT TSV",
        db.name
    ));
    assert!(bound.contains(&deployment), "{bound}");
    // A second deployment (a full refresh), promoted, then rolled back to the first.
    let (status, second, _) = send(
        "POST",
        "/build",
        me,
        Some(r#"{"select": ["pipeline:pl__v"], "fullRefresh": true}"#),
    );
    assert_eq!(status, 202, "{second}");
    let second_run = second["invocationId"].as_str().expect("id").to_owned();
    let finished = wait_for(Duration::from_secs(60), || {
        send("GET", &format!("/runs/{second_run}"), me, None).1["run"]["status"] == "succeeded"
    });
    assert!(finished, "the second build succeeds");
    let (_, second_detail, _) = send("GET", &format!("/runs/{second_run}"), me, None);
    let newer = second_detail["run"]["deployment_id"]
        .as_str()
        .expect("staged")
        .to_owned();
    let (status, listed, _) = send("GET", "/deployments", me, None);
    assert_eq!(status, 200, "{listed}");
    assert!(listed.to_string().contains(&newer), "{listed}");
    let (status, diffed, _) = send(
        "GET",
        &format!("/deployments/active:{newer}/diff"),
        me,
        None,
    );
    assert_eq!(status, 200, "{diffed}");
    let (status, _, _) = send("POST", &format!("/deployments/{newer}/promote"), me, None);
    assert_eq!(status, 200);
    let (status, rolled, _) = send(
        "POST",
        &format!("/deployments/{deployment}/rollback"),
        me,
        None,
    );
    assert_eq!(status, 200, "{rolled}");
    let bound = stb_test_support::execute(&format!(
        "SELECT as_select FROM system.tables WHERE database = '{}' AND name = 'tbl__clean' FORMAT TSV",
        db.name
    ));
    assert!(bound.contains(&deployment), "rolled back: {bound}");
    // Without the CSRF token the same request is refused.
    let (status, _, _) = {
        let response = http
            .post(format!("{api}/deployments/{deployment}/promote"))
            .header("cookie", &cookie)
            .send()
            .expect("answered");
        (response.status().as_u16(), (), ())
    };
    assert_eq!(status, 403);
    assert_eq!(send("GET", "/runs/nope", me, None).0, 404);
    assert_eq!(send("GET", "/nothing-here", me, None).0, 404);

    stop(child, lines);
}

#[test]
fn a_build_started_from_the_api_is_cancelled_from_the_api() {
    let db = TestDatabase::create("dev_cancel");
    events_table(&db.name);
    stb_test_support::execute(&format!(
        "INSERT INTO {}.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC'), number % 25 FROM numbers(3000000)",
        db.name
    ));
    let dir = stb_test_support::project_dir(&crate::runs::heavy_files(&db.name));
    create_users(dir.path(), &[("ana", "admin"), ("vic", "viewer")]);
    let (child, api, lines) = start(dir.path());
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (status, started, _) = call(&api, "POST", "/build", me, Some("{}"));
    assert_eq!(status, 202, "{started}");
    let invocation = started["invocationId"].as_str().expect("id").to_owned();
    // One build at a time per server.
    let (status, busy, _) = call(&api, "POST", "/build", me, Some("{}"));
    assert_eq!(status, 409, "{busy}");
    crate::runs::wait_for_step(&db.name, &invocation, "replay_heavy");
    // A viewer may not cancel it.
    let (vic_cookie, vic_csrf) = sign_in(&api, "vic");
    let vic = Some((vic_cookie.as_str(), vic_csrf.as_str()));
    let (status, _, _) = call(
        &api,
        "POST",
        &format!("/runs/{invocation}/cancel"),
        vic,
        None,
    );
    assert_eq!(status, 403);
    let asked = std::time::Instant::now();
    let (status, cancelled, _) = call(
        &api,
        "POST",
        &format!("/runs/{invocation}/cancel"),
        me,
        None,
    );
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(
        cancelled["cancellation"]["status"], "cancelled",
        "{cancelled}"
    );
    assert!(asked.elapsed() < Duration::from_secs(15));
    let (_, run, _) = call(&api, "GET", &format!("/runs/{invocation}"), me, None);
    assert_eq!(run["run"]["status"], "cancelled", "{run}");
    // Nothing left to cancel.
    let (status, _, _) = call(
        &api,
        "POST",
        &format!("/runs/{invocation}/cancel"),
        me,
        None,
    );
    assert_eq!(status, 409);
    stop(child, lines);
}

#[test]
fn a_reload_is_authorised_by_the_policy_held_before_it() {
    let db = TestDatabase::create("dev_reload");
    events_table(&db.name);
    let dir = project(&db.name);
    let access = dir.path().join("access.yml");
    std::fs::write(
        &access,
        "roles:\n  stager:\n    grants:\n      - pipelines: [pl__v]\n        permissions: [deployment.create]\n",
    )
    .expect("access.yml");
    create_users(dir.path(), &[("ana", "admin"), ("olga", "viewer")]);
    let (child, api, lines) = start(dir.path());
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (status, olga_user, _) = call(&api, "GET", "/admin/users", me, None);
    assert_eq!(status, 200);
    let olga_id = olga_user
        .as_array()
        .and_then(|users| users.iter().find(|u| u["username"] == "olga"))
        .and_then(|u| u["id"].as_str())
        .expect("olga")
        .to_owned();
    let (status, assigned, _) = call(
        &api,
        "POST",
        &format!("/admin/users/{olga_id}/project-roles"),
        me,
        Some(r#"{"projectName": "v", "role": "stager"}"#),
    );
    assert_eq!(status, 200, "{assigned}");
    let (olga_cookie, olga_csrf) = sign_in(&api, "olga");
    let olga = Some((olga_cookie.as_str(), olga_csrf.as_str()));
    // Editing access.yml to grant herself project.reload does not authorise that reload.
    std::fs::write(
        &access,
        "roles:\n  stager:\n    grants:\n      - pipelines: [pl__v]\n        permissions: [deployment.create]\n      - scope: project\n        permissions: [project.reload]\n",
    )
    .expect("access.yml");
    let (status, refused, _) = call(&api, "POST", "/reload", olga, None);
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["detail"]["permission"], "project.reload");
    // An admin reloads; the new policy then holds.
    let (status, reloaded, _) = call(&api, "POST", "/reload", me, None);
    assert_eq!(status, 200, "{reloaded}");
    assert_eq!(reloaded["compile"]["state"], "ok");
    let (status, _, _) = call(&api, "POST", "/reload", olga, None);
    assert_eq!(status, 200, "the reloaded policy grants it");
    // A broken access.yml: the reload reports it and the last good policy stays.
    std::fs::write(&access, "roles:\n  stager:\n    grants: []\n").expect("access.yml");
    let (status, failing, _) = call(&api, "POST", "/reload", me, None);
    assert_eq!(status, 200, "{failing}");
    assert_eq!(failing["compile"]["state"], "failing", "{failing}");
    assert!(failing.to_string().contains("STB-ACCESS-001"), "{failing}");
    let (_, capabilities, _) = call(&api, "GET", "/auth/capabilities", olga, None);
    assert_eq!(
        capabilities["permissions"],
        serde_json::json!(["project.reload"]),
        "{capabilities}"
    );
    let (_, status_now, _) = call(&api, "GET", "/status", me, None);
    assert_eq!(status_now["compile"]["state"], "failing");
    // A feed left open does not hold the server up when it stops.
    let feed_url = format!("{api}/runs/no-such-run/events");
    let reader = std::thread::spawn(move || {
        let response = stb_test_support::http()
            .get(feed_url)
            .header("cookie", cookie)
            .send()
            .expect("the feed");
        BufReader::new(response)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(500));
    let stopping = std::time::Instant::now();
    stop(child, lines);
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "stopped in {:?}",
        stopping.elapsed()
    );
    let said = reader.join().expect("the feed ended");
    assert!(said.iter().any(|l| l == "event: feed_ended"), "{said:?}");
}

#[test]
fn definitions_never_show_broker_credentials_or_secret_settings() {
    let dir = stb_test_support::project_dir(&[
        (
            "streambuild_project.toml",
            "name = \"k\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"definitions_only\"\n",
        ),
        (
            "sources/orders.yml",
            "sources:\n  - name: orders\n    kind: kafka\n    topic: orders.events\n    broker_list: \"app:s3cret-value@127.0.0.1:9092\"\n    replay_boundary:\n      mode: offsets\n    settings:\n      kafka_sasl_password: \"hunter2-but-longer\"\n      kafka_poll_timeout_ms: \"200\"\n",
        ),
        (
            "pipelines/pl__orders/order_events.sql",
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractString(kafka_value, 'id')::String AS id\nFROM __source(\"orders\")\n",
        ),
    ]);
    create_users(dir.path(), &[("ana", "admin")]);
    let (child, api, lines) = start(dir.path());
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (status, definitions, _) = call(&api, "GET", "/definitions", me, None);
    assert_eq!(status, 200, "{definitions}");
    let text = definitions.to_string();
    assert!(!text.contains("s3cret-value"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let kafka = &definitions["sources"][0]["kafka"];
    assert_eq!(kafka["brokerList"], "<redacted>", "{kafka}");
    assert_eq!(kafka["settings"]["kafka_sasl_password"], "<redacted>");
    assert_eq!(kafka["settings"]["kafka_poll_timeout_ms"], "200");
    assert_eq!(definitions["models"][0]["pipeline"], "pl__orders");
    stop(child, lines);
}
