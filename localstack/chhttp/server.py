"""The HTTP front end: ClickHouse's HTTP interface over the chDB engine."""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import errors, execute, request, sqltext
from .engine import Engine, EngineError, drain, engine_error, quote_string
from .request import Credentials

log = logging.getLogger("chhttp.server")

_CONTENT_TYPES = {
    "TabSeparated": "text/tab-separated-values; charset=UTF-8",
    "CSV": "text/csv; charset=UTF-8; header=absent",
    "CSVWithNames": "text/csv; charset=UTF-8; header=present",
}
_TICK_S = 0.05


def content_type(output_format: str) -> str:
    if output_format in _CONTENT_TYPES:
        return _CONTENT_TYPES[output_format]
    if output_format.startswith(("TabSeparated", "TSV")):
        return "text/tab-separated-values; charset=UTF-8"
    if output_format.startswith("JSON"):
        return "application/json; charset=UTF-8"
    if output_format.startswith(execute._BINARY_FORMAT_PREFIXES):
        return "application/octet-stream"
    return "text/plain; charset=UTF-8"


class Server(ThreadingHTTPServer):
    """One listening socket, one engine; each client connection gets a thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, engine: Engine, expected: Credentials):
        super().__init__(address, Handler)
        self.engine = engine
        self.expected = expected

    def progress_of(self, query_id: str) -> dict[str, str] | None:
        connection = self.engine.connect()
        try:
            raw = connection.query(_progress_sql(query_id), "TabSeparatedRaw").bytes().decode().strip()
        except RuntimeError:
            return None
        finally:
            connection.close()
        if not raw:
            return None
        names = ("read_rows", "read_bytes", "written_rows", "written_bytes", "total_rows_to_read", "elapsed_ns", "memory_usage")
        return dict(zip(names, raw.split("\t")))

    def engine_kill(self, query_id: str) -> None:
        connection = self.engine.connect()
        try:
            connection.query(
                f"KILL QUERY WHERE {sqltext.PROCESSES_QUERY_ID} = {quote_string(query_id)} ASYNC", "TabSeparated"
            )
        except RuntimeError as raw:
            log.warning("could not cancel query %s: %s", query_id, engine_error(raw))
        finally:
            connection.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ClickHouse"
    sys_version = ""
    # Headers and body go out in separate writes; with Nagle's algorithm on, the body waits
    # for the client's delayed ACK of the headers: 40 ms on every answer that has a body.
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, format, *args):  # noqa: A002 - the base class names it so
        # The default logs the request line, which can carry passwords and SQL: never log it.
        pass

    def do_GET(self):
        self._dispatch(readonly=True)

    def do_POST(self):
        self._dispatch(readonly=False)

    # --- plumbing -------------------------------------------------------------------------

    def _dispatch(self, readonly: bool) -> None:
        url = urllib.parse.urlsplit(self.path)
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        if url.path in ("/ping", "/replicas_status") or (
            url.path == "/" and not url.query and not body and readonly
        ):
            self._send(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"})
            return
        if url.path != "/":
            error = errors.make(
                1001, "STD_EXCEPTION", f"There is no handle {url.path}. Use / or /ping for health checks"
            )
            self._send(404, errors.body(error, self.server.engine.version), {"X-ClickHouse-Exception-Code": "1001"})
            return
        pairs = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        url_params = dict(pairs)
        query_id = url_params.get("query_id") or str(uuid.uuid4())
        try:
            if not self.headers.get("Content-Type", "").lower().startswith("multipart/form-data"):
                body = request.decode_body(body, self.headers, url_params)
            parsed = request.parse_pairs(pairs, readonly, body, self.headers)
            request.authenticate(parsed.credentials, self.server.expected)
            self._query(parsed, query_id)
        except EngineError as error:
            self._send_error(error, query_id)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, headers: dict[str, str], status_sent: bool = False) -> None:
        try:
            if not status_sent:
                self.send_response_only(status)
                self.send_header("Date", self.date_time_string())
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            else:
                self.send_header("Connection", "Keep-Alive")
                self.send_header("Keep-Alive", "timeout=10")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_error(self, error: EngineError, query_id: str, status_sent: bool = False) -> None:
        engine = self.server.engine
        headers = {
            "Content-Type": "text/plain; charset=UTF-8",
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": engine.timezone,
            "X-ClickHouse-Exception-Code": str(error.code),
            "X-ClickHouse-Server-Display-Name": "localhost",
        }
        self._send(errors.http_status(error), errors.body(error, engine.version), headers, status_sent)

    # --- one query ------------------------------------------------------------------------

    def _query(self, parsed: request.ParsedRequest, query_id: str) -> None:
        engine = self.server.engine
        full_text = parsed.text.decode("latin-1")
        if not full_text.strip():
            raise errors.make(62, "SYNTAX_ERROR", "Empty query")
        try:
            statement = sqltext.analyse(full_text)
        except sqltext.UnterminatedError:
            # Let the engine produce its own syntax error for the malformed text.
            statement = sqltext.Statement("", full_text, None, None, None, None)
        problem = execute.statement_error(statement, full_text)
        if problem is not None:
            raise problem
        if parsed.readonly:
            execute.check_read_only(statement)
        default_format = parsed.params.get("default_format") or "TabSeparated"
        settings = execute.settings_for(parsed, query_id)

        session_id = parsed.params.get("session_id")
        if session_id:
            timeout = float(parsed.params.get("session_timeout") or 60)
            session = engine.session(session_id, timeout, parsed.params.get("session_check") == "1")
            if not session.lock.acquire(blocking=False):
                raise errors.make(
                    373, "SESSION_IS_LOCKED", f"Session {session_id} is locked by a concurrent client"
                )
            try:
                outcome, status_sent = self._run_in_session(session, parsed, statement, full_text, settings, query_id, default_format)
            finally:
                session.last_used = time.monotonic()
                session.lock.release()
        else:
            connection = engine.connect()
            try:
                outcome, status_sent = self._run_fresh(connection, parsed, statement, full_text, settings, query_id, default_format)
            finally:
                connection.close()
        if isinstance(outcome, EngineError):
            self._send_error(outcome, query_id, status_sent)
            return
        body, encoding_headers = request.encode_response(
            outcome.body, self.headers.get("Accept-Encoding", ""), parsed.params, settings
        )
        summary = dict(outcome.summary)
        summary["result_bytes"] = str(len(outcome.body))
        headers = {
            "Content-Type": content_type(outcome.output_format),
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Format": outcome.output_format,
            "X-ClickHouse-Timezone": engine.timezone,
            "X-ClickHouse-Server-Display-Name": "localhost",
            "X-ClickHouse-Summary": json.dumps(summary, separators=(",", ":")),
            **encoding_headers,
        }
        self._send(200, body, headers, status_sent)

    def _run_fresh(self, connection, parsed, statement, full_text, settings, query_id, default_format):
        def work():
            database = parsed.params.get("database")
            if database:
                execute.use_database(connection, database)
            execute.apply_settings(connection, settings)
            return execute.run_statement(
                self.server.engine, connection, statement, full_text, parsed.text, parsed, default_format
            )

        return self._supervise(work, parsed, statement, query_id)

    def _run_in_session(self, session, parsed, statement, full_text, settings, query_id, default_format):
        connection = session.connection

        def work():
            prepare_session(connection, session, settings, parsed.params.get("database"))
            try:
                outcome = execute.run_statement(
                    self.server.engine, connection, statement, full_text, parsed.text, parsed, default_format
                )
            except (EngineError, RuntimeError):
                # The session keeps this connection for its next request.
                drain(connection)
                raise
            # What a SET or USE statement itself changes belongs to the session and stays
            # (a failed one changed nothing: the exception above skips this).
            if statement.kind == "SET":
                kept = sqltext.set_statement_names(statement)
                try:
                    session.own_settings.update(execute.snapshot_settings(connection, sorted(kept)))
                except EngineError as error:
                    log.warning("could not read session %s settings back: %s", session.session_id, error)
                for name in kept:
                    session.scoped_settings.pop(name, None)
            elif statement.kind == "USE":
                try:
                    session.own_database = execute.current_database(connection)
                except EngineError as error:
                    log.warning("could not read session %s database back: %s", session.session_id, error)
                session.scoped_database = None
            return outcome

        return self._supervise(work, parsed, statement, query_id)

    def _supervise(self, work, parsed, statement, query_id):
        """Run `work` on a worker thread while this thread streams progress headers and
        watches for the client going away. Returns (outcome or error, status_sent)."""
        box = {}

        def target():
            try:
                box["outcome"] = work()
            except EngineError as error:
                box["outcome"] = error
            except RuntimeError as raw:
                box["outcome"] = engine_error(raw)
            except Exception as unexpected:  # noqa: BLE001 - must answer the client regardless
                log.exception("unexpected failure running query %s", query_id)
                box["outcome"] = errors.make(1001, "STD_EXCEPTION", f"{type(unexpected).__name__}: {unexpected}")

        worker = threading.Thread(target=target, name=f"query-{query_id}", daemon=True)
        worker.start()
        send_progress = parsed.settings.get("send_progress_in_http_headers") in ("1", "true")
        interval_s = max(int(parsed.settings.get("http_headers_progress_interval_ms") or 100), 100) / 1000
        cancel_on_close = parsed.settings.get("cancel_http_readonly_queries_on_client_close") in ("1", "true")
        status_sent = False
        next_progress = time.monotonic() + interval_s
        cancelled = False
        while not worker.join(_TICK_S) and worker.is_alive():
            now = time.monotonic()
            if send_progress and now >= next_progress:
                status_sent = self._send_progress(query_id, status_sent)
                next_progress = now + interval_s
            if cancel_on_close and not cancelled and execute.readonly_statement(statement) and self._client_gone():
                cancelled = True
                log.info("client closed the connection; cancelling read-only query %s", query_id)
                self.server.engine_kill(query_id)
        worker.join()
        return box["outcome"], status_sent

    def _send_progress(self, query_id: str, status_sent: bool) -> bool:
        progress = self.server.progress_of(query_id)
        if progress is None:
            return status_sent
        try:
            if not status_sent:
                self.send_response_only(200)
                self.send_header("Date", self.date_time_string())
            self.send_header("X-ClickHouse-Progress", json.dumps(progress, separators=(",", ":")))
            # Push the header out now: that is what keeps a slow client's socket alive.
            self.wfile.write(b"".join(self._headers_buffer))
            self._headers_buffer = []
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        return True

    def _client_gone(self) -> bool:
        return client_gone(self.connection)


def prepare_session(connection, session, settings: dict[str, str], database: str | None) -> None:
    """Gives a session's connection this request's URL settings and database, scoped to
    the request: what the previous request's URL applied and this one does not send is put
    back (to the session's own value or the default) in the same `SET`. The state is
    known, not read back, so a request costs one engine call here, not three."""
    changes: dict[str, object] = {}
    for name in session.scoped_settings:
        if name not in settings:
            changes[name] = session.own_settings.get(name, execute.DEFAULT)
    for name, value in settings.items():
        if session.scoped_settings.get(name) != value:
            changes[name] = value
    # ClickHouse checks every value of a SET before it applies any: a refused one changes
    # nothing, so the state kept is still the connection's.
    execute.apply_settings(connection, changes)
    # A readonly setting cannot be lifted by the session afterwards: it is not put back.
    session.scoped_settings = {name: value for name, value in settings.items() if name != "readonly"}
    if session.own_database is None:
        session.own_database = execute.current_database(connection)
    wanted = database or session.own_database
    if wanted != (session.scoped_database or session.own_database):
        execute.use_database(connection, wanted)
    session.scoped_database = database if database and database != session.own_database else None


def client_gone(connection: socket.socket) -> bool:
    """True when the client closed its end. poll, not select: the embedded engine keeps
    hundreds of descriptors open (per-thread /proc files), so a socket's number can pass
    select's limit of 1024, where select raises and the request would fail."""
    try:
        poller = select.poll()
        poller.register(connection, select.POLLIN)
        if not poller.poll(0):
            return False
        return connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _progress_sql(query_id: str) -> str:
    return (
        "SELECT read_rows, read_bytes, written_rows, written_bytes, total_rows_approx, "
        "toUInt64(elapsed * 1000000000), memory_usage FROM system.processes "
        f"WHERE {sqltext.PROCESSES_QUERY_ID} = {quote_string(query_id)} LIMIT 1"
    )
