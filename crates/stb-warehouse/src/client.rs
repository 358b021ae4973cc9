//! Session-less HTTP requests to ClickHouse.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::ConnectionConfig;
use crate::error::WarehouseError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(300);
const KEEPALIVE: Duration = Duration::from_secs(30);
/// Progress headers at least this often keep proxies and load balancers between us and the
/// server from closing a long `INSERT ... SELECT` as idle (our own statement requests have
/// no deadline; reads stop after `READ_TIMEOUT`).
const PROGRESS_INTERVAL_MS: u64 = 120_000;
/// Read-only requests are retried this many times after a transport failure.
const READ_RETRIES: usize = 2;
/// ClickHouse's `TOO_MANY_SIMULTANEOUS_QUERIES`: a read refused for the server's limit on
/// queries running at once, not for what it asks.
const TOO_MANY_SIMULTANEOUS_QUERIES: u32 = 202;
/// How long a read refused for the server's limit waits before it is asked again (times
/// the attempt).
const BUSY_DELAY: Duration = Duration::from_millis(200);

/// A result set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    pub names: Vec<String>,
    pub types: Vec<String>,
    /// One vector per row, values as ClickHouse's JSON renders them (64-bit integers as
    /// strings).
    pub data: Vec<Vec<serde_json::Value>>,
}

impl Rows {
    /// The value of `column` in `row` as text (strings unquoted, numbers printed).
    #[must_use]
    pub fn text(&self, row: usize, column: &str) -> Option<String> {
        let index = self.names.iter().position(|n| n == column)?;
        match self.data.get(row)?.get(index)? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }
    }
}

/// What a statement reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// From the `X-ClickHouse-Summary` header, when the server sent one.
    pub written_rows: Option<u64>,
}

/// Statements longer than this carry a `max_query_size` of their own.
const LARGE_STATEMENT_BYTES: usize = 128 * 1024;

/// One connection's settings and HTTP client; cheap to share between threads.
#[derive(Debug)]
pub struct Client {
    http: reqwest::blocking::Client,
    /// For statements: no overall deadline, since an `INSERT ... SELECT` replaying a long
    /// history may run for hours and the HTTP response only starts when it ends; TCP
    /// keepalive still notices a server that went away.
    statements: reqwest::blocking::Client,
    config: ConnectionConfig,
    requests: AtomicUsize,
}

#[derive(serde::Deserialize)]
struct JsonCompact {
    meta: Vec<Meta>,
    data: Vec<Vec<serde_json::Value>>,
    #[serde(default)]
    exception: Option<String>,
}

/// The exception a server before 25.11 closes a `JSONCompact` document with when it
/// fails part-way (`http_write_exception_in_output_format`): the rows before it are not
/// all of them.
fn closing_exception(exception: Option<String>, password: &str) -> Result<(), WarehouseError> {
    match exception {
        None => Ok(()),
        Some(text) => Err(exception_in(&text, password)
            .unwrap_or_else(|| WarehouseError::from_server(None, &text, password))),
    }
}

#[derive(serde::Deserialize)]
struct Meta {
    name: String,
    #[serde(rename = "type")]
    data_type: String,
}

fn unreadable(error: serde_json::Error) -> WarehouseError {
    WarehouseError::from_server(None, &format!("unreadable result: {error}"), "")
}

impl Client {
    /// The server as messages name it: its address, without a trailing slash.
    fn server(&self) -> String {
        self.config.url().trim_end_matches('/').to_owned()
    }

    /// A request that got no answer, said as a reader needs it: which server, and the
    /// cause at the bottom of the error's chain (`Connection refused`), without the
    /// request's URL and its query string of settings.
    fn unreachable(&self, error: &reqwest::Error) -> String {
        let server = self.server();
        let mut cause: &dyn std::error::Error = error;
        while let Some(next) = cause.source() {
            cause = next;
        }
        let what = if error.is_timeout() {
            format!("ClickHouse at {server} did not answer in time")
        } else if error.is_connect() {
            format!("cannot connect to ClickHouse at {server}")
        } else {
            format!("the request to ClickHouse at {server} failed")
        };
        let cause = cause.to_string();
        if cause.contains("http://") || cause.is_empty() {
            what
        } else {
            format!("{what}: {cause}")
        }
    }
}

impl Client {
    /// # Errors
    /// The HTTP client cannot be built (no TLS or resolver available).
    pub fn new(config: ConnectionConfig) -> Result<Self, WarehouseError> {
        let build = |timeout: Option<Duration>| {
            reqwest::blocking::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(timeout)
                .tcp_keepalive(KEEPALIVE)
                .build()
                .map_err(|e| WarehouseError::transport(&e.to_string(), config.password.expose()))
        };
        let http = build(Some(READ_TIMEOUT))?;
        let statements = build(None)?;
        Ok(Self {
            http,
            statements,
            config,
            requests: AtomicUsize::new(0),
        })
    }

    /// A client for the same server with `settings` added to every request (a
    /// `session_id`, say), sharing this one's HTTP connections: no new connection pool or
    /// resolver thread is started for it.
    #[must_use]
    pub fn with_settings(&self, settings: &[(&str, String)]) -> Self {
        let mut config = self.config.clone();
        for (name, value) in settings {
            config.settings.insert((*name).to_owned(), value.clone());
        }
        Self {
            http: self.http.clone(),
            statements: self.statements.clone(),
            config,
            requests: AtomicUsize::new(0),
        }
    }

    #[must_use]
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// How many requests this client has sent (the catalog benchmark counts them).
    #[must_use]
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Runs a read-only query; retried after transport failures.
    ///
    /// # Errors
    /// The server refused it, or no answer came.
    pub fn query(&self, sql: &str) -> Result<Rows, WarehouseError> {
        let parsed: JsonCompact = self.read(sql)?;
        closing_exception(parsed.exception, self.config.password.expose())?;
        Ok(Rows {
            names: parsed.meta.iter().map(|m| m.name.clone()).collect(),
            types: parsed.meta.into_iter().map(|m| m.data_type).collect(),
            data: parsed.data,
        })
    }

    /// [`Self::query`] of a read of a relation that may not exist yet (a lifecycle table
    /// before the first build): `None` when it or its database is missing. One request,
    /// where asking whether it exists first was two.
    ///
    /// # Errors
    /// The server refused it for any other reason, or no answer came.
    pub fn query_if_exists(&self, sql: &str) -> Result<Option<Rows>, WarehouseError> {
        match self.query(sql) {
            Ok(rows) => Ok(Some(rows)),
            Err(error)
                if matches!(
                    error.kind,
                    crate::error::ErrorKind::RelationNotFound
                        | crate::error::ErrorKind::DatabaseNotFound
                ) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// [`Self::query`] with each row read straight into `T` (a tuple of the columns in
    /// the query's order: strings for text and 64-bit integers, numbers for smaller
    /// ones), never through [`Rows`]' JSON values: a large read (a 10,000-model
    /// project's catalog) then holds its answer's text and the typed rows, not a JSON
    /// value per cell besides.
    ///
    /// # Errors
    /// The server refused it, no answer came, or a row does not read as `T`.
    pub fn query_as<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
    ) -> Result<Vec<T>, WarehouseError> {
        #[derive(serde::Deserialize)]
        struct Typed<T> {
            data: Vec<T>,
            #[serde(default)]
            exception: Option<String>,
        }
        let parsed: Typed<T> = self.read(sql)?;
        closing_exception(parsed.exception, self.config.password.expose())?;
        Ok(parsed.data)
    }

    /// The `JSONCompact` answer of a read as `T`, read as it arrives (the answer's text is
    /// never held whole, nor copied into a string: a 10,000-model catalog's columns are
    /// 11 MB of it), asked again after a transport failure or the server's limit on
    /// simultaneous queries.
    fn read<T: serde::de::DeserializeOwned>(&self, sql: &str) -> Result<T, WarehouseError> {
        let body = format!(
            "{}\nFORMAT JSONCompact",
            sql.trim_end().trim_end_matches(';')
        );
        let password = self.config.password.expose();
        let server = self.server();
        let mut attempt = 0;
        loop {
            // Outer: no answer (asked again); inner: the answer, or why it does not read.
            let answer = self
                .respond(&body, None, true)
                .and_then(|response| answer_as(response, &server, password));
            match answer {
                Ok(read) => return read,
                Err(error) if error.server_code.is_none() && attempt < READ_RETRIES => {
                    attempt += 1;
                }
                // The server's limit on queries at once (a plan sends a few reads side by
                // side): asked again a moment later.
                Err(error)
                    if error.server_code == Some(TOO_MANY_SIMULTANEOUS_QUERIES)
                        && attempt < READ_RETRIES =>
                {
                    attempt += 1;
                    std::thread::sleep(BUSY_DELAY * u32::try_from(attempt).unwrap_or(1));
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Runs a statement (DDL, `INSERT ... SELECT`) once, never retried: a retry could apply
    /// it twice. `query_id` lets other processes find it in `system.processes`.
    ///
    /// # Errors
    /// The server refused it, or no answer came.
    pub fn execute(&self, sql: &str, query_id: Option<&str>) -> Result<Summary, WarehouseError> {
        let (headers, _) = self.send(sql, query_id, false)?;
        let written_rows = headers
            .get("x-clickhouse-summary")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
            .and_then(|summary| {
                summary.get("written_rows").and_then(|w| match w {
                    serde_json::Value::String(s) => s.parse().ok(),
                    other => other.as_u64(),
                })
            });
        Ok(Summary { written_rows })
    }

    fn send(
        &self,
        sql: &str,
        query_id: Option<&str>,
        read_only: bool,
    ) -> Result<(reqwest::header::HeaderMap, String), WarehouseError> {
        let response = self.respond(sql, query_id, read_only)?;
        let headers = response.headers().clone();
        let text = response.text().map_err(|e| {
            WarehouseError::transport(&self.unreachable(&e), self.config.password.expose())
        })?;
        Ok((headers, text))
    }

    /// Sends `sql` and gives the response once the server has accepted it (its body not
    /// read yet); the server's error when it refused.
    fn respond(
        &self,
        sql: &str,
        query_id: Option<&str>,
        read_only: bool,
    ) -> Result<reqwest::blocking::Response, WarehouseError> {
        let password = self.config.password.expose();
        let mut params: Vec<(String, String)> = self
            .config
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        params.push(("send_progress_in_http_headers".into(), "1".into()));
        params.push((
            "http_headers_progress_interval_ms".into(),
            PROGRESS_INTERVAL_MS.to_string(),
        ));
        params.push((
            "cancel_http_readonly_queries_on_client_close".into(),
            "1".into(),
        ));
        if !read_only {
            params.push(("wait_end_of_query".into(), "1".into()));
        }
        if let Some(database) = &self.config.database {
            params.push(("database".into(), database.clone()));
        }
        if let Some(id) = query_id {
            params.push(("query_id".into(), id.to_owned()));
        }
        if sql.len() > LARGE_STATEMENT_BYTES && !self.config.settings.contains_key("max_query_size")
        {
            // The server parses at most `max_query_size` bytes of a statement (256 KiB by
            // default): a statement naming thousands of relations (a restore point's, a
            // plan's reads at 10,000 models) would be refused as a syntax error. A limit
            // the connection's settings set is theirs to keep.
            params.push(("max_query_size".into(), (sql.len() * 2).to_string()));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        // Credentials travel in headers, never in the URL a transport error might print.
        let http = if read_only {
            &self.http
        } else {
            &self.statements
        };
        let response = http
            .post(self.config.url())
            .query(&params)
            .header("X-ClickHouse-User", &self.config.username)
            .header("X-ClickHouse-Key", password)
            .body(sql.to_owned())
            .send()
            .map_err(|e| WarehouseError::transport(&self.unreachable(&e), password))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let code = response
            .headers()
            .get("x-clickhouse-exception-code")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let text = response
            .text()
            .map_err(|e| WarehouseError::transport(&self.unreachable(&e), password))?;
        Err(WarehouseError::from_server(code, &text, password))
    }
}

/// The `JSONCompact` body of `response` as `T`, parsed as it arrives. Outer error: the
/// answer stopped arriving, or did not arrive whole within [`READ_TIMEOUT`] (the read
/// may be asked again); inner: it does not read as `T`. A server that fails after it
/// began to answer (the status already sent) ends the body with its exception, which is
/// what the error says then.
fn answer_as<T: serde::de::DeserializeOwned>(
    body: impl std::io::Read,
    server: &str,
    password: &str,
) -> Result<Result<T, WarehouseError>, WarehouseError> {
    let mut tail = Tail::new(body, std::time::Instant::now() + READ_TIMEOUT);
    let parsed = serde_json::from_reader(std::io::BufReader::with_capacity(64 * 1024, &mut tail));
    match parsed {
        Ok(value) => Ok(Ok(value)),
        Err(error) if error.is_io() => Err(WarehouseError::transport(
            &format!("the answer of ClickHouse at {server} stopped part-way: {error}"),
            password,
        )),
        Err(error) => {
            // Only a body that stops being JSON can end in the server's exception; a
            // value of another type than asked for is the reader's own mismatch.
            let cut = matches!(
                error.classify(),
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof
            );
            let exception = cut.then(|| tail.exception(password)).flatten();
            Ok(Err(exception.unwrap_or_else(|| unreadable(error))))
        }
    }
}

/// The server's exception in `text` (`Code: N. DB::...`), from its first such line, with
/// its code; `None` when there is none.
fn exception_in(text: &str, password: &str) -> Option<WarehouseError> {
    let (start, code) = text.match_indices("Code: ").find_map(|(at, marker)| {
        let rest = &text[at + marker.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let code: u32 = rest[..digits].parse().ok()?;
        rest[digits..].starts_with(". DB::").then_some((at, code))
    })?;
    let mut exception = &text[start..];
    // Servers from 25.11 wrap it: `__exception__<tag>`, the text, a line of its size and
    // tag, `<tag>__exception__`.
    if let Some(end) = exception.find("__exception__") {
        exception = exception[..end].trim_end();
        if let Some(line) = exception.rfind('\n') {
            exception = &exception[..line];
        }
    }
    Some(WarehouseError::from_server(
        Some(code),
        exception.trim(),
        password,
    ))
}

/// A reader that keeps the last bytes it gave out, where a failed answer's exception is,
/// and stops at a deadline (a body that keeps trickling in is not waited for forever).
struct Tail<R> {
    inner: R,
    last: Vec<u8>,
    deadline: std::time::Instant,
}

/// How much of an answer's end [`Tail`] keeps, and reads past a failure: a ClickHouse
/// exception without its stack trace fits.
const TAIL_BYTES: usize = 8 * 1024;

impl<R: std::io::Read> Tail<R> {
    fn new(inner: R, deadline: std::time::Instant) -> Self {
        Self {
            inner,
            last: Vec::with_capacity(2 * TAIL_BYTES),
            deadline,
        }
    }

    /// The server's exception at the end of the answer: what was read, and up to
    /// [`TAIL_BYTES`] more (the parse may stop before the exception's end).
    fn exception(&mut self, password: &str) -> Option<WarehouseError> {
        let mut rest = vec![0; TAIL_BYTES];
        let mut filled = 0;
        while filled < rest.len() {
            match std::io::Read::read(self, &mut rest[filled..]) {
                Ok(0) | Err(_) => break,
                Ok(read) => filled += read,
            }
        }
        exception_in(&String::from_utf8_lossy(&self.last), password)
    }
}

impl<R: std::io::Read> std::io::Read for Tail<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if std::time::Instant::now() > self.deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no whole answer within {} s", READ_TIMEOUT.as_secs()),
            ));
        }
        let read = self.inner.read(buffer)?;
        self.last.extend_from_slice(&buffer[..read]);
        if self.last.len() > 2 * TAIL_BYTES {
            let excess = self.last.len() - TAIL_BYTES;
            self.last.drain(..excess);
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::Client;
    use crate::{ConnectionConfig, ErrorKind};

    #[test]
    fn a_server_that_cannot_be_reached_is_named_without_the_requests_settings() {
        // A port nothing listens on: bound, then let go.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let client = Client::new(ConnectionConfig {
            port,
            ..ConnectionConfig::default()
        })
        .expect("a client");
        let error = client.query("SELECT 1").expect_err("nothing answers");
        assert_eq!(error.kind, ErrorKind::Timeout);
        assert!(
            error.message.starts_with(&format!(
                "cannot connect to ClickHouse at http://127.0.0.1:{port}"
            )),
            "{}",
            error.message
        );
        assert!(!error.message.contains('?'), "{}", error.message);
    }

    type Answer = Result<Result<Vec<(String, u8)>, crate::WarehouseError>, crate::WarehouseError>;

    fn answer(body: &[u8]) -> Answer {
        super::answer_as::<Vec<(String, u8)>>(body, "http://127.0.0.1:8123", "secret")
    }

    #[test]
    fn an_answer_is_read_as_it_arrives() {
        let rows = answer(br#"[["a", 1], ["b", 2]]"#);
        assert_eq!(
            rows.expect("arrived").expect("reads"),
            [("a".to_owned(), 1), ("b".to_owned(), 2)]
        );
    }

    #[test]
    fn an_answer_cut_by_the_servers_exception_says_the_exception() {
        // The status went out before the failure: the body ends with the exception.
        let mut body = br#"[["a", 1], ["b", "#.to_vec();
        body.extend_from_slice(&vec![b' '; 3 * super::TAIL_BYTES]);
        body.extend_from_slice(
            b"Code: 241. DB::Exception: Memory limit (total) exceeded: would use 9.00 GiB. (MEMORY_LIMIT_EXCEEDED) (version 26.9.2.1)\n",
        );
        let error = answer(&body).expect("arrived").expect_err("does not read");
        assert_eq!(error.server_code, Some(241));
        assert!(error.message.contains("Memory limit"), "{}", error.message);
    }

    #[test]
    fn the_servers_exception_is_found_whole_in_each_form_it_comes() {
        // Cut short: the parse stops before the exception's end, which is read on.
        let mut body = br#"[["a", 1], ["b", "#.to_vec();
        body.extend_from_slice(b"Code: 1000. DB::Exception: Outer. ");
        body.extend_from_slice(&vec![b'x'; 2 * super::TAIL_BYTES / 3]);
        body.extend_from_slice(b" Log: Code: 210. DB::NetException: inner (NETWORK_ERROR)\n");
        let error = answer(&body).expect("arrived").expect_err("cut");
        assert_eq!(error.server_code, Some(1000), "the first exception's code");
        assert!(error.message.contains("NETWORK_ERROR"), "read to its end");
        // Servers from 25.11 wrap it in a tagged envelope.
        let error = answer(
            b"[[\"a\", 1], __exception__ab12\r\nCode: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)\r\n71 ab12__exception__\r\n",
        )
        .expect("arrived")
        .expect_err("cut");
        assert_eq!(error.server_code, Some(241));
        assert!(
            !error.message.contains("__exception__"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("ab12"), "{}", error.message);
        // Servers before 25.11 close the document with it.
        let closed = super::closing_exception(
            Some("Code: 159. DB::Exception: Timeout exceeded. (TIMEOUT_EXCEEDED)".to_owned()),
            "secret",
        )
        .expect_err("the rows are not all of them");
        assert_eq!(closed.server_code, Some(159));
        assert_eq!(closed.kind, ErrorKind::Timeout);
        assert!(super::closing_exception(None, "secret").is_ok());
    }

    #[test]
    fn an_answer_that_does_not_read_says_so_and_is_not_asked_again() {
        // Text of the answer's own that reads like an exception is not taken for one
        // when the answer is whole JSON of another shape.
        let error = answer(br#"[["Code: 60. DB::Exception: no table", "x"]]"#)
            .expect("arrived")
            .expect_err("does not read");
        assert_eq!(error.server_code, None);
        assert!(
            error.message.starts_with("unreadable result"),
            "{}",
            error.message
        );
    }

    #[test]
    fn an_answer_that_stops_arriving_may_be_asked_again() {
        struct Broken(bool);
        impl std::io::Read for Broken {
            fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "reset",
                    ));
                }
                let start = br#"[["a", 1], "#;
                buffer[..start.len()].copy_from_slice(start);
                Ok(start.len())
            }
        }
        let error =
            super::answer_as::<Vec<(String, u8)>>(Broken(false), "http://127.0.0.1:8123", "secret")
                .expect_err("stopped arriving");
        assert_eq!(error.kind, ErrorKind::Timeout);
        assert_eq!(error.server_code, None);
    }
}
