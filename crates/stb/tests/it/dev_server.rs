//! `stb dev` end to end: it refuses unsafe settings; started on a free port with password
//! sign-in, it reaches the warehouse in the background, previews a plan, builds a virtual
//! deployment whose events it streams live, promotes it, and stops on SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use stb_test_support::{TestDatabase, wait_for};

use crate::deployments::{events_table, insert, project};

pub(crate) fn dev(dir: &std::path::Path, args: &[&str]) -> Command {
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

pub(crate) const PASSWORD: &str = "a long enough password";

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

pub(crate) type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;

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
    let (api, lines) = banner(&mut child);
    (child, api, lines)
}

/// The API's URL from a starting `stb dev`'s banner, and the rest of its output.
pub(crate) fn banner(child: &mut std::process::Child) -> (String, Lines) {
    let (api, _, lines) = banner_lines(child);
    (api, lines)
}

/// The API's URL, the banner's lines before it, and the rest of the output.
fn banner_lines(child: &mut std::process::Child) -> (String, Vec<String>, Lines) {
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut before = Vec::new();
    let api = loop {
        let line = lines
            .next()
            .expect("the banner names the API")
            .expect("a line");
        if let Some(url) = line.trim().strip_prefix("api") {
            break url.trim().to_owned();
        }
        before.push(line);
    };
    (api, before, lines)
}

/// One request: its status, JSON answer and the session cookie it set.
pub(crate) fn call(
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
pub(crate) fn sign_in(api: &str, user: &str) -> (String, String) {
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
pub(crate) fn stop(mut child: std::process::Child, lines: Lines) {
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

/// The body of a build of the plan `query` previews (as `session`): `extra`'s fields, the
/// plan's hash, and for a virtual plan the deployment id it pinned.
fn reviewed(api: &str, session: Option<(&str, &str)>, query: &str, extra: &str) -> String {
    let (status, plan, _) = call(api, "GET", &format!("/plan?{query}"), session, None);
    assert_eq!(status, 200, "{plan}");
    let mut body: Value = serde_json::from_str(extra).expect("JSON");
    body["planHash"] = plan["plan_hash"].clone();
    assert!(body["planHash"].is_string(), "{plan}");
    if let Some(id) = plan["deployment_id"].as_str() {
        body["deploymentId"] = id.into();
    }
    body.to_string()
}

/// Starts a full-refresh build of `pl__v` as `session` and waits for it to succeed; its
/// run's detail.
fn rebuild_and_wait(api: &str, session: Option<(&str, &str)>) -> Value {
    let body = reviewed(
        api,
        session,
        "select=pipeline%3Apl__v&full_refresh=true",
        r#"{"select": ["pipeline:pl__v"], "fullRefresh": true}"#,
    );
    let (status, started, _) = call(api, "POST", "/build", session, Some(&body));
    assert_eq!(status, 202, "{started}");
    let run = started["invocationId"].as_str().expect("id").to_owned();
    let finished = wait_for(Duration::from_secs(60), || {
        call(api, "GET", &format!("/runs/{run}"), session, None).1["run"]["status"] == "succeeded"
    });
    let (_, detail, _) = call(api, "GET", &format!("/runs/{run}"), session, None);
    assert!(finished, "the build succeeds: {detail}");
    detail
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
    // A selector the project does not know is refused before anything is read.
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
    // A build names the plan it runs: without it, or with another, nothing starts.
    let (status, unnamed, _) = send("POST", "/build", olga, build);
    assert_eq!(status, 400, "{unnamed}");
    assert_eq!(
        unnamed["detail"]["reason"], "plan_hash_required",
        "{unnamed}"
    );
    let stale = r#"{"select": ["pipeline:pl__v"], "planHash": "0000"}"#;
    let (status, changed, _) = send("POST", "/build", olga, Some(stale));
    assert_eq!(status, 409, "{changed}");
    assert_eq!(changed["detail"]["reason"], "plan_changed", "{changed}");
    // Build as the stager the plan it reviewed: a new run, followed live over server-sent
    // events.
    let body = reviewed(
        &api,
        olga,
        "select=pipeline%3Apl__v",
        r#"{"select": ["pipeline:pl__v"]}"#,
    );
    let (status, started, _) = send("POST", "/build", olga, Some(&body));
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
    // The exact SQL of a statement it ran.
    let (status, first, _) = send(
        "GET",
        &format!("/runs/{invocation}/statements/1"),
        vic,
        None,
    );
    assert_eq!(status, 200, "{first}");
    assert!(
        first["sql"].as_str().is_some_and(|sql| !sql.is_empty()),
        "{first}"
    );
    assert_eq!(first["statement_sequence"], 1);
    assert_eq!(
        send(
            "GET",
            &format!("/runs/{invocation}/statements/99999"),
            vic,
            None
        )
        .0,
        404
    );
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
    let second_detail = rebuild_and_wait(&api, me);
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

    // The warehouse's view: taken once, then held (a viewer reads the same snapshot) until
    // a refresh throws it away.
    let (status, state, _) = send("GET", "/state", vic, None);
    assert_eq!(status, 200, "{state}");
    let clean = state["models"]
        .as_array()
        .and_then(|models| models.iter().find(|m| m["name"] == "clean"))
        .unwrap_or_else(|| panic!("clean in {state}"));
    assert_eq!(clean["built"], true, "{state}");
    assert!(
        clean["relation"]
            .as_str()
            .is_some_and(|r| r.contains(&deployment)),
        "read through the active copy: {state}"
    );
    assert!(
        state["warehouse_health"]["footprint"]["rows"]
            .as_u64()
            .is_some_and(|rows| rows >= 10),
        "{state}"
    );
    assert!(
        state["warehouse_health"]["disks"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    );
    // The local engine has no `system.asynchronous_metrics`: its memory is what its
    // allocator tracks, and no part of health is unreadable there.
    assert_eq!(
        state["warehouse_health"]["memory"]["measure"], "tracked",
        "{state}"
    );
    assert!(
        state["warehouse_health"]["memory"]["resident_bytes"]
            .as_u64()
            .is_some_and(|bytes| bytes > 0),
        "{state}"
    );
    assert_eq!(
        state["warehouse_health"]["errors"],
        serde_json::json!([]),
        "{state}"
    );
    assert_eq!(state["stale"], false);
    // Held: a second viewer reads the snapshot the first one did. The background task
    // takes it again every 15 s, and its tick may fall between two reads on a busy
    // machine: then the pair after it must agree (a snapshot takes hundreds of
    // milliseconds, so two reads that each took their own could never agree).
    let mut taken = state["taken_at_ms"].clone();
    assert!(taken.is_number(), "{state}");
    let mut held = false;
    for viewer in [me, vic, me] {
        let again = send("GET", "/state", viewer, None).1["taken_at_ms"].clone();
        if again == taken {
            held = true;
            break;
        }
        taken = again;
    }
    assert!(held, "the snapshot is taken again on every read");
    let (status, refreshed, _) = send("POST", "/warehouse/refresh", vic, None);
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(refreshed["warehouse"]["connected"], true);
    assert_ne!(
        send("GET", "/state", me, None).1["taken_at_ms"],
        taken,
        "renewed"
    );

    // Cleanup: a third deployment is staged, so the second (superseded) is neither active
    // nor the newest; the janitor's preview lists it, and only a confirmation naming
    // exactly what the preview listed drops it.
    rebuild_and_wait(&api, me);
    let limits = r#""retentionDays": 0, "minimumRollbackDeployments": 0, "minimumAgeMinutes": 0"#;
    let preview_body = format!("{{{limits}}}");
    let (status, preview, _) = send("POST", "/deployments/cleanup", me, Some(&preview_body));
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["applied"], false, "{preview}");
    let deletable: Vec<&str> = preview["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["delete"] == true)
        .filter_map(|c| c["deployment_id"].as_str())
        .collect();
    assert_eq!(deletable, [newer.as_str()], "{preview}");
    let (status, _, _) = send("POST", "/deployments/cleanup", vic, Some(&preview_body));
    assert_eq!(status, 403, "a viewer may not clean up");
    let unconfirmed = format!(r#"{{{limits}, "apply": true}}"#);
    let (status, _, _) = send("POST", "/deployments/cleanup", me, Some(&unconfirmed));
    assert_eq!(status, 400, "apply without a confirmation");
    let wrong = format!(r#"{{{limits}, "apply": true, "confirmDeployments": ["{deployment}"]}}"#);
    let (status, conflict, _) = send("POST", "/deployments/cleanup", me, Some(&wrong));
    assert_eq!(status, 409, "{conflict}");
    let tables = |db: &str| {
        stb_test_support::execute(&format!(
            "SELECT name FROM system.tables WHERE database = '{db}' FORMAT TSV"
        ))
    };
    assert!(tables(&db.name).contains(&newer), "nothing dropped yet");
    let confirmed = format!(r#"{{{limits}, "apply": true, "confirmDeployments": ["{newer}"]}}"#);
    let (status, cleaned, _) = send("POST", "/deployments/cleanup", me, Some(&confirmed));
    assert_eq!(status, 200, "{cleaned}");
    assert_eq!(cleaned["applied"], true, "{cleaned}");
    let left = tables(&db.name);
    assert!(!left.contains(&newer), "{left}");
    assert!(
        left.contains(&deployment),
        "the active deployment stays: {left}"
    );

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
    let body = reviewed(&api, me, "", "{}");
    let (status, started, _) = call(&api, "POST", "/build", me, Some(&body));
    assert_eq!(status, 202, "{started}");
    let invocation = started["invocationId"].as_str().expect("id").to_owned();
    // One build at a time per server.
    let (status, busy, _) = call(&api, "POST", "/build", me, Some(&body));
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

#[test]
fn audits_run_on_their_schedule_and_on_demand_through_the_api() {
    let db = TestDatabase::create("devq");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = project(&db.name);
    let config = dir.path().join("streambuild_project.toml");
    let mut text = std::fs::read_to_string(&config).expect("project file");
    text.push_str("[audit_scheduler]\nenabled = true\n");
    std::fs::write(&config, text).expect("project file");
    std::fs::create_dir_all(dir.path().join("audits")).expect("audits/");
    std::fs::write(
        dir.path().join("audits/amounts.sql"),
        "AUDIT (name big_amounts, severity warning, every \"1h\");\nSELECT * FROM __ref(\"clean\") WHERE amount > 20;\n\
         AUDIT (name no_negative, every \"1h\");\nSELECT * FROM __ref(\"clean\") WHERE toInt64(amount) < 0;\n\
         AUDIT (name on_demand);\nSELECT * FROM __ref(\"clean\") WHERE amount > 100;\n",
    )
    .expect("audits");
    let deployment = crate::deployments::build(dir.path(), &[]);
    crate::deployments::ok_json(
        dir.path(),
        &["deployment", "promote", &deployment, "--json"],
    );
    create_users(dir.path(), &[("ana", "admin"), ("vic", "viewer")]);

    let (child, api, lines) = start(dir.path());
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (vic_cookie, vic_csrf) = sign_in(&api, "vic");
    let vic = Some((vic_cookie.as_str(), vic_csrf.as_str()));
    let send = |method: &str, path: &str, session: Option<(&str, &str)>, body: Option<&str>| {
        call(&api, method, path, session, body)
    };

    // The scheduler runs both audits with an `every` once, for the slot that holds now,
    // then waits for the next slot.
    let ran = wait_for(Duration::from_secs(60), || {
        let (_, scheduler, _) = send("GET", "/audit-scheduler", vic, None);
        scheduler["health"]["audits"]
            .as_array()
            .is_some_and(|audits| {
                audits.len() == 2
                    && audits
                        .iter()
                        .all(|a| a["state"] == "idle" && !a["last_status"].is_null())
            })
    });
    let (_, scheduler, _) = send("GET", "/audit-scheduler", vic, None);
    assert!(ran, "{scheduler}");
    assert_eq!(scheduler["enabled"], true);
    assert_eq!(scheduler["dueCount"], 0);
    let audits = scheduler["health"]["audits"].as_array().expect("audits");
    let status_of = |name: &str| {
        audits
            .iter()
            .find(|a| a["name"] == name)
            .map(|a| a["last_status"].clone())
    };
    assert_eq!(
        status_of("big_amounts"),
        Some("warning".into()),
        "{scheduler}"
    );
    assert_eq!(
        status_of("no_negative"),
        Some("passed".into()),
        "{scheduler}"
    );
    assert!(
        scheduler["health"]["recent_failures"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["name"] == "big_amounts")),
        "{scheduler}"
    );
    assert!(!scheduler["health"]["last_successful_tick_at_ms"].is_null());

    // Latest status per check: the scheduled results, and one never run.
    let (status, checks, _) = send("GET", "/checks/status", vic, None);
    assert_eq!(status, 200, "{checks}");
    let check = |name: &str| {
        checks["checks"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} in {checks}"))
    };
    assert_eq!(check("big_amounts")["trigger"], "scheduled");
    assert_eq!(check("big_amounts")["status"], "warning");
    assert!(
        check("big_amounts")["failure_count"]
            .as_u64()
            .is_some_and(|n| n > 0)
    );
    assert_eq!(check("on_demand")["status"], "never_run");

    // On demand: authorised on the audit's pipeline, recorded with the dev server trigger.
    let one = Some(r#"{"kind": "audit", "name": "on_demand"}"#);
    assert_eq!(send("POST", "/checks/run", vic, one).0, 403);
    let (status, result, _) = send("POST", "/checks/run", me, one);
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["results"][0]["status"], "passed", "{result}");
    assert!(result["invocationId"].is_string());
    let (_, checks, _) = send("GET", "/checks/status", vic, None);
    let on_demand = checks["checks"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == "on_demand").cloned())
        .expect("on_demand");
    assert_eq!(on_demand["trigger"], "dev_server", "{checks}");
    assert_eq!(on_demand["status"], "passed");
    let (status, named, _) = send(
        "POST",
        "/audits/run",
        me,
        Some(r#"{"names": ["big_amounts", "no_negative"]}"#),
    );
    assert_eq!(status, 200, "{named}");
    assert_eq!(named["results"].as_array().map(Vec::len), Some(2));
    // Its history: the run just now, then the scheduled one, newest first.
    let (status, history, _) = send(
        "GET",
        "/checks/history?kind=audit&name=big_amounts",
        vic,
        None,
    );
    assert_eq!(status, 200, "{history}");
    let triggers: Vec<&str> = history["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["trigger"].as_str())
        .collect();
    assert_eq!(triggers, ["dev_server", "scheduled"], "{history}");
    assert_eq!(
        send("POST", "/audits/run", me, Some(r#"{"names": []}"#)).0,
        422
    );
    assert_eq!(
        send("POST", "/audits/run", me, Some(r#"{"names": ["nope"]}"#)).0,
        400
    );
    assert_eq!(
        send(
            "POST",
            "/checks/run",
            me,
            Some(r#"{"kind": "model", "name": "x"}"#)
        )
        .0,
        422
    );

    stop(child, lines);
}

#[test]
fn the_message_console_browses_landed_messages_and_topics_hide_credentials() {
    use stb_test_support::kafka::{Record, create_topic, produce, run_base_ms};
    use stb_test_support::{stack, unique_name};
    let db = TestDatabase::create("devmsg");
    let topic = unique_name("console");
    create_topic(&stack().kafka_brokers, &topic, 3);
    let records: Vec<Record> = (0..30u64)
        .map(|id| Record {
            partition: i32::try_from(id % 3).expect("partition"),
            key: id.to_string(),
            value: format!(
                r#"{{"id": {id}, "status": "{}"}}"#,
                if id % 3 == 0 { "paid" } else { "open" }
            ),
            headers: if id == 5 {
                vec![("trace".to_owned(), "abc-5".to_owned())]
            } else {
                Vec::new()
            },
            timestamp_ms: run_base_ms() + i64::try_from(id).expect("id"),
        })
        .collect();
    produce(&stack().kafka_brokers, &topic, &records);
    let files = [
        (
            "streambuild_project.toml".to_owned(),
            format!("name = \"shop\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"{}\"\n", db.name),
        ),
        (
            "sources/orders.yml".to_owned(),
            format!(
                "sources:\n  - name: orders\n    kind: kafka\n    broker_list: \"{}\"\n    topic: {topic}\n    replay_boundary: {{mode: offsets}}\n    settings:\n      kafka_poll_timeout_ms: \"200\"\n  - name: elsewhere\n    kind: kafka\n    broker_list: \"ops:hunter2secret@127.0.0.1:1\"\n    topic: audit_trail\n    replay_boundary: {{mode: offsets}}\n",
                stack().kafka_brokers
            ),
        ),
        (
            "pipelines/pl__shop/order_lines.sql".to_owned(),
            "MODEL (order_by [\"_replay_partition\", \"_replay_offset\"]);\nSELECT _replay_partition::Int32 AS _replay_partition, _replay_offset::Int64 AS _replay_offset, JSONExtractUInt(kafka_value, 'id')::UInt64 AS id\nFROM __source(\"orders\")\n".to_owned(),
        ),
    ];
    let dir = stb_test_support::project_dir(&files);
    let built = stb_test_support::stb_on_project(
        dir.path(),
        &[
            "build",
            "--auto-approve",
            "--json",
            "--select",
            "pipeline:pl__shop",
        ],
        "",
    );
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let landed = wait_for(Duration::from_secs(60), || {
        stb_test_support::execute(&format!(
            "SELECT count() FROM {}.raw__orders FORMAT TSV",
            db.name
        ))
        .trim()
            == "30"
    });
    assert!(landed, "30 messages land");
    create_users(dir.path(), &[("ana", "admin"), ("vic", "viewer")]);
    let (child, api, lines) = start(dir.path());
    let (cookie, csrf) = sign_in(&api, "ana");
    let me = Some((cookie.as_str(), csrf.as_str()));
    let (vic_cookie, vic_csrf) = sign_in(&api, "vic");
    let vic = Some((vic_cookie.as_str(), vic_csrf.as_str()));
    let list = |body: &str| call(&api, "POST", "/sources/orders/messages", me, Some(body));
    let keys = |page: &Value| -> Vec<String> {
        page["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["key"].as_str().expect("key").to_owned())
            .collect()
    };

    // Reading messages is a permission of its own.
    assert_eq!(
        call(&api, "POST", "/sources/orders/messages", vic, Some("{}")).0,
        403
    );
    let (status, all, _) = list("{}");
    assert_eq!(status, 200, "{all}");
    assert_eq!(keys(&all).len(), 30, "{all}");
    assert!(all["nextCursor"].is_null(), "not a full page");
    assert!(
        all["windowSeconds"].is_null(),
        "widened until it looked everywhere"
    );
    // Pages by keyset: two pages of ten, no message twice.
    let (_, first, _) = list(r#"{"limit": 10}"#);
    let cursor = first["nextCursor"].clone();
    assert!(cursor.is_object(), "{first}");
    let (status, second, _) = list(&format!(r#"{{"limit": 10, "cursor": {cursor}}}"#));
    assert_eq!(status, 200, "{second}");
    let mut both = keys(&first);
    both.extend(keys(&second));
    both.sort();
    both.dedup();
    assert_eq!(both.len(), 20);
    // Filters from the list, each compiled server-side.
    let (_, paid, _) = list(
        r#"{"predicates": [{"field": "json", "op": "eq", "path": "status", "value": "paid"}], "previewPaths": ["id"]}"#,
    );
    assert_eq!(keys(&paid).len(), 10, "{paid}");
    assert!(paid["rows"].as_array().expect("rows").iter().all(|r| {
        r["previewValues"][0]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|id| id % 3 == 0)
    }));
    let (_, by_key, _) = list(r#"{"predicates": [{"field": "key", "op": "eq", "value": "7"}]}"#);
    assert_eq!(keys(&by_key), ["7"]);
    let (_, traced, _) =
        list(r#"{"predicates": [{"field": "header", "op": "eq", "value": "trace"}]}"#);
    assert_eq!(keys(&traced), ["5"]);
    assert_eq!(
        traced["rows"][0]["headers"],
        serde_json::json!([["trace", "abc-5"]])
    );
    let (_, one_partition, _) =
        list(r#"{"predicates": [{"field": "partition", "op": "in", "values": [1]}]}"#);
    assert_eq!(keys(&one_partition).len(), 10);
    let (status, refused, _) =
        list(r#"{"predicates": [{"field": "json", "op": "eq", "path": "a'b", "value": "x"}]}"#);
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        list(r#"{"mode": {"kind": "offsetRange", "fromOffset": 0}}"#).0,
        400
    );
    assert_eq!(list(r#"{"orderBy": "1; DROP TABLE x"}"#).0, 422);

    // One whole record, and the commonest values at a path.
    let row = &all["rows"][0];
    let (status, record, _) = call(
        &api,
        "POST",
        "/sources/orders/messages/record",
        me,
        Some(&format!(
            r#"{{"partition": {}, "offset": {}}}"#,
            row["partition"], row["offset"]
        )),
    );
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["topic"], topic.as_str());
    assert!(
        record["value"]
            .as_str()
            .is_some_and(|v| v.contains("\"status\""))
    );
    let (status, _, _) = call(
        &api,
        "POST",
        "/sources/orders/messages/record",
        me,
        Some(r#"{"partition": 0, "offset": 99999}"#),
    );
    assert_eq!(status, 404);
    let (status, facets, _) = call(
        &api,
        "POST",
        "/sources/orders/messages/facets",
        me,
        Some(r#"{"path": "status"}"#),
    );
    assert_eq!(status, 200, "{facets}");
    assert_eq!(
        facets["values"],
        serde_json::json!([["\"open\"", 20], ["\"paid\"", 10]])
    );
    assert_eq!(facets["totalCount"], 30);
    assert_eq!(facets["nullCount"], 0);
    assert_eq!(
        call(&api, "POST", "/sources/nope/messages", me, Some("{}")).0,
        404
    );

    // Topics: the broker's, with the sources reading them; credentials never shown.
    let (status, topics, _) = call(&api, "GET", "/topics", vic, None);
    assert_eq!(status, 200, "{topics}");
    assert!(!topics.to_string().contains("hunter2"), "{topics}");
    let listed = topics["topics"].as_array().expect("topics");
    let ours = listed
        .iter()
        .find(|t| t["name"] == topic.as_str())
        .expect("our topic");
    assert_eq!(ours["partitions"], 3);
    assert_eq!(ours["sources"][0]["name"], "orders");
    assert_eq!(ours["sources"][0]["retainedRows"], 30);
    assert_eq!(ours["sources"][0]["lagMessages"], 0, "{ours}");
    let elsewhere = listed
        .iter()
        .find(|t| t["name"] == "audit_trail")
        .expect("listed while down");
    assert_eq!(elsewhere["brokerList"], "<redacted>");
    assert!(elsewhere["partitions"].is_null());
    assert_eq!(topics["available"], false);

    stop(child, lines);
}

#[test]
fn a_pipeline_is_destroyed_through_a_reviewed_plan_bound_to_its_admin() {
    let db = TestDatabase::create("devdestroy");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = crate::deployments::mixed_project(&db.name, None);
    let built = crate::deployments::ok_json(dir.path(), &["build", "--auto-approve", "--json"]);
    let staged = built["virtual"]["deployment_id"].as_str().expect("staged");
    crate::deployments::promote(dir.path(), staged);
    let tables = || {
        stb_test_support::execute(&format!(
            "SELECT name FROM system.tables WHERE database = '{}' FORMAT TSV",
            db.name
        ))
    };
    assert!(tables().contains("tbl__plain"));
    create_users(
        dir.path(),
        &[("ana", "admin"), ("bea", "admin"), ("vic", "viewer")],
    );
    let (child, api, lines) = start(dir.path());
    let session = |user: &str| sign_in(&api, user);
    let (ana_cookie, ana_csrf) = session("ana");
    let ana = Some((ana_cookie.as_str(), ana_csrf.as_str()));
    let (bea_cookie, bea_csrf) = session("bea");
    let bea = Some((bea_cookie.as_str(), bea_csrf.as_str()));
    let (vic_cookie, vic_csrf) = session("vic");
    let vic = Some((vic_cookie.as_str(), vic_csrf.as_str()));
    let send = |method: &str, path: &str, who: Option<(&str, &str)>, body: Option<&str>| {
        call(&api, method, path, who, body)
    };
    let destroy_d = Some(r#"{"operation": "destroy_pipelines", "pipelineNames": ["pl__d"]}"#);

    let (status, refused, _) = send("POST", "/destruction/plans", vic, destroy_d);
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["detail"]["reason"], "system_admin_required");
    let (status, plan, _) = send("POST", "/destruction/plans", ana, destroy_d);
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["challengeValues"], serde_json::json!(["pl__d"]));
    assert_eq!(plan["affectedPipelines"], serde_json::json!(["pl__d"]));
    assert!(
        plan["resources"].as_array().is_some_and(|r| r
            .iter()
            .any(|d| d["name"] == "tbl__plain" && d["rows"] == 30)),
        "{plan}"
    );
    let id = plan["planId"].as_str().expect("id").to_owned();
    let path = |tail: &str| format!("/destruction/plans/{id}{tail}");
    // Bound to its admin: another admin does not see it.
    assert_eq!(send("GET", &path(""), bea, None).0, 404);
    assert_eq!(send("GET", &path(""), ana, None).0, 200);
    let typed = |responses: &str| format!(r#"{{"responses": {responses}}}"#);
    assert_eq!(
        send("POST", &path("/execute"), ana, Some(&typed(r#"["pl__d"]"#))).0,
        409,
        "not reviewed yet"
    );
    assert_eq!(send("POST", &path("/review"), bea, None).0, 404);
    let (status, reviewed, _) = send("POST", &path("/review"), ana, None);
    assert_eq!(status, 200, "{reviewed}");
    assert!(reviewed["reviewedAtMs"].is_number());
    for wrong in [r#"["PL__D"]"#, r#"["pl__d "]"#, "[]"] {
        assert_eq!(
            send("POST", &path("/execute"), ana, Some(&typed(wrong))).0,
            400,
            "{wrong}"
        );
    }
    assert!(tables().contains("tbl__plain"), "nothing dropped yet");
    let (status, started, _) = send("POST", &path("/execute"), ana, Some(&typed(r#"["pl__d"]"#)));
    assert_eq!(status, 202, "{started}");
    let run = started["invocationId"].as_str().expect("run").to_owned();
    let finished = wait_for(Duration::from_secs(60), || {
        send("GET", &format!("/runs/{run}"), ana, None).1["run"]["status"] == "succeeded"
    });
    let (_, detail, _) = send("GET", &format!("/runs/{run}"), ana, None);
    assert!(finished, "{detail}");
    assert_eq!(detail["run"]["mode"], "destructive", "{detail}");
    let left = tables();
    assert!(!left.contains("tbl__plain"), "{left}");
    assert!(
        left.contains("tbl__clean"),
        "the other pipeline stays: {left}"
    );
    // Single use.
    assert_eq!(
        send("POST", &path("/execute"), ana, Some(&typed(r#"["pl__d"]"#))).0,
        404
    );

    // A plan whose target changes before its review is refused, nothing dropped.
    let destroy_v = Some(r#"{"operation": "destroy_pipelines", "pipelineNames": ["pl__v"]}"#);
    let (status, plan, _) = send("POST", "/destruction/plans", ana, destroy_v);
    assert_eq!(status, 200, "{plan}");
    let id = plan["planId"].as_str().expect("id").to_owned();
    stb_test_support::execute(&format!(
        "CREATE VIEW {0}.by_hand AS SELECT count() FROM {0}.tbl__clean",
        db.name
    ));
    let (status, drift, _) = send(
        "POST",
        &format!("/destruction/plans/{id}/review"),
        ana,
        None,
    );
    assert_eq!(status, 409, "{drift}");
    assert!(tables().contains("tbl__clean"));

    stop(child, lines);
}

/// Removes the seed README's store (and its directory, when empty) however the test ends.
struct SeedStore(&'static std::path::Path);

impl Drop for SeedStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The seed README's commands, verbatim: its bootstrap `stb admin` run from one directory
/// and its trusted-proxy `stb dev` run from the project share the one store the four
/// slashes name (an absolute path, as SQLAlchemy reads it), so the account it bootstraps
/// signs in.
#[test]
fn the_seed_readmes_bootstrap_and_trusted_proxy_server_share_one_absolute_store() {
    const URL: &str = "sqlite:////var/lib/streambuild/control.db";
    let file = std::path::Path::new("/var/lib/streambuild/control.db");
    assert!(
        !file.exists(),
        "{} exists and is not this test's: move it away first",
        file.display()
    );
    let _cleanup = SeedStore(file);
    let elsewhere = tempfile::tempdir().expect("dir");
    // stb admin --control-store-url sqlite:////var/lib/streambuild/control.db create-user \
    //   --username kevinl --authentication-source trusted_proxy --role admin
    let created = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .current_dir(elsewhere.path())
        .args([
            "admin",
            "--control-store-url",
            "sqlite:////var/lib/streambuild/control.db",
            "create-user",
            "--username",
            "kevinl",
            "--authentication-source",
            "trusted_proxy",
            "--role",
            "admin",
        ])
        .env_remove("STREAMBUILD_CONTROL_STORE_URL")
        .output()
        .expect("stb admin");
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert!(file.is_file(), "the store is the absolute file");
    assert!(
        !elsewhere.path().join("var").exists(),
        "nothing under the working directory"
    );
    // The same URL from the environment, in a third directory, finds the same account.
    let third = tempfile::tempdir().expect("dir");
    let granted = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .current_dir(third.path())
        .args([
            "admin",
            "grant-role",
            "--username",
            "kevinl",
            "--role",
            "viewer",
        ])
        .env("STREAMBUILD_CONTROL_STORE_URL", URL)
        .output()
        .expect("stb admin");
    assert!(
        granted.status.success(),
        "{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    // From the project's directory:
    // stb dev --auth-mode trusted_proxy --auth-username-header X-Mustard-User \
    //   --control-store-url sqlite:////var/lib/streambuild/control.db
    let db = TestDatabase::create("dev_seed_store");
    let dir = project(&db.name);
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("stb"))
        .current_dir(dir.path())
        .args([
            "dev",
            "--auth-mode",
            "trusted_proxy",
            "--auth-username-header",
            "X-Mustard-User",
            "--control-store-url",
            URL,
        ])
        // A free port, so the test runs beside others.
        .args(["--ui-port", "0"])
        .envs(stb_test_support::warehouse_env())
        .env_remove("STREAMBUILD_AUTH_MODE")
        .env_remove("STREAMBUILD_CONTROL_STORE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stb dev starts");
    let (api, _lines) = banner(&mut child);
    let me = stb_test_support::http()
        .get(format!("{api}/auth/me"))
        .header("X-Mustard-User", "kevinl")
        .send()
        .expect("answered");
    let status = me.status().as_u16();
    let session: Value =
        serde_json::from_str(&me.text().unwrap_or_default()).unwrap_or(Value::Null);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["user"]["username"], "kevinl", "{session}");
    assert!(
        session["roles"]
            .as_array()
            .is_some_and(|roles| roles.iter().any(|r| r == "admin")),
        "the bootstrapped admin, not a new viewer: {session}"
    );
}

/// `stb dev --watch`: an edit that breaks the project is compiled within seconds and
/// `/api/status` carries its diagnostics (code, file, line, column, a did-you-mean hint);
/// writes under `target/` are not edits; the fix is compiled too, and an added model
/// counted.
#[test]
fn under_watch_an_edit_recompiles_and_status_shows_the_diagnostics() {
    let db = TestDatabase::create("dev_watch");
    events_table(&db.name);
    let dir = project(&db.name);
    let mut child = dev(dir.path(), &["--ui-port", "0", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("stb dev starts");
    let (api, printed, _lines) = banner_lines(&mut child);
    // The banner says which ClickHouse the server connects to.
    let port = stb_test_support::stack().clickhouse_port;
    assert!(
        printed
            .iter()
            .any(|line| line.trim().starts_with("warehouse")
                && line.contains(&format!(" at http://default@127.0.0.1:{port} "))),
        "{printed:?}"
    );
    let status = || call(&api, "GET", "/status", None, None).1;
    let first = status();
    assert_eq!(first["compile"]["state"], "ok", "{first}");
    let models = first["compile"]["models"].as_u64().expect("models");

    // The project's `clean` model reads `__source("events")` on its third line.
    let model = dir.path().join("pipelines/pl__v/clean.sql");
    let original = std::fs::read_to_string(&model).expect("read");
    assert_eq!(original.lines().nth(2), Some("FROM __source(\"events\")"));
    std::fs::write(
        &model,
        original.replace("__source(\"events\")", "__source(\"event\")"),
    )
    .expect("write");
    let failing = wait_for(Duration::from_secs(60), || {
        status()["compile"]["state"] == "failing"
    });
    assert!(failing, "the broken edit was never compiled: {}", status());
    let shown = status();
    let error = &shown["compile"]["error"][0];
    assert_eq!(error["code"], "STB-DISCOVER-021", "{shown}");
    assert_eq!(
        error["location"]["file"], "pipelines/pl__v/clean.sql",
        "{shown}"
    );
    assert_eq!(error["location"]["line"], 3, "{shown}");
    assert_eq!(error["location"]["column"], 6, "{shown}");
    assert!(
        error["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("did you mean 'events'? ")),
        "{shown}"
    );

    // Compile output is not an edit: the failing compile stays the one it was.
    let compiled_at = shown["compile"]["compiledAtMs"].clone();
    std::fs::create_dir_all(dir.path().join("target/run")).expect("mkdir");
    std::fs::write(dir.path().join("target/run/x.sql"), "SELECT 1").expect("write");
    // Three of the watcher's one-second looks.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(status()["compile"]["compiledAtMs"], compiled_at);

    // The fix, and a model more.
    std::fs::write(&model, &original).expect("write");
    std::fs::write(
        dir.path().join("pipelines/pl__v/small.sql"),
        crate::deployments::BIG.replace("amount > 10", "amount <= 10"),
    )
    .expect("write");
    let fixed = wait_for(Duration::from_secs(60), || {
        let now = status();
        now["compile"]["state"] == "ok" && now["compile"]["models"].as_u64() == Some(models + 1)
    });
    assert!(fixed, "the fix was never compiled: {}", status());
    let _ = child.kill();
    let _ = child.wait();
}
