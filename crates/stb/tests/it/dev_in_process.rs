//! The dev server works in its own process, through the functions the commands call: its
//! plan previews, deployment reads and janitor dry run are the matching command's `--json`
//! document, and a build started from the API records the statements `stb build` records
//! for the same scope.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Method, Request, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use stb_server::{AppState, AuthConfig, AuthMode};
use stb_test_support::{TestDatabase, execute, stb_on_project};
use tower::ServiceExt as _;

use crate::deployments::{events_table, insert, project};

/// The server's router over the project in `dir`, compiled here, with the test stack as
/// its warehouse and authentication off (a local admin).
async fn server(dir: &std::path::Path, database: &str) -> axum::Router {
    let project = stb_project::discover(&stb_project::DiscoverOptions {
        project_dir: Some(dir.to_path_buf()),
        cwd: dir.to_path_buf(),
        ..Default::default()
    })
    .expect("discovers");
    let port = stb_test_support::stack().clickhouse_port;
    let connect: stb_server::Connect = Arc::new(move || {
        stb_warehouse::Client::new(stb_warehouse::ConnectionConfig {
            port,
            ..Default::default()
        })
        .map_err(|e| e.to_string())
    });
    let state = Arc::new(AppState {
        store: stb_control::ControlStore::open("sqlite://")
            .await
            .expect("store"),
        auth: AuthConfig {
            mode: AuthMode::Disabled,
            ..AuthConfig::default()
        },
        project_name: project.name.clone(),
        target_name: project.target.clone(),
        database: database.to_owned(),
        held: std::sync::RwLock::new(Arc::new(stb_server::serve::compile(&project))),
        recompile: None,
        reloading: tokio::sync::Mutex::new(()),
        stopping: std::sync::atomic::AtomicBool::new(false),
        throttle: Mutex::default(),
        warehouse: Arc::new(stb_server::warehouse::Warehouse::new(connect, database)),
        run_windows: stb_engine::runs::Windows {
            signal_ms: 45_000,
            presumed_failed_ms: 600_000,
        },
        builds: stb_server::builder::Builds::default(),
        snapshots: stb_server::snapshot::Snapshots::default(),
        scheduler: stb_server::scheduler::Scheduler::default(),
        sensors: stb_server::sensors::Sensors::default(),
    });
    stb_server::router(state)
}

/// One request to the router: its status and JSON answer.
async fn call(app: &axum::Router, method: Method, path: &str, body: &str) -> (u16, Value) {
    let request = Request::builder()
        .method(method)
        .uri(format!("/api{path}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_owned()))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// `stb <args> --json` on the project: its JSON.
fn cli(dir: &std::path::Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = stb_on_project(dir, &all, "");
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("json")
}

#[test]
fn read_routes_answer_in_process_with_the_commands_documents() {
    let db = TestDatabase::create("devread");
    events_table(&db.name);
    insert(&db.name, 0, 10);
    let dir = project(&db.name);
    let built = stb_on_project(dir.path(), &["build", "--auto-approve"], "");
    assert!(built.status.success(), "{built:?}");
    let listed = cli(dir.path(), &["deployment", "list"]);
    let deployment = listed["deployments"][0]["deployment_id"]
        .as_str()
        .expect("a deployment")
        .to_owned();
    let promoted = stb_on_project(dir.path(), &["deployment", "promote", &deployment], "");
    assert!(promoted.status.success(), "{promoted:?}");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let api_id = "20261205T130000Z_apibld";
    // The replays so far in the server's query log now, not at its next flush: a plan's
    // time estimate reads them, and the documents compared below must read the same.
    execute("SYSTEM FLUSH LOGS");
    let invocation = runtime.block_on(async {
        let app = server(dir.path(), &db.name).await;
        // The preview of a full refresh under a fixed deployment id is `stb plan --json`'s
        // document for the same scope, member for member.
        let id = "20261205T120000Z_inproc";
        let (status, previewed) = call(
            &app,
            Method::GET,
            &format!("/plan?select=pipeline%3Apl__v&full_refresh=true&deployment={id}"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{previewed}");
        let planned = cli(
            dir.path(),
            &[
                "plan",
                "--select",
                "pipeline:pl__v",
                "--full-refresh",
                "--deployment-id",
                id,
            ],
        );
        assert_eq!(previewed, planned);
        assert_eq!(previewed["deployment_id"], id);
        // Asked for, the statements come with it: the steps `target/run/plan/plan.json`
        // lists for the same plan, and the document is otherwise the same.
        let (status, mut with_statements) = call(
            &app,
            Method::GET,
            &format!(
                "/plan?select=pipeline%3Apl__v&full_refresh=true&deployment={id}&statements=true"
            ),
            "",
        )
        .await;
        assert_eq!(status, 200, "{with_statements}");
        let listed = with_statements
            .as_object_mut()
            .and_then(|d| d.remove("statements"))
            .expect("statements");
        let total = with_statements
            .as_object_mut()
            .and_then(|d| d.remove("statementsTotal"))
            .expect("a total");
        assert_eq!(with_statements, planned);
        let written: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("target/run/plan/plan.json"))
                .expect("plan.json"),
        )
        .expect("json");
        let ids = |steps: &Value| -> Vec<String> {
            steps
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s["step_id"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let steps = &written["workflow_steps"];
        assert!(!ids(steps).is_empty(), "{written}");
        assert_eq!(ids(&listed), ids(steps));
        assert_eq!(total, steps.as_array().map_or(0, Vec::len));
        assert!(
            listed
                .as_array()
                .into_iter()
                .flatten()
                .all(|s| s["sql"].as_str().is_some_and(|sql| !sql.trim().is_empty())),
            "{listed}"
        );
        assert!(
            previewed["steps"].as_array().is_some_and(|s| !s.is_empty()),
            "{previewed}"
        );
        // A scope the engine refuses is answered with its code, not a crash or a child's
        // stderr.
        let (status, refused) = call(&app, Method::GET, "/plan?select=--help", "").await;
        assert_eq!(status, 400, "{refused}");
        assert!(
            refused["detail"]["code"]
                .as_str()
                .is_some_and(|code| code.starts_with("STB-")),
            "{refused}"
        );

        // A start time is read where the request enters, once: one that does not read is
        // refused before anything is planned.
        let (status, unread) = call(
            &app,
            Method::GET,
            "/plan?select=pipeline%3Apl__v&start=yesterday",
            "",
        )
        .await;
        assert_eq!(status, 400, "{unread}");
        assert_eq!(unread["detail"]["code"], "STB-PLAN-001", "{unread}");
        let body = r#"{"select": ["pipeline:pl__v"], "startTime": "2026-13-01", "planHash": "x"}"#;
        let (status, unread) = call(&app, Method::POST, "/build", body).await;
        assert_eq!(status, 400, "{unread}");
        assert_eq!(unread["detail"]["code"], "STB-PLAN-001", "{unread}");

        // `includeMissingUpstream` reaches the scope, from the body and from the query: without
        // a selection it cannot mean anything, and says so.
        let (status, unread) = call(
            &app,
            Method::POST,
            "/build",
            r#"{"selectors": [], "includeMissingUpstream": true, "planHash": "x"}"#,
        )
        .await;
        assert_eq!(status, 400, "{unread}");
        assert_eq!(unread["detail"]["code"], "STB-PLAN-001", "{unread}");
        let (status, unread) =
            call(&app, Method::GET, "/plan?include_missing_upstream=true", "").await;
        assert_eq!(status, 400, "{unread}");
        assert_eq!(unread["detail"]["code"], "STB-PLAN-001", "{unread}");

        // Deployments: the list, one deployment, what promoting it would change.
        let (status, list) = call(&app, Method::GET, "/deployments", "").await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(list, cli(dir.path(), &["deployment", "list"]));
        assert_ne!(list, listed, "the promotion shows");
        let (status, shown) =
            call(&app, Method::GET, &format!("/deployments/{deployment}"), "").await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown, cli(dir.path(), &["deployment", "show", &deployment]));
        assert_eq!(shown["deployment"]["state"], "active", "{shown}");
        let (status, diff) = call(
            &app,
            Method::GET,
            &format!("/deployments/{deployment}/diff"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{diff}");
        assert_eq!(diff, cli(dir.path(), &["deployment", "diff", &deployment]));
        let (status, data) = call(
            &app,
            Method::GET,
            &format!("/deployments/{deployment}/diff?data=true&samples=2"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{data}");
        assert!(data["data"].is_array(), "{data}");
        assert_eq!(
            data,
            cli(
                dir.path(),
                &[
                    "deployment",
                    "diff",
                    &deployment,
                    "--data",
                    "--samples",
                    "2"
                ]
            )
        );
        // An unknown deployment is not found (by the error's kind, not its text).
        let (status, unknown) =
            call(&app, Method::GET, "/deployments/20200101T000000Z_none", "").await;
        assert_eq!(status, 404, "{unknown}");
        assert_eq!(unknown["detail"]["code"], "STB-DEPLOY-001", "{unknown}");

        // The janitor's dry run: the active deployment is kept, nothing is dropped.
        let (status, cleanup) = call(&app, Method::POST, "/deployments/cleanup", "{}").await;
        assert_eq!(status, 200, "{cleanup}");
        assert_eq!(cleanup["applied"], false, "{cleanup}");
        assert_eq!(
            cleanup["candidates"][0]["deployment_id"],
            deployment.as_str()
        );
        assert_eq!(cleanup["candidates"][0]["delete"], false, "{cleanup}");

        // A build from the API: the reviewed plan, run in the server's process.
        let (status, reviewed) = call(
            &app,
            Method::GET,
            &format!("/plan?select=pipeline%3Apl__v&full_refresh=true&deployment={api_id}"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{reviewed}");
        // The body in the spec's names (`selectors`, `confirmations`,
        // `includeMissingUpstream`), as a client written for the reference sends it.
        let body = serde_json::json!({
            "selectors": ["pipeline:pl__v"],
            "fullRefresh": true,
            "deploymentId": api_id,
            "confirmations": [],
            "changed": false,
            "includeMissingUpstream": false,
            "planHash": reviewed["plan_hash"],
        });
        let (status, started) = call(&app, Method::POST, "/build", &body.to_string()).await;
        assert_eq!(status, 202, "{started}");
        let invocation = started["invocationId"].as_str().expect("a run").to_owned();
        let ended = loop {
            let (_, current) = call(&app, Method::GET, "/build/current", "").await;
            if current["build"]["running"] == false {
                break current;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        assert_eq!(
            ended["build"]["invocationId"],
            invocation.as_str(),
            "{ended}"
        );
        assert_eq!(ended["build"]["exitCode"], 0, "{ended}");
        let (_, run) = call(&app, Method::GET, &format!("/runs/{invocation}"), "").await;
        assert_eq!(run["run"]["status"], "succeeded", "{run}");
        assert_eq!(run["run"]["deployment_id"], api_id, "{run}");
        assert_eq!(run["run"]["owner"], "local", "{run}");
        invocation
    });

    // The same scope from the command line: the same statements, in the same order,
    // with its own deployment id and capture times.
    let cli_id = "20261205T130000Z_clibld";
    let cli_run = "cli-build-of-the-same-scope";
    let built = stb_test_support::stb_on_project_with(
        dir.path(),
        &[
            "build",
            "--auto-approve",
            "--select",
            "pipeline:pl__v",
            "--full-refresh",
            "--deployment-id",
            cli_id,
        ],
        "",
        &[("STREAMBUILD_RUN_INVOCATION_ID", cli_run)],
    );
    assert!(built.status.success(), "{built:?}");
    let api = recorded(&db.name, &invocation, api_id);
    assert!(api.len() > 5, "{api:?}");
    assert_eq!(api, recorded(&db.name, cli_run, cli_id));
}

/// The statements run `invocation` recorded (step and SQL, in order), with what differs
/// from one run of the same plan to the next made neutral: its deployment `id`, the hashes
/// made with it (state ids, the workflow's fingerprint) and the capture times.
fn recorded(database: &str, invocation: &str, id: &str) -> Vec<String> {
    let text = stb_test_support::execute(&format!(
        "SELECT step_id, sql FROM {database}._streambuild_run_statements FINAL WHERE invocation_id = '{invocation}' ORDER BY statement_sequence FORMAT JSONEachRow"
    ));
    text.lines()
        .map(|line| neutral(&line.replace(id, "<deployment>")))
        .collect()
}

/// `line` with every 64-digit hex hash and every `toDateTime64('…'` time replaced.
fn neutral(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("toDateTime64('") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "toDateTime64('".len()..];
        out.push_str("toDateTime64(<time>");
        rest = &after[after.find('\'').unwrap_or(after.len())..];
    }
    out.push_str(rest);
    let mut hashless = String::with_capacity(out.len());
    let mut hex = String::new();
    for c in out.chars() {
        if c.is_ascii_hexdigit() {
            hex.push(c);
            continue;
        }
        hashless.push_str(if hex.len() == 64 { "<hash>" } else { &hex });
        hex.clear();
        hashless.push(c);
    }
    hashless.push_str(if hex.len() == 64 { "<hash>" } else { &hex });
    hashless
}

#[test]
fn a_project_without_virtual_pipelines_lists_no_deployments_and_says_why() {
    let dir = stb_test_support::project_dir(&[
        (
            "streambuild_project.toml".to_owned(),
            "name = \"d\"\ndefault_target = \"dev\"\n[targets.dev]\ndatabase = \"stb_no_virtual\"\n"
                .to_owned(),
        ),
        (
            "sources/events.yml".to_owned(),
            "sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: offsets\n      columns:\n        _replay_partition: p\n        _replay_offset: o\n        _replay_timestamp: ts\n".to_owned(),
        ),
        (
            "pipelines/pl__d/clean.sql".to_owned(),
            crate::deployments::CLEAN.to_owned(),
        ),
    ]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let app = server(dir.path(), "stb_no_virtual").await;
        let (status, listed) = call(&app, Method::GET, "/deployments", "").await;
        assert_eq!(status, 200, "{listed}");
        assert_eq!(listed["deployments"], serde_json::json!([]), "{listed}");
        assert_eq!(listed["virtualPipelines"], false, "{listed}");
        assert_eq!(listed["database"], "stb_no_virtual", "{listed}");
        assert!(
            listed["message"]
                .as_str()
                .is_some_and(|m| m.contains("no virtual pipelines")),
            "{listed}"
        );
    });
}
