//! Authentication, CSRF, sessions, throttling and headers, through the real router with a
//! real (in-memory SQLite) control store; the warehouse is down, which the server survives.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use stb_control::{ControlStore, NewUser, Source};
use stb_server::{AppState, AuthConfig, AuthMode, CompileStatus, UnknownUserPolicy};
use tower::ServiceExt as _;

const PASSWORD: &str = "correct horse battery";

async fn app(auth: AuthConfig) -> (axum::Router, ControlStore) {
    app_with(auth, None).await
}

async fn app_with(
    auth: AuthConfig,
    access: Option<stb_project::access::AccessPolicy>,
) -> (axum::Router, ControlStore) {
    let store = ControlStore::open("sqlite://").await.expect("store");
    for (name, roles) in [("alice", vec!["admin".to_owned()]), ("bob", vec![])] {
        store
            .create_user(
                &NewUser {
                    username: name.into(),
                    display_name: None,
                    email: None,
                    source: Source::Password(PASSWORD.into()),
                    roles,
                },
                None,
            )
            .await
            .expect("user");
    }
    let connect: stb_server::Connect = Arc::new(|| Err("the warehouse is down".to_owned()));
    let state = Arc::new(AppState {
        store: store.clone(),
        auth,
        project_name: "shop".into(),
        target_name: "dev".into(),
        database: "shop_dev".into(),
        held: std::sync::RwLock::new(Arc::new(stb_server::Held {
            compile: CompileStatus {
                state: "ok",
                compiled_at_ms: 0,
                models: 3,
                sources: 1,
                error: None,
            },
            access,
            model_pipelines: std::collections::BTreeMap::new(),
            definitions: Some((
                "v1".to_owned(),
                serde_json::json!({"versionKey": "v1", "models": []}),
            )),
            compilation: None,
        })),
        recompile: None,
        reloading: tokio::sync::Mutex::new(()),
        stopping: std::sync::atomic::AtomicBool::new(false),
        throttle: Mutex::default(),
        warehouse: Arc::new(stb_server::warehouse::Warehouse::new(connect, "shop_dev")),
        run_windows: stb_engine::runs::Windows {
            signal_ms: 45_000,
            presumed_failed_ms: 600_000,
        },
        builds: stb_server::builder::Builds::default(),
        snapshots: stb_server::snapshot::Snapshots::default(),
        scheduler: stb_server::scheduler::Scheduler::default(),
        sensors: stb_server::sensors::Sensors::default(),
    });
    (stb_server::router(state), store)
}

fn config(mode: AuthMode) -> AuthConfig {
    AuthConfig {
        mode,
        ..AuthConfig::default()
    }
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

/// A JSON object's keys, sorted: its exact shape.
fn sorted_keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|object| object.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

async fn call(app: &axum::Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

fn request(
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    match body {
        Some(json) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json.to_string())),
        None => builder.body(Body::empty()),
    }
    .expect("request")
}

async fn login(app: &axum::Router, username: &str, password: &str, cookie: Option<&str>) -> Answer {
    let mut headers = Vec::new();
    let planted;
    if let Some(token) = cookie {
        planted = format!("streambuild_session={token}");
        headers.push(("cookie", planted.as_str()));
    }
    call(
        app,
        request(
            Method::POST,
            "/api/auth/login",
            &headers,
            Some(serde_json::json!({"username": username, "password": password})),
        ),
    )
    .await
}

/// The session token a login answer sets.
fn token_of(answer: &Answer) -> String {
    let cookie = answer.headers[header::SET_COOKIE].to_str().expect("cookie");
    cookie
        .split(';')
        .next()
        .and_then(|pair| pair.strip_prefix("streambuild_session="))
        .expect("the session cookie")
        .to_owned()
}

async fn me(app: &axum::Router, token: &str) -> Answer {
    let cookie = format!("streambuild_session={token}");
    call(
        app,
        request(Method::GET, "/api/auth/me", &[("cookie", &cookie)], None),
    )
    .await
}

#[tokio::test]
async fn disabled_mode_is_a_local_admin_and_unknown_api_paths_are_json_404() {
    let (app, _) = app(config(AuthMode::Disabled)).await;
    let me = call(&app, request(Method::GET, "/api/auth/me", &[], None)).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(me.body["user"]["username"], "local");
    assert_eq!(me.body["roles"], serde_json::json!(["admin"]));
    assert_eq!(me.body["csrfToken"], Value::Null);
    // No CSRF proof in this mode.
    let out = call(&app, request(Method::POST, "/api/auth/logout", &[], None)).await;
    assert_eq!(out.status, StatusCode::OK);
    let missing = call(&app, request(Method::GET, "/api/nope", &[], None)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body, serde_json::json!({"detail": "Not Found"}));
    // Security headers on every answer.
    for answer in [&me, &missing] {
        let csp = answer.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("csp");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(csp.contains("default-src 'self'"), "{csp}");
        assert_eq!(answer.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(answer.headers[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(answer.headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(answer.headers[header::CACHE_CONTROL], "no-store");
    }
    // Definitions carry their version as an ETag; a matching If-None-Match is 304.
    let definitions = call(&app, request(Method::GET, "/api/definitions", &[], None)).await;
    assert_eq!(definitions.status, StatusCode::OK);
    assert_eq!(definitions.headers[header::ETAG], "\"v1\"");
    let unchanged = call(
        &app,
        request(
            Method::GET,
            "/api/definitions",
            &[("if-none-match", "\"v1\"")],
            None,
        ),
    )
    .await;
    assert_eq!(unchanged.status, StatusCode::NOT_MODIFIED);
    // The warehouse is down: the server says so and keeps serving.
    let status = call(&app, request(Method::GET, "/api/status", &[], None)).await;
    assert_eq!(status.status, StatusCode::OK);
    assert_eq!(status.body["warehouse"]["connected"], false);
    assert_eq!(status.body["compile"]["state"], "ok");
    let runs = call(&app, request(Method::GET, "/api/runs", &[], None)).await;
    assert_eq!(
        runs.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{:?}",
        runs.body
    );
}

#[tokio::test]
async fn anonymous_requests_cannot_tell_which_routes_exist() {
    for mode in [AuthMode::Password, AuthMode::TrustedProxy] {
        let (app, _) = app(config(mode)).await;
        let mut answers = Vec::new();
        for (method, path) in [
            (Method::GET, "/api/no-such-route"),
            (Method::GET, "/api/sensors"),
            (Method::GET, "/api"),
            (Method::GET, "/api/state"),
            (Method::POST, "/api/state"),
            (Method::DELETE, "/api/admin/users"),
            (Method::GET, "/api/runs/x/nothing/here"),
        ] {
            let answer = call(&app, request(method.clone(), path, &[], None)).await;
            assert_eq!(
                answer.status,
                StatusCode::UNAUTHORIZED,
                "{mode:?} {method} {path}: {}",
                answer.body
            );
            answers.push(answer.body);
        }
        // The same answer whatever the path: nothing to tell them apart.
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
        // The public routes stay public.
        let public = call(&app, request(Method::GET, "/api/auth/config", &[], None)).await;
        assert_eq!(public.status, StatusCode::OK);
    }
    // Signed in, an unknown route is a JSON 404.
    let (app, _) = app(config(AuthMode::Password)).await;
    let token = token_of(&login(&app, "alice", PASSWORD, None).await);
    let cookie = format!("streambuild_session={token}");
    let missing = call(
        &app,
        request(
            Method::GET,
            "/api/no-such-route",
            &[("cookie", &cookie)],
            None,
        ),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body, serde_json::json!({"detail": "Not Found"}));
    // Pages outside the API are the web app's, for anyone.
    let page = app
        .clone()
        .oneshot(request(Method::GET, "/lineage", &[], None))
        .await
        .expect("answered");
    assert_ne!(page.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn password_sessions_have_safe_cookies_csrf_and_rotate_at_login() {
    let (app, store) = app(config(AuthMode::Password)).await;
    let config = call(&app, request(Method::GET, "/api/auth/config", &[], None)).await;
    assert_eq!(config.body["loginRequired"], true);
    let anonymous = call(&app, request(Method::GET, "/api/auth/me", &[], None)).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.headers[header::WWW_AUTHENTICATE], "Session");
    // One message for every failure.
    for (name, password) in [("bob", "wrong password!"), ("nobody", PASSWORD)] {
        let refused = login(&app, name, password, None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        assert_eq!(refused.body["detail"], "Invalid username or password");
        assert!(refused.headers.get(header::SET_COOKIE).is_none());
    }
    let signed_in = login(&app, "bob", PASSWORD, None).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let cookie = signed_in.headers[header::SET_COOKIE]
        .to_str()
        .expect("cookie");
    for attribute in [
        "HttpOnly",
        "Secure",
        "SameSite=Lax",
        "Path=/",
        "Max-Age=43200",
    ] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    let token = token_of(&signed_in);
    let csrf = signed_in.body["csrfToken"]
        .as_str()
        .expect("csrf")
        .to_owned();
    let mine = me(&app, &token).await;
    assert_eq!(mine.status, StatusCode::OK);
    assert_eq!(mine.body["user"]["username"], "bob");
    assert_eq!(mine.body["csrfToken"], csrf.as_str());
    // Unsafe methods need the session's CSRF token.
    let session_cookie = format!("streambuild_session={token}");
    for proof in [None, Some("wrong")] {
        let mut headers = vec![("cookie", session_cookie.as_str())];
        if let Some(proof) = proof {
            headers.push(("x-streambuild-csrf", proof));
        }
        let refused = call(
            &app,
            request(Method::POST, "/api/auth/logout", &headers, None),
        )
        .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(refused.body["detail"], "Missing or invalid CSRF token");
    }
    // Not an admin.
    let audit = call(
        &app,
        request(
            Method::GET,
            "/api/admin/audit",
            &[("cookie", &session_cookie)],
            None,
        ),
    )
    .await;
    assert_eq!(audit.status, StatusCode::FORBIDDEN);
    assert_eq!(audit.body["detail"]["reason"], "system_admin_required");
    // Logout ends the session and clears the cookie.
    let out = call(
        &app,
        request(
            Method::POST,
            "/api/auth/logout",
            &[("cookie", &session_cookie), ("x-streambuild-csrf", &csrf)],
            None,
        ),
    )
    .await;
    assert_eq!(out.status, StatusCode::OK);
    assert!(
        out.headers[header::SET_COOKIE]
            .to_str()
            .expect("cookie")
            .contains("Max-Age=0")
    );
    assert_eq!(me(&app, &token).await.status, StatusCode::UNAUTHORIZED);

    // Session fixation: a cookie planted before sign-in never becomes the session.
    let planted = token_of(&login(&app, "bob", PASSWORD, None).await);
    let fresh = login(&app, "alice", PASSWORD, Some(&planted)).await;
    let fresh_token = token_of(&fresh);
    assert_ne!(fresh_token, planted);
    assert_eq!(me(&app, &planted).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        me(&app, &fresh_token).await.body["user"]["username"],
        "alice"
    );
    let audit = call(
        &app,
        request(
            Method::GET,
            "/api/admin/audit",
            &[("cookie", &format!("streambuild_session={fresh_token}"))],
            None,
        ),
    )
    .await;
    assert_eq!(audit.status, StatusCode::OK, "an admin reads the audit log");
    // Disabling a user ends its sessions.
    let bobs = token_of(&login(&app, "bob", PASSWORD, None).await);
    store.set_active("bob", false, None).await.expect("disable");
    assert_eq!(me(&app, &bobs).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn failed_logins_are_throttled_before_the_password_is_checked() {
    let (app, _) = app(config(AuthMode::Password)).await;
    for _ in 0..5 {
        let refused = login(&app, "Bob", "wrong password!", None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    }
    let throttled = login(&app, " BOB ", PASSWORD, None).await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        throttled.body["detail"],
        "Too many login attempts; try again later"
    );
    // Another user is not held back by bob's failures (their address differs in real use;
    // here every request shares one, which allows 20).
    assert_eq!(
        login(&app, "alice", PASSWORD, None).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn sessions_expire_and_insecure_cookies_drop_secure() {
    let (app, _) = app(AuthConfig {
        session_ttl_seconds: 1,
        insecure_cookie: true,
        ..config(AuthMode::Password)
    })
    .await;
    let signed_in = login(&app, "bob", PASSWORD, None).await;
    let cookie = signed_in.headers[header::SET_COOKIE]
        .to_str()
        .expect("cookie");
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert!(cookie.contains("Max-Age=1"), "{cookie}");
    let token = token_of(&signed_in);
    assert_eq!(me(&app, &token).await.status, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(me(&app, &token).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_trusted_proxy_names_the_user_and_unsafe_methods_carry_its_proof() {
    let (app, store) = app(config(AuthMode::TrustedProxy)).await;
    let missing = call(&app, request(Method::GET, "/api/auth/me", &[], None)).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        missing.body["detail"],
        "Trusted proxy did not provide required header 'x-streambuild-user'"
    );
    let invalid = call(
        &app,
        request(
            Method::GET,
            "/api/auth/me",
            &[("x-streambuild-user", "-x")],
            None,
        ),
    )
    .await;
    assert_eq!(invalid.status, StatusCode::UNAUTHORIZED);
    // Eight first requests at once: one viewer account.
    let first: Vec<_> = (0..8)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                call(
                    &app,
                    request(
                        Method::GET,
                        "/api/auth/me",
                        &[("x-streambuild-user", " NewBie ")],
                        None,
                    ),
                )
                .await
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for answer in first {
        let answer = answer.await.expect("task");
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        ids.insert(
            answer.body["user"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        assert_eq!(answer.body["roles"], serde_json::json!(["viewer"]));
        assert_eq!(answer.body["user"]["authenticationSource"], "trusted_proxy");
    }
    assert_eq!(ids.len(), 1);
    let user = [("x-streambuild-user", "newbie")];
    let refused = call(&app, request(Method::POST, "/api/auth/logout", &user, None)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(
        refused.body["detail"],
        "Missing trusted-proxy request proof"
    );
    let proved = call(
        &app,
        request(
            Method::POST,
            "/api/auth/logout",
            &[user[0], ("x-streambuild-csrf", "trusted-proxy")],
            None,
        ),
    )
    .await;
    assert_eq!(proved.status, StatusCode::OK);
    // A password account's name is never taken over through the header.
    let spoofed = call(
        &app,
        request(
            Method::GET,
            "/api/auth/me",
            &[("x-streambuild-user", "alice")],
            None,
        ),
    )
    .await;
    assert_eq!(spoofed.status, StatusCode::FORBIDDEN, "{:?}", spoofed.body);
    // Disabled accounts are refused.
    store
        .set_active("newbie", false, None)
        .await
        .expect("disable");
    let disabled = call(&app, request(Method::GET, "/api/auth/me", &user, None)).await;
    assert_eq!(disabled.status, StatusCode::FORBIDDEN);
    assert_eq!(disabled.body["detail"], "Account is disabled");
    // Login is for password mode only.
    assert_eq!(
        login(&app, "alice", PASSWORD, None).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn unknown_proxy_users_are_refused_when_provisioning_is_off() {
    let (app, _) = app(AuthConfig {
        unknown_user_policy: UnknownUserPolicy::Deny,
        ..config(AuthMode::TrustedProxy)
    })
    .await;
    let refused = call(
        &app,
        request(
            Method::GET,
            "/api/auth/me",
            &[("x-streambuild-user", "stranger")],
            None,
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(
        refused.body["detail"],
        "Authenticated proxy user 'stranger' is not provisioned in StreamBuild"
    );
}

#[tokio::test]
async fn capabilities_mirror_the_project_roles_a_user_holds_here() {
    use stb_project::access::{AccessPolicy, AccessRole, Grant, GrantScope};
    let policy = AccessPolicy {
        fingerprint: String::new(),
        roles: vec![AccessRole {
            name: "moving_operator".into(),
            description: None,
            grants: vec![
                Grant {
                    scope: GrantScope::Pipelines(vec!["pl__moving".into()]),
                    permissions: vec!["build.direct.run".into(), "pipeline.destroy".into()],
                },
                Grant {
                    scope: GrantScope::Target,
                    permissions: vec!["build.kill".into()],
                },
            ],
        }],
    };
    let (app, store) = app_with(config(AuthMode::Password), Some(policy)).await;
    let bob = store.find_user("bob").await.expect("read").expect("bob");
    store
        .grant_project_role(&bob.id, "shop", "moving_operator", Some("dev"), None)
        .await
        .expect("grant");
    // Pinned to another target: does not count here.
    store
        .grant_project_role(&bob.id, "shop", "ghost_role", Some("prod"), None)
        .await
        .expect("grant");
    let token = token_of(&login(&app, "bob", PASSWORD, None).await);
    let cookie = format!("streambuild_session={token}");
    let found = call(
        &app,
        request(
            Method::GET,
            "/api/auth/capabilities",
            &[("cookie", &cookie)],
            None,
        ),
    )
    .await;
    assert_eq!(found.status, StatusCode::OK, "{:?}", found.body);
    assert_eq!(found.body["systemAdmin"], false);
    assert_eq!(found.body["permissions"], serde_json::json!(["build.kill"]));
    assert_eq!(
        found.body["pipelinePermissions"],
        serde_json::json!({"build.direct.run": ["pl__moving"]}),
        "destruction is never shown to a non-admin"
    );
    assert_eq!(found.body["staleRoles"], serde_json::json!([]));
    let admin = token_of(&login(&app, "alice", PASSWORD, None).await);
    let found = call(
        &app,
        request(
            Method::GET,
            "/api/auth/capabilities",
            &[("cookie", &format!("streambuild_session={admin}"))],
            None,
        ),
    )
    .await;
    assert_eq!(found.body["systemAdmin"], true);
    assert!(
        found.body["permissions"]
            .as_array()
            .is_some_and(|p| p.contains(&Value::from("target.reset")))
    );
}

/// Who calls, and what each route must then answer: `Public` routes answer everyone;
/// `SignedIn` routes refuse anonymous callers (401); `Admin` routes also refuse viewers
/// (403); `Permission` routes refuse callers who hold no grant of it (403).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Public,
    SignedIn,
    Admin,
    Permission(&'static str),
}

/// Every route of the inventory with its path parameters filled in, as the matrix calls
/// it: logout last (it ends the session the others use).
fn matrix_routes() -> Vec<(&'static str, String, Policy)> {
    use stb_server::inventory::{Access, ROUTES};
    let mut routes: Vec<(&'static str, String, Policy)> = ROUTES
        .iter()
        .map(|route| {
            let path = route
                .path
                .replace("{invocation_id}", "run-1")
                .replace("{deployment_id}", "20261202T000000Z_abcdef")
                .replace("{user_id}", "u-1")
                .replace("{role}", "admin")
                .replace("{assignment_id}", "a-1")
                .replace("{name}", "orders")
                .replace("{plan_id}", "p-1")
                .replace("{sequence}", "1")
                .replace("{model}", "clean")
                .replace("{column}", "id");
            let path = match path.as_str() {
                "/api/plan" => "/api/plan?select=clean".to_owned(),
                "/api/checks/history" => "/api/checks/history?kind=audit&name=a".to_owned(),
                _ => path,
            };
            let policy = match route.access {
                Access::Public => Policy::Public,
                Access::SignedIn => Policy::SignedIn,
                Access::Admin => Policy::Admin,
                Access::Permission(permission, _) => Policy::Permission(permission),
            };
            (route.method, path, policy)
        })
        .collect();
    routes.sort_by_key(|(_, path, _)| path == "/api/auth/logout");
    routes
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persona {
    Anonymous,
    Viewer,
    /// Holds a project role with every pipeline permission on every pipeline.
    Operator,
    Admin,
}

/// The status a route answers `persona` in `mode`, without reading a streamed body.
async fn status_for(
    app: &axum::Router,
    mode: AuthMode,
    persona: Persona,
    method: &str,
    path: &str,
    tokens: &std::collections::BTreeMap<&'static str, (String, String)>,
) -> StatusCode {
    let mut builder = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).expect("a method"))
        .uri(path);
    let user = match persona {
        Persona::Anonymous => None,
        Persona::Viewer => Some("bob"),
        Persona::Operator => Some("olga"),
        Persona::Admin => Some("alice"),
    };
    // Signing in is anonymous (with a session cookie, it would end that session).
    let user = user.filter(|_| path != "/api/auth/login");
    match (mode, user) {
        (AuthMode::Password, Some(user)) => {
            let (token, csrf) = &tokens[user];
            builder = builder
                .header("cookie", format!("streambuild_session={token}"))
                .header("x-streambuild-csrf", csrf);
        }
        (AuthMode::TrustedProxy, Some(user)) => {
            builder = builder
                .header("x-streambuild-user", user)
                .header("x-streambuild-csrf", "trusted-proxy");
        }
        _ => {}
    }
    let body = if path == "/api/auth/login" {
        Body::from(format!(r#"{{"username":"bob","password":"{PASSWORD}"}}"#))
    } else if method != "GET" {
        Body::from("{}")
    } else {
        Body::empty()
    };
    let request = builder
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("answered");
    let status = response.status();
    // A 404 for an unknown route, not an unknown entity, fails the matrix below.
    if status == StatusCode::NOT_FOUND {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if body == serde_json::json!({"detail": "Not Found"}) {
            return StatusCode::IM_A_TEAPOT;
        }
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_persona_as_its_policy_says() {
    use stb_project::access::{AccessPolicy, AccessRole, Grant, GrantScope, PERMISSIONS};
    let operator_role = AccessRole {
        name: "operator".into(),
        description: None,
        grants: vec![
            Grant {
                scope: GrantScope::Project,
                permissions: PERMISSIONS
                    .iter()
                    .filter(|(_, _, project, _)| *project)
                    .map(|(p, ..)| (*p).to_owned())
                    .collect(),
            },
            Grant {
                scope: GrantScope::Target,
                permissions: PERMISSIONS
                    .iter()
                    .filter(|(_, _, _, target)| *target)
                    .map(|(p, ..)| (*p).to_owned())
                    .collect(),
            },
            Grant {
                scope: GrantScope::Pipelines(vec!["pl__any".into()]),
                permissions: PERMISSIONS
                    .iter()
                    .filter(|(_, pipelines, ..)| *pipelines)
                    .map(|(p, ..)| (*p).to_owned())
                    .collect(),
            },
        ],
    };
    let policy = AccessPolicy {
        fingerprint: String::new(),
        roles: vec![operator_role],
    };
    for mode in [
        AuthMode::Disabled,
        AuthMode::Password,
        AuthMode::TrustedProxy,
    ] {
        let (app, store) = app_with(config(mode), Some(policy.clone())).await;
        // olga: a viewer holding the operator role here; made a proxy identity too.
        store
            .create_user(
                &NewUser {
                    username: "olga".into(),
                    display_name: None,
                    email: None,
                    source: if mode == AuthMode::TrustedProxy {
                        Source::TrustedProxy
                    } else {
                        Source::Password(PASSWORD.into())
                    },
                    roles: vec![],
                },
                None,
            )
            .await
            .expect("olga");
        let olga = store.find_user("olga").await.expect("read").expect("olga");
        store
            .grant_project_role(&olga.id, "shop", "operator", None, None)
            .await
            .expect("grant");
        // Proxy identities for the password accounts: mode trusted_proxy signs them in by name.
        let mut tokens = std::collections::BTreeMap::new();
        if mode == AuthMode::Password {
            for user in ["alice", "bob", "olga"] {
                let signed_in = login(&app, user, PASSWORD, None).await;
                let csrf = signed_in.body["csrfToken"]
                    .as_str()
                    .expect("csrf")
                    .to_owned();
                tokens.insert(user, (token_of(&signed_in), csrf));
            }
        }
        for persona in [
            Persona::Anonymous,
            Persona::Viewer,
            Persona::Operator,
            Persona::Admin,
        ] {
            if mode == AuthMode::TrustedProxy && matches!(persona, Persona::Viewer | Persona::Admin)
            {
                // alice and bob are password accounts: the proxy may never sign them in.
                continue;
            }
            for (method, path, policy) in &matrix_routes() {
                let status = status_for(&app, mode, persona, method, path, &tokens).await;

                let effective = if mode == AuthMode::Disabled {
                    Persona::Admin
                } else {
                    persona
                };
                let refused = match (policy, effective) {
                    (Policy::Public, _) => None,
                    (_, Persona::Anonymous) => Some(StatusCode::UNAUTHORIZED),
                    (Policy::Admin, Persona::Viewer | Persona::Operator) => {
                        Some(StatusCode::FORBIDDEN)
                    }
                    (Policy::Permission(_), Persona::Viewer) => Some(StatusCode::FORBIDDEN),
                    _ => None,
                };
                let context = format!("{mode:?} {persona:?} {method} {path}: {status}");
                match refused {
                    Some(expected) => assert_eq!(status, expected, "{context}"),
                    // Allowed: anything but a refusal or an unknown route (an unknown entity
                    // is fine: the ids here are made up).
                    None => assert!(
                        status != StatusCode::UNAUTHORIZED
                            && status != StatusCode::FORBIDDEN
                            && status != StatusCode::IM_A_TEAPOT
                            || (*path == "/api/auth/login"
                                && mode != AuthMode::Password
                                && status == StatusCode::IM_A_TEAPOT),
                        "{context}"
                    ),
                }
            }
        }
    }
}

#[tokio::test]
async fn admins_manage_accounts_roles_and_project_roles_through_the_api() {
    let (app, _) = app(config(AuthMode::Password)).await;
    let admin_login = login(&app, "alice", PASSWORD, None).await;
    let admin_token = token_of(&admin_login);
    let admin_csrf = admin_login.body["csrfToken"]
        .as_str()
        .expect("csrf")
        .to_owned();
    let cookie = format!("streambuild_session={admin_token}");
    let admin = [
        ("cookie", cookie.as_str()),
        ("x-streambuild-csrf", admin_csrf.as_str()),
    ];
    let send = |method: Method, path: &str, body: Option<Value>| {
        let request = request(method, path, &admin, body);
        let app = app.clone();
        async move { call(&app, request).await }
    };
    let users = send(Method::GET, "/api/admin/users", None).await;
    assert_eq!(users.status, StatusCode::OK);
    let names: Vec<&str> = users
        .body
        .as_array()
        .expect("users")
        .iter()
        .filter_map(|u| u["username"].as_str())
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(
        users.body[0]["authenticationSources"],
        serde_json::json!(["password"])
    );
    assert!(users.body[0].get("password_hash").is_none());
    // A user in exactly the reference's names (devserver.md §2.3).
    assert_eq!(
        sorted_keys(&users.body[0]),
        [
            "active",
            "authenticationSources",
            "createdAt",
            "displayName",
            "email",
            "id",
            "roles",
            "updatedAt",
            "username"
        ]
    );
    assert_eq!(users.body[0]["active"], true);
    assert!(
        users.body[0]["createdAt"]
            .as_str()
            .is_some_and(|t| t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T'),
        "{:?}",
        users.body[0]
    );
    // Create: the password policy, conflicts and shapes.
    let create = |body: Value| send(Method::POST, "/api/admin/users", Some(body));
    let short = create(serde_json::json!({"username": "carol", "authenticationSource": "password", "password": "short"})).await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    let proxy_with_password = create(serde_json::json!({"username": "carol", "authenticationSource": "trusted_proxy", "password": PASSWORD})).await;
    assert_eq!(proxy_with_password.status, StatusCode::BAD_REQUEST);
    let carol = create(serde_json::json!({"username": "Carol", "authenticationSource": "password", "password": PASSWORD})).await;
    assert_eq!(carol.status, StatusCode::OK, "{:?}", carol.body);
    let carol_id = carol.body["id"].as_str().expect("id").to_owned();
    let again = create(serde_json::json!({"username": "carol", "authenticationSource": "password", "password": PASSWORD})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    // A field the route does not know is refused, never ignored.
    let typo = create(serde_json::json!({"username": "dave", "authenticationSource": "password", "password": PASSWORD, "isActive": false})).await;
    assert_eq!(
        typo.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        typo.body
    );
    assert!(
        typo.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("isActive")),
        "{:?}",
        typo.body
    );
    // Profile and activity; the last admin stays.
    let patched = send(
        Method::PATCH,
        &format!("/api/admin/users/{carol_id}"),
        Some(serde_json::json!({"displayName": "Carol C", "active": false})),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK);
    assert_eq!(
        (
            patched.body["displayName"].as_str(),
            patched.body["active"].as_bool()
        ),
        (Some("Carol C"), Some(false))
    );
    let unknown = send(
        Method::PATCH,
        &format!("/api/admin/users/{carol_id}"),
        Some(serde_json::json!({"is_active": true})),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    let alice_id = admin_login.body["user"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let last = send(
        Method::PATCH,
        &format!("/api/admin/users/{alice_id}"),
        Some(serde_json::json!({"active": false})),
    )
    .await;
    assert_eq!(last.status, StatusCode::CONFLICT, "{:?}", last.body);
    assert_eq!(
        send(
            Method::PATCH,
            "/api/admin/users/nobody",
            Some(serde_json::json!({"active": true}))
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    // Passwords and system roles.
    let reset = send(
        Method::POST,
        &format!("/api/admin/users/{carol_id}/password"),
        Some(serde_json::json!({"password": "another long secret"})),
    )
    .await;
    assert_eq!(reset.status, StatusCode::OK);
    let granted = send(
        Method::POST,
        &format!("/api/admin/users/{carol_id}/roles"),
        Some(serde_json::json!({"role": "admin"})),
    )
    .await;
    assert_eq!(
        granted.body["roles"],
        serde_json::json!(["admin", "viewer"])
    );
    let revoked = send(
        Method::DELETE,
        &format!("/api/admin/users/{carol_id}/roles/admin"),
        None,
    )
    .await;
    assert_eq!(revoked.status, StatusCode::OK);
    assert_eq!(
        send(
            Method::DELETE,
            &format!("/api/admin/users/{carol_id}/roles/admin"),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    // Project roles, with their history.
    let assign = |body: Value| {
        send(
            Method::POST,
            &format!("/api/admin/users/{carol_id}/project-roles"),
            Some(body),
        )
    };
    let assigned =
        assign(serde_json::json!({"projectName": "shop", "role": "operator", "targetName": null}))
            .await;
    assert_eq!(assigned.status, StatusCode::OK, "{:?}", assigned.body);
    let assignment = assigned.body["assignmentId"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(assigned.body["userId"], carol_id.as_str());
    assert_eq!(assigned.body["projectName"], "shop");
    assert_eq!(assigned.body["role"], "operator");
    assert_eq!(assigned.body["targetName"], Value::Null);
    assert_eq!(assigned.body["revokedAt"], Value::Null);
    // An assignment in exactly the reference's names (devserver.md §2.3).
    assert_eq!(
        sorted_keys(&assigned.body),
        [
            "assignedAt",
            "assignedBy",
            "assignmentId",
            "projectName",
            "revokedAt",
            "revokedBy",
            "role",
            "targetName",
            "userId"
        ]
    );
    assert_eq!(
        assign(serde_json::json!({"projectName": "shop", "role": "operator"}))
            .await
            .status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        assign(serde_json::json!({"projectName": " ", "role": "operator"}))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    let listed = send(
        Method::GET,
        &format!("/api/admin/users/{carol_id}/project-roles?project=shop"),
        None,
    )
    .await;
    assert_eq!(listed.body.as_array().map(Vec::len), Some(1));
    let revoked = send(
        Method::DELETE,
        &format!("/api/admin/project-roles/{assignment}"),
        None,
    )
    .await;
    assert_eq!(revoked.status, StatusCode::OK);
    // The soft-revoked assignment itself (devserver.md §2.3).
    assert_eq!(
        revoked.body["assignmentId"],
        assignment.as_str(),
        "{:?}",
        revoked.body
    );
    assert!(revoked.body["revokedAt"].is_string(), "{:?}", revoked.body);
    let active = send(
        Method::GET,
        &format!("/api/admin/users/{carol_id}/project-roles"),
        None,
    )
    .await;
    assert_eq!(active.body.as_array().map(Vec::len), Some(0));
    let history = send(
        Method::GET,
        &format!("/api/admin/users/{carol_id}/project-roles?includeRevoked=true"),
        None,
    )
    .await;
    assert!(
        history.body[0]["revokedAt"].is_string(),
        "{:?}",
        history.body
    );
    assert_eq!(history.body[0]["revokedBy"], alice_id.as_str());
    // Every change is audited with the admin as its actor.
    let audit = send(Method::GET, "/api/admin/audit", None).await;
    let by_alice: Vec<&str> = audit
        .body
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["actorUserId"] == alice_id.as_str() && e["occurredAt"].is_string())
        .filter_map(|e| e["operation"].as_str())
        .collect();
    for operation in [
        "user.created",
        "user.profile_updated",
        "user.disabled",
        "password.reset",
        "role.granted",
        "role.revoked",
        "project_role.granted",
        "project_role.revoked",
    ] {
        assert!(by_alice.contains(&operation), "{operation} in {by_alice:?}");
    }
    // Not for viewers.
    let bob = token_of(&login(&app, "bob", PASSWORD, None).await);
    let refused = call(
        &app,
        request(
            Method::GET,
            "/api/admin/users",
            &[("cookie", &format!("streambuild_session={bob}"))],
            None,
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["detail"]["reason"], "system_admin_required");
}

/// The UI's files, straight from the binary: its routes get the app, a missing file is 404,
/// unknown API paths stay JSON 404, every answer carries the CSP.
#[tokio::test]
async fn the_web_ui_is_served_from_the_binary_with_the_app_for_its_routes() {
    assert!(
        stb_server::ui::embedded(),
        "this build carries no web UI: run scripts/build-ui.sh before building"
    );
    let (app, _) = app(config(AuthMode::Password)).await;
    let get = |path: &str| {
        let app = app.clone();
        let request = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("request");
        async move { app.oneshot(request).await.expect("answered") }
    };
    let text = |response: axum::response::Response| async move {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    for path in ["/", "/runs/abc", "/plan?select=pipeline:x"] {
        let response = get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache");
        assert!(
            response.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .is_ok_and(
                    |csp| csp.contains("script-src 'self'") && !csp.contains("unsafe-inline")
                )
        );
        let page = text(response).await;
        assert!(page.contains("<div id=\"app\">"), "{path}: {page}");
        assert!(!page.contains("<script>"), "no inline script: {page}");
    }
    let index = text(get("/").await).await;
    let script = index
        .split('"')
        .find(|part| part.starts_with("/assets/") && part.ends_with(".js"))
        .expect("the app's script")
        .to_owned();
    let response = get(&script).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/javascript"))
    );
    assert!(
        response.headers()[header::CACHE_CONTROL]
            .to_str()
            .is_ok_and(|c| c.contains("immutable"))
    );
    assert_eq!(
        get("/assets/missing.js").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(get("/../Cargo.toml").await.status(), StatusCode::NOT_FOUND);
    // The API's unknown paths are not pages; anonymous callers learn nothing of them.
    let api = get("/api/nothing-here").await;
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
}
