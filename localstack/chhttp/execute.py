"""Running one analysed statement on one engine connection, as ClickHouse would."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import errors, sqltext
from .engine import Engine, EngineError, engine_error, is_kafka_shutdown_error, quote_string
from .request import ParsedRequest

_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Statements a GET request (readonly mode 2) may run.
_READ_ONLY_KINDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "SET", "USE", "("})
# Statements a GET request may not run. Anything else is left to the engine, which reports
# a misspelt keyword as the syntax error it is.
_WRITE_KINDS = frozenset(
    {
        "INSERT", "CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME", "EXCHANGE", "OPTIMIZE", "SYSTEM",
        "KILL", "ATTACH", "DETACH", "GRANT", "REVOKE", "DELETE", "UPDATE", "UNDROP", "BACKUP", "RESTORE",
    }
)

# Output formats whose bytes are not text; query ids are never substituted inside them.
_BINARY_FORMAT_PREFIXES = ("RowBinary", "Native", "Arrow", "Parquet", "ORC", "Avro", "Protobuf", "MsgPack", "CapnProto", "BSON", "Npy")


@dataclass
class Outcome:
    body: bytes
    output_format: str
    summary: dict[str, str] = field(default_factory=dict)


def as_engine_text(latin1: str) -> str:
    """The analyser works on bytes decoded as latin-1; the engine wants the real text."""
    return latin1.encode("latin-1").decode("utf-8", errors="replace")


def statement_error(statement: sqltext.Statement, full_text: str) -> EngineError | None:
    if statement.trailing_statement_at is not None:
        position = statement.trailing_statement_at
        snippet = as_engine_text(full_text[position : position + 40])
        return errors.make(
            62,
            "SYNTAX_ERROR",
            f"Syntax error (Multi-statements are not allowed): failed at position {position + 1}: {snippet}",
        )
    return None


def check_read_only(statement: sqltext.Statement) -> None:
    if statement.kind in _WRITE_KINDS:
        raise errors.make(164, "READONLY", "Cannot execute query in readonly mode")


def settings_for(request: ParsedRequest, query_id: str) -> dict[str, str]:
    settings = dict(request.settings)
    for name in settings:
        if not _SETTING_NAME.match(name):
            raise errors.make(36, "BAD_ARGUMENTS", f"Invalid setting name '{name}'")
    # Tag the query so its id can be found in system.processes and system.query_log.
    settings.setdefault("log_comment", query_id)
    readonly = settings.pop("readonly", None)
    if readonly is not None:
        settings["readonly"] = readonly  # last: readonly=1 forbids changing later settings
    return settings


# A value for `apply_settings` that puts a setting back to its profile's default.
DEFAULT = object()


def apply_settings(connection, settings: dict[str, object]) -> None:
    """Applies every setting in one `SET` statement (one engine call, not one per name)."""
    if not settings:
        return
    assignments = ", ".join(
        f"{name} = DEFAULT" if value is DEFAULT else f"{name} = {quote_string(value)}"
        for name, value in settings.items()
    )
    _run(connection, f"SET {assignments}")


def snapshot_settings(connection, names) -> dict[str, str]:
    """Current values of `names`, so a session's own settings survive a query's overrides."""
    if not names:
        return {}
    listed = ", ".join(quote_string(name) for name in names)
    raw = _run(connection, f"SELECT name, value FROM system.settings WHERE name IN ({listed})", "TabSeparatedRaw")
    values = {}
    for line in raw.bytes().decode().splitlines():
        name, _, value = line.partition("\t")
        values[name] = value
    return values


def current_database(connection) -> str:
    return _run(connection, "SELECT currentDatabase()", "TabSeparatedRaw").bytes().decode().strip()


def use_database(connection, database: str) -> None:
    from .engine import quote_identifier

    _run(connection, f"USE {quote_identifier(database)}")


def _run(connection, sql: str, output_format: str = "TabSeparated", params=None):
    try:
        return connection.query(sql, output_format, params=params or {})
    except RuntimeError as raw:
        raise engine_error(raw) from None


def run_statement(
    engine: Engine,
    connection,
    statement: sqltext.Statement,
    full_text: str,
    full_bytes: bytes,
    request: ParsedRequest,
    default_format: str,
) -> Outcome:
    sql = as_engine_text(statement.sql)
    if statement.insert_format is not None:
        return _insert(connection, sql, statement.insert_format, full_bytes[statement.data_offset :])
    output_format = statement.output_format or default_format
    kill = sqltext.kill_query(sqltext.Statement(statement.kind, sql, None, None, None, None))
    if kill is not None:
        return _kill(connection, kill.sql, output_format)
    try:
        result = _run(connection, sqltext.correlate_query_ids(sql), default_format, request.query_params)
    except EngineError as error:
        table = sqltext.creates_kafka_table(sqltext.Statement(statement.kind, sql, None, None, None, None))
        if table is None or not is_kafka_shutdown_error(error) or not _kafka_table_exists(engine, connection, table):
            raise
        return Outcome(b"", output_format, {"written_rows": "0", "written_bytes": "0"})
    return Outcome(result.bytes(), output_format, _summary(result))


def _summary(result) -> dict[str, str]:
    # chDB's rows_read()/bytes_read() count the result; storage_* count what was read.
    return {
        "read_rows": str(result.storage_rows_read()),
        "read_bytes": str(result.storage_bytes_read()),
        "written_rows": str(result.rows_written()),
        "written_bytes": str(result.bytes_written()),
        "total_rows_to_read": str(result.storage_rows_read()),
        "result_rows": str(result.rows_read()),
        "elapsed_ns": str(int(result.elapsed() * 1e9)),
    }


def _insert(connection, sql: str, input_format: str, data: bytes) -> Outcome:
    try:
        inserter = connection.send_insert(sql, input_format)
    except RuntimeError as raw:
        raise engine_error(raw) from None
    try:
        chunk = 1 << 20
        for start in range(0, len(data), chunk):
            connection.insert_append(inserter, data[start : start + chunk])
        result = connection.insert_done(inserter)
    except RuntimeError as raw:
        try:
            connection.insert_cancel(inserter)
        except RuntimeError:
            pass  # the engine already abandoned the insert
        raise engine_error(raw) from None
    summary = {
        "read_rows": "0",
        "read_bytes": "0",
        "written_rows": str(result.rows_written()),
        "written_bytes": str(result.bytes_written()),
        "elapsed_ns": str(int(result.elapsed() * 1e9)),
    }
    return Outcome(b"", "TabSeparated", summary)


def _kill(connection, sql: str, output_format: str) -> Outcome:
    mapping_sql = f"SELECT query_id, {sqltext.PROCESSES_QUERY_ID} FROM system.processes"
    mapping = {}
    for line in _run(connection, mapping_sql, "TabSeparatedRaw").bytes().decode().splitlines():
        internal, _, external = line.partition("\t")
        if internal != external:
            mapping[internal] = external
    result = _run(connection, sql, output_format)
    body = result.bytes()
    if not output_format.startswith(_BINARY_FORMAT_PREFIXES):
        for internal, external in mapping.items():
            body = body.replace(internal.encode(), external.encode())
    return Outcome(body, output_format, _summary(result))


def _kafka_table_exists(engine: Engine, connection, written_name: str) -> bool:
    database, _, table = written_name.rpartition(".")
    return engine.table_exists(connection, database or current_database(connection), table)


def readonly_statement(statement: sqltext.Statement) -> bool:
    return statement.kind in _READ_ONLY_KINDS and statement.insert_format is None
