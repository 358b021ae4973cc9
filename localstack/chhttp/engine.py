"""Ownership of the one chDB engine this process may open, its connections and sessions."""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("chhttp.engine")

_KAFKA_ENGINE_LINE = re.compile(r"^ENGINE = Kafka\b", re.MULTILINE)
_ATTACH_PLACEHOLDER = re.compile(r"^ATTACH TABLE _ ")


class EngineError(Exception):
    """An error raised by the engine, with its ClickHouse code and name when known."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        match = re.match(r"Code: (\d+)\.", message)
        self.code = int(match.group(1)) if match else 1001
        names = re.findall(r"\(([A-Z][A-Z0-9_]+)\)", message)
        self.name = names[-1] if names else "STD_EXCEPTION"


def engine_error(error: Exception) -> EngineError:
    text = str(error)
    for prefix in ("Failed to create connection: ", "Streaming insert append failed: ", "Streaming insert finish failed: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if not text.startswith("Code: "):
        text = f"Code: 1001. DB::Exception: {text}. (STD_EXCEPTION)"
    return EngineError(text)


def drain(connection) -> None:
    """Leaves a connection clean after a failed query. A query that fails after sending
    some rows leaves them in its connection, and the engine puts them in front of the next
    query's answer there (whatever that query's format). One throwaway query takes them."""
    try:
        connection.query("SELECT 1", "TabSeparated")
    except RuntimeError as error:
        log.warning("could not drain a connection after a failed query: %s", error)


def _unescape_file_name(name: str) -> str:
    """ClickHouse escapes table names in metadata file names as %XX."""
    return urllib.parse.unquote(name)


@dataclass
class SetAsideTable:
    database: str
    table: str
    saved_at: Path


def set_aside_kafka_tables(data_dir: Path, aside_dir: Path) -> list[SetAsideTable]:
    """Move Kafka table metadata out of the data directory before the engine opens it.

    chDB cannot reopen a database that holds a Kafka table (the table's startup fails with
    `Shutdown was called` and the engine refuses to initialise). The server re-attaches the
    tables once the engine is up. Files already set aside by an earlier, interrupted start are
    picked up again so a table is never lost.
    """
    metadata = data_dir / "metadata"
    if metadata.is_dir():
        for database_dir in sorted(p for p in metadata.iterdir() if p.is_dir()):
            for sql_file in sorted(database_dir.glob("*.sql")):
                text = sql_file.read_text(errors="replace")
                if not _KAFKA_ENGINE_LINE.search(text):
                    continue
                target = aside_dir / database_dir.name / sql_file.name
                target.parent.mkdir(parents=True, exist_ok=True)
                sql_file.replace(target)
                log.info("set aside Kafka table %s.%s for re-attachment", database_dir.name, sql_file.stem)
    tables = []
    if aside_dir.is_dir():
        for database_dir in sorted(p for p in aside_dir.iterdir() if p.is_dir()):
            for sql_file in sorted(database_dir.glob("*.sql")):
                tables.append(
                    SetAsideTable(_unescape_file_name(database_dir.name), _unescape_file_name(sql_file.stem), sql_file)
                )
    return tables


def quote_identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def is_kafka_shutdown_error(error: EngineError) -> bool:
    """chDB answers every Kafka table creation with this error although the table is created."""
    return error.code == 49 and "Shutdown was called" in error.message


@dataclass
class Session:
    """A session's connection and what is known of its state, so that a request costs one
    `SET` rather than reading the settings back every time (that read is a scan of
    `system.settings`, several times the cost of a small query)."""

    session_id: str
    connection: object
    timeout_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Values the session's own SET statements gave (as system.settings shows them).
    own_settings: dict[str, str] = field(default_factory=dict)
    # URL settings of the last request, still applied: reset before the next statement
    # that does not send them again.
    scoped_settings: dict[str, str] = field(default_factory=dict)
    # The session's own current database (None: not read yet) and, when the last
    # request's `database=` parameter changed it, that one.
    own_database: str | None = None
    scoped_database: str | None = None
    last_used: float = field(default_factory=time.monotonic)


class Engine:
    def __init__(self, data_dir: Path, config_file: Path, log_file: Path | None, stream_flush_interval_ms: int):
        self.data_dir = data_dir
        params = [("config-file", str(config_file)), ("stream_flush_interval_ms", str(stream_flush_interval_ms))]
        if log_file is not None:
            params += [("logger.log", str(log_file)), ("log-level", "information")]
        self._dsn = str(data_dir) + "?" + "&".join(f"{k}={v}" for k, v in params)
        self._sessions: dict[str, Session] = {}
        self._sessions_lock = threading.Lock()
        self._chdb = None
        self._anchor = None
        self.timezone = "UTC"
        self.version = ""

    def open(self, aside_dir: Path) -> None:
        from chdb import _chdb  # imported here: the import alone costs about a second

        self._chdb = _chdb
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pending = set_aside_kafka_tables(self.data_dir, aside_dir)
        # chDB shuts the engine down when its last connection closes (Memory tables vanish,
        # Kafka consumers stop), so one connection stays open for the server's lifetime.
        self._anchor = self.connect()
        self.version = self.scalar(self._anchor, "SELECT version()")
        self.timezone = self.scalar(self._anchor, "SELECT timezone()")
        for table in pending:
            self._reattach(self._anchor, table)

    def _reattach(self, connection, table: SetAsideTable) -> None:
        text = table.saved_at.read_text()
        name = f"{quote_identifier(table.database)}.{quote_identifier(table.table)}"
        statement = _ATTACH_PLACEHOLDER.sub(f"ATTACH TABLE {name} ", text, count=1)
        try:
            connection.query(statement, "TabSeparated")
        except RuntimeError as raw:
            error = engine_error(raw)
            if not is_kafka_shutdown_error(error):
                log.error("could not re-attach Kafka table %s (kept in %s): %s", name, table.saved_at, error)
                return
        if self.table_exists(connection, table.database, table.table):
            table.saved_at.unlink()
            log.info("re-attached Kafka table %s", name)
        else:
            log.error("Kafka table %s did not come back; its definition is kept in %s", name, table.saved_at)

    def connect(self):
        try:
            return self._chdb.connect(self._dsn)
        except RuntimeError as raw:
            raise engine_error(raw) from None

    @staticmethod
    def scalar(connection, sql: str) -> str:
        return connection.query(sql, "TabSeparatedRaw").bytes().decode().strip()

    def table_exists(self, connection, database: str, table: str) -> bool:
        sql = (
            "SELECT count() FROM system.tables WHERE database = "
            f"{quote_string(database)} AND name = {quote_string(table)}"
        )
        return self.scalar(connection, sql) == "1"

    # --- sessions -------------------------------------------------------------------------

    def session(self, session_id: str, timeout_s: float, must_exist: bool) -> Session:
        with self._sessions_lock:
            self._expire_sessions_locked()
            existing = self._sessions.get(session_id)
            if existing is not None:
                existing.timeout_s = timeout_s
                return existing
            if must_exist:
                raise EngineError(
                    f"Code: 372. DB::Exception: Session {session_id} not found. (SESSION_NOT_FOUND)"
                )
            session = Session(session_id, self.connect(), timeout_s)
            self._sessions[session_id] = session
            return session

    def _expire_sessions_locked(self) -> None:
        now = time.monotonic()
        for session_id, session in list(self._sessions.items()):
            if not session.lock.locked() and now - session.last_used > session.timeout_s:
                del self._sessions[session_id]
                session.connection.close()

    def close(self) -> None:
        with self._sessions_lock:
            for session in self._sessions.values():
                session.connection.close()
            self._sessions.clear()
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None
