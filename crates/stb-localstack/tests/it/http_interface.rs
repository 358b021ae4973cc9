//! Conformance of the local server's ClickHouse HTTP interface, over raw HTTP.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use stb_test_support::{TestDatabase, execute, http, stack, unique_name, wait_for};

const VERSION: &str = "26.9.2.1";

fn get(query: &[(&str, &str)]) -> Response {
    http()
        .get(&stack().clickhouse_url)
        .query(query)
        .send()
        .expect("GET")
}

fn post(query: &[(&str, &str)], body: impl Into<reqwest::blocking::Body>) -> Response {
    http()
        .post(&stack().clickhouse_url)
        .query(query)
        .body(body)
        .send()
        .expect("POST")
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn ok_text(response: Response) -> String {
    let status = response.status();
    let body = response.text().expect("body");
    assert_eq!(status, 200, "unexpected failure: {body}");
    body
}

#[test]
fn ping_and_root_answer_ok() {
    let ping = http()
        .get(format!("{}/ping", stack().clickhouse_url))
        .send()
        .expect("ping");
    assert_eq!(ping.text().expect("body"), "Ok.\n");
    let root = http().get(&stack().clickhouse_url).send().expect("root");
    assert_eq!(root.text().expect("body"), "Ok.\n");
}

#[test]
fn version_is_the_engine_version() {
    assert_eq!(
        ok_text(get(&[("query", "SELECT version()")])),
        format!("{VERSION}\n")
    );
}

#[test]
fn query_in_url_in_body_and_split_between_them() {
    assert_eq!(ok_text(get(&[("query", "SELECT 1 + 1")])), "2\n");
    assert_eq!(ok_text(post(&[], "SELECT 2 + 2")), "4\n");
    // URL text, a newline, then the body: ClickHouse concatenates them.
    assert_eq!(ok_text(post(&[("query", "SELECT 3 +")], "3")), "6\n");
}

#[test]
fn database_parameter_sets_the_current_database() {
    let db = TestDatabase::create("dbparam");
    execute(&format!(
        "CREATE TABLE {}.t (x UInt8) ENGINE = Memory",
        db.name
    ));
    execute(&format!("INSERT INTO {}.t VALUES (7)", db.name));
    let body = ok_text(get(&[
        ("query", "SELECT currentDatabase(), x FROM t"),
        ("database", &db.name),
    ]));
    assert_eq!(body, format!("{}\t7\n", db.name));
    assert_eq!(
        ok_text(get(&[("query", "SELECT currentDatabase()")])),
        "default\n"
    );
}

#[test]
fn default_format_applies_and_a_format_clause_wins() {
    let response = get(&[
        ("query", "SELECT 1 AS a"),
        ("default_format", "JSONEachRow"),
    ]);
    assert_eq!(
        header(&response, "X-ClickHouse-Format").as_deref(),
        Some("JSONEachRow")
    );
    assert!(header(&response, "Content-Type").is_some_and(|v| v.starts_with("application/json")));
    assert_eq!(ok_text(response), "{\"a\":1}\n");
    let response = get(&[
        ("query", "SELECT 1 AS a FORMAT CSVWithNames"),
        ("default_format", "JSONEachRow"),
    ]);
    assert_eq!(
        header(&response, "X-ClickHouse-Format").as_deref(),
        Some("CSVWithNames")
    );
    assert_eq!(ok_text(response), "\"a\"\n1\n");
    assert_eq!(
        ok_text(get(&[("query", "SELECT 'x' AS s")])),
        "x\n",
        "TabSeparated by default"
    );
}

#[test]
fn query_id_is_echoed_and_generated_when_absent() {
    let id = unique_name("qid");
    let response = get(&[("query", "SELECT 1"), ("query_id", &id)]);
    assert_eq!(header(&response, "X-ClickHouse-Query-Id"), Some(id));
    let generated =
        header(&get(&[("query", "SELECT 1")]), "X-ClickHouse-Query-Id").expect("query id");
    assert_eq!(generated.len(), 36, "a UUID: {generated}");
}

#[test]
fn query_id_reaches_the_query_log() {
    let id = unique_name("logged");
    ok_text(get(&[("query", "SELECT 42"), ("query_id", &id)]));
    let found = wait_for(Duration::from_secs(20), || {
        execute("SYSTEM FLUSH LOGS");
        let sql = format!(
            "SELECT count() FROM system.query_log WHERE query_id = '{id}' AND type = 'QueryFinish'"
        );
        execute(&sql) == "1\n"
    });
    assert!(found, "query {id} not in system.query_log");
}

#[test]
fn url_settings_are_scoped_to_one_query() {
    let with = get(&[
        ("query", "SELECT getSetting('max_threads')"),
        ("max_threads", "3"),
    ]);
    assert_eq!(ok_text(with), "3\n");
    let default = ok_text(get(&[("query", "SELECT getSetting('max_threads')")]));
    assert_ne!(default, "3\n", "a setting leaked into the next request");
}

#[test]
fn url_settings_do_not_leak_into_a_session() {
    let session = unique_name("session");
    let in_session = |extra: &[(&str, &str)], sql: &str| {
        let mut query = vec![("query", sql), ("session_id", session.as_str())];
        query.extend_from_slice(extra);
        ok_text(post(&query, ""))
    };
    in_session(&[], "SET max_threads = 5");
    assert_eq!(in_session(&[], "SELECT getSetting('max_threads')"), "5\n");
    assert_eq!(
        in_session(&[("max_threads", "2")], "SELECT getSetting('max_threads')"),
        "2\n"
    );
    assert_eq!(
        in_session(&[], "SELECT getSetting('max_threads')"),
        "5\n",
        "the URL setting leaked"
    );
    // A URL setting sent along with a SET statement is still scoped to that request.
    in_session(&[("max_threads", "7")], "SET max_block_size = 1000");
    assert_eq!(
        in_session(
            &[],
            "SELECT getSetting('max_threads'), getSetting('max_block_size')"
        ),
        "5\t1000\n"
    );
    // Another session, or no session, does not see it.
    assert_ne!(
        ok_text(get(&[("query", "SELECT getSetting('max_threads')")])),
        "5\n"
    );
}

#[test]
fn a_database_parameter_is_scoped_to_its_request_in_a_session_and_use_is_not() {
    let db = TestDatabase::create("sessiondb");
    let session = unique_name("session");
    let in_session = |extra: &[(&str, &str)], sql: &str| {
        let mut query = vec![("query", sql), ("session_id", session.as_str())];
        query.extend_from_slice(extra);
        ok_text(post(&query, ""))
    };
    let current = "SELECT currentDatabase()";
    assert_eq!(
        in_session(&[("database", &db.name)], current),
        format!("{}\n", db.name)
    );
    assert_eq!(
        in_session(&[], current),
        "default\n",
        "the parameter leaked"
    );
    in_session(&[], &format!("USE {}", db.name));
    assert_eq!(in_session(&[], current), format!("{}\n", db.name));
    assert_eq!(in_session(&[("database", "system")], current), "system\n");
    assert_eq!(
        in_session(&[], current),
        format!("{}\n", db.name),
        "the session's own USE was lost"
    );
    // A setting sent twice, then left out, is back to the session's default.
    let threads = "SELECT getSetting('max_threads')";
    let default = in_session(&[], threads);
    in_session(&[("max_threads", "3")], threads);
    assert_eq!(in_session(&[("max_threads", "3")], threads), "3\n");
    assert_eq!(in_session(&[], threads), default);
}

#[test]
fn session_check_refuses_an_unknown_session() {
    let response = get(&[
        ("query", "SELECT 1"),
        ("session_id", &unique_name("none")),
        ("session_check", "1"),
    ]);
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("372")
    );
}

#[test]
fn query_parameters_in_url_and_multipart_form() {
    let body = ok_text(get(&[
        ("query", "SELECT {a:UInt8} + {b:UInt8}, {s:String}"),
        ("param_a", "40"),
        ("param_b", "2"),
        ("param_s", "x'y"),
    ]));
    assert_eq!(body, "42\tx\\'y\n");
    let form = reqwest::blocking::multipart::Form::new()
        .text("query", "SELECT {n:UInt32} * 2")
        .text("param_n", "21");
    let response = http()
        .post(&stack().clickhouse_url)
        .multipart(form)
        .send()
        .expect("multipart");
    assert_eq!(ok_text(response), "42\n");
}

#[test]
fn insert_data_in_the_body_in_several_formats() {
    let db = TestDatabase::create("insert");
    let table = format!("{}.t", db.name);
    execute(&format!(
        "CREATE TABLE {table} (id UInt32, s String) ENGINE = MergeTree ORDER BY id"
    ));
    let insert = format!("INSERT INTO {table} FORMAT TabSeparated");
    let response = post(&[("query", &insert)], "1\tone\n2\ttwo\n");
    let summary = header(&response, "X-ClickHouse-Summary").expect("summary header");
    ok_text(response);
    let summary: serde_json::Value = serde_json::from_str(&summary).expect("summary JSON");
    assert_eq!(summary["written_rows"], "2");
    // Whole statement with inline data in the body.
    ok_text(post(
        &[],
        format!("INSERT INTO {table} FORMAT JSONEachRow\n{{\"id\":3,\"s\":\"three\"}}"),
    ));
    ok_text(post(
        &[],
        format!("INSERT INTO {table} VALUES (4, 'fo;ur')"),
    ));
    ok_text(post(
        &[("query", &format!("INSERT INTO {table} VALUES"))],
        "(5, 'five')",
    ));
    let rows = execute(&format!("SELECT id, s FROM {table} ORDER BY id"));
    assert_eq!(rows, "1\tone\n2\ttwo\n3\tthree\n4\tfo;ur\n5\tfive\n");
}

#[test]
fn errors_have_the_clickhouse_shape() {
    let response = get(&[("query", "SELECT * FROM no_such_db_xyz.t")]);
    assert_eq!(
        response.status(),
        404,
        "UNKNOWN_DATABASE maps to 404 as in ClickHouse"
    );
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("81")
    );
    let body = response.text().expect("body");
    assert!(body.starts_with("Code: 81. DB::Exception: "), "{body}");
    assert!(
        body.ends_with(&format!("(UNKNOWN_DATABASE) (version {VERSION})\n")),
        "{body}"
    );

    let response = get(&[("query", "SELECT throwIf(1, 'boom')")]);
    assert_eq!(response.status(), 500);
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("395")
    );
    assert!(response.text().expect("body").contains("boom"));

    let response = get(&[("query", "SELEC 1")]);
    assert_eq!(response.status(), 400);
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("62")
    );
}

#[test]
fn multi_statements_are_refused_but_semicolons_in_text_are_not() {
    let response = post(&[], "SELECT 1; SELECT 2");
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("62")
    );
    assert!(
        response
            .text()
            .expect("body")
            .contains("Multi-statements are not allowed")
    );
    assert_eq!(
        ok_text(post(&[], "SELECT 'a;b' -- c;d\n/* e; */ ;")),
        "a;b\n"
    );
}

#[test]
fn get_requests_are_read_only() {
    let db = TestDatabase::create("readonly");
    let response = get(&[(
        "query",
        &format!("CREATE TABLE {}.t (x UInt8) ENGINE = Memory", db.name),
    )]);
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("164")
    );
    assert_eq!(execute(&format!("EXISTS TABLE {}.t", db.name)), "0\n");
}

#[test]
fn compressed_request_and_response_bodies() {
    let db = TestDatabase::create("compress");
    let table = format!("{}.t", db.name);
    execute(&format!(
        "CREATE TABLE {table} (line String) ENGINE = MergeTree ORDER BY line"
    ));
    let data: String = (0..1000).map(|i| format!("row-{i}\n")).collect();
    let insert = format!("INSERT INTO {table} FORMAT TabSeparated");
    ok_text(post(
        &[("query", &insert), ("decompress", "1")],
        crate::native_block::compress(data.as_bytes()),
    ));
    assert_eq!(execute(&format!("SELECT count() FROM {table}")), "1000\n");

    let response = get(&[
        ("query", &format!("SELECT line FROM {table} ORDER BY line")),
        ("compress", "1"),
    ]);
    let body = response.bytes().expect("body");
    let decoded = crate::native_block::decompress(&body);
    let mut expected: Vec<String> = (0..1000).map(|i| format!("row-{i}")).collect();
    expected.sort();
    assert_eq!(
        String::from_utf8(decoded).expect("utf-8"),
        expected.join("\n") + "\n"
    );

    let corrupt = {
        let mut bytes = crate::native_block::compress(b"x\n");
        bytes[0] ^= 0xff;
        bytes
    };
    let response = post(&[("query", &insert), ("decompress", "1")], corrupt);
    assert_eq!(
        header(&response, "X-ClickHouse-Exception-Code").as_deref(),
        Some("40")
    );
}

#[test]
fn summary_header_reports_reads() {
    let response = get(&[("query", "SELECT sum(number) FROM numbers(1000)")]);
    let summary: serde_json::Value =
        serde_json::from_str(&header(&response, "X-ClickHouse-Summary").expect("summary"))
            .expect("JSON");
    assert_eq!(summary["read_rows"], "1000");
    assert!(
        summary["elapsed_ns"]
            .as_str()
            .is_some_and(|v| v.parse::<u64>().is_ok())
    );
}

#[test]
fn authentication_is_checked_every_way_clickhouse_accepts() {
    let server = stb_test_support::PrivateClickHouse::start("stb_user", Some("s3cret"));
    let url = server.url();
    let client = http();
    let code = |response: Response| header(&response, "X-ClickHouse-Exception-Code");
    let anonymous = client
        .get(&url)
        .query(&[("query", "SELECT 1")])
        .send()
        .expect("request");
    assert_eq!(anonymous.status(), 403);
    assert_eq!(code(anonymous).as_deref(), Some("516"));
    let wrong = client
        .get(&url)
        .query(&[
            ("query", "SELECT 1"),
            ("user", "stb_user"),
            ("password", "nope"),
        ])
        .send()
        .expect("request");
    assert_eq!(code(wrong).as_deref(), Some("516"));
    let by_params = client
        .get(&url)
        .query(&[
            ("query", "SELECT 1"),
            ("user", "stb_user"),
            ("password", "s3cret"),
        ])
        .send()
        .expect("request");
    assert_eq!(ok_text(by_params), "1\n");
    let by_headers = client
        .get(&url)
        .query(&[("query", "SELECT 2")])
        .header("X-ClickHouse-User", "stb_user")
        .header("X-ClickHouse-Key", "s3cret")
        .send()
        .expect("request");
    assert_eq!(ok_text(by_headers), "2\n");
    let by_basic = client
        .get(&url)
        .query(&[("query", "SELECT 3")])
        .basic_auth("stb_user", Some("s3cret"))
        .send()
        .expect("request");
    assert_eq!(ok_text(by_basic), "3\n");
    let ping = client.get(format!("{url}/ping")).send().expect("ping");
    assert_eq!(
        ping.text().expect("body"),
        "Ok.\n",
        "health checks need no credentials"
    );
}

/// Runs `sql` in a background thread; returns its eventual (status, exception code, body).
fn in_background(
    client: Client,
    query: Vec<(String, String)>,
) -> std::thread::JoinHandle<(u16, Option<String>, String)> {
    std::thread::spawn(move || {
        let response = client
            .post(&stack().clickhouse_url)
            .query(&query)
            .send()
            .expect("long query");
        let status = response.status().as_u16();
        let code = header(&response, "X-ClickHouse-Exception-Code");
        (status, code, response.text().unwrap_or_default())
    })
}

fn visible_in_processes(id: &str) -> bool {
    execute(&format!(
        "SELECT count() FROM system.processes WHERE query_id = '{id}'"
    )) == "1\n"
}

#[test]
fn kill_query_by_id_cancels_a_running_query() {
    let id = unique_name("long");
    let query = vec![
        (
            "query".to_owned(),
            "SELECT sleepEachRow(0.5), number FROM numbers(120) SETTINGS max_block_size = 1"
                .to_owned(),
        ),
        ("query_id".to_owned(), id.clone()),
    ];
    let long = in_background(http(), query);
    assert!(
        wait_for(Duration::from_secs(20), || visible_in_processes(&id)),
        "{id} never showed in system.processes"
    );
    let killed = execute(&format!("KILL QUERY WHERE query_id = '{id}' SYNC"));
    assert!(
        killed.contains(&id),
        "KILL QUERY output names the query: {killed}"
    );
    let (_, code, body) = long.join().expect("thread");
    assert_eq!(code.as_deref(), Some("394"), "QUERY_WAS_CANCELLED: {body}");
    assert!(!visible_in_processes(&id));
}

#[test]
fn progress_headers_are_sent_while_a_query_runs() {
    let response = get(&[
        (
            "query",
            "SELECT sleepEachRow(0.1), number FROM numbers(8) SETTINGS max_block_size = 1",
        ),
        ("send_progress_in_http_headers", "1"),
        ("http_headers_progress_interval_ms", "100"),
    ]);
    let progress: Vec<String> = response
        .headers()
        .get_all("X-ClickHouse-Progress")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    assert!(!progress.is_empty(), "no progress headers");
    let last: serde_json::Value =
        serde_json::from_str(progress.last().expect("one")).expect("JSON");
    assert!(last["elapsed_ns"].as_str().is_some());
    assert_eq!(ok_text(response).lines().count(), 8);
}

#[test]
fn a_read_only_query_is_cancelled_when_the_client_goes_away() {
    let id = unique_name("abandoned");
    let impatient = Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .expect("client");
    let result = impatient
        .get(&stack().clickhouse_url)
        .query(&[
            (
                "query",
                "SELECT sleepEachRow(0.5), number FROM numbers(120) SETTINGS max_block_size = 1",
            ),
            ("query_id", id.as_str()),
            ("cancel_http_readonly_queries_on_client_close", "1"),
        ])
        .send();
    assert!(result.is_err(), "the client should have timed out");
    assert!(
        wait_for(Duration::from_secs(10), || !visible_in_processes(&id)),
        "{id} kept running after its client left"
    );
}
