"""How ClickHouse's HTTP interface reports an exception: status code, body and headers."""

from __future__ import annotations

from .engine import EngineError

# The HTTP status the real server (26.x) gives each exception name; anything else is 500.
_STATUS_BY_NAME = {
    "REQUIRED_PASSWORD": 401,
    **dict.fromkeys(
        ("UNKNOWN_USER", "WRONG_PASSWORD", "AUTHENTICATION_FAILED", "SET_NON_GRANTED_ROLE", "ACCESS_DENIED"),
        403,
    ),
    **dict.fromkeys(
        (
            "BAD_ARGUMENTS",
            "CANNOT_COMPILE_REGEXP",
            "CANNOT_PARSE_TEXT",
            "CANNOT_PARSE_ESCAPE_SEQUENCE",
            "CANNOT_PARSE_QUOTED_STRING",
            "CANNOT_PARSE_DATE",
            "CANNOT_PARSE_DATETIME",
            "CANNOT_PARSE_NUMBER",
            "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING",
            "CANNOT_PARSE_IPV4",
            "CANNOT_PARSE_IPV6",
            "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
            "CANNOT_PARSE_UUID",
            "DUPLICATE_COLUMN",
            "ILLEGAL_COLUMN",
            "UNKNOWN_ELEMENT_IN_AST",
            "UNKNOWN_TYPE_OF_AST_NODE",
            "THERE_IS_NO_COLUMN",
            "TOO_DEEP_AST",
            "TOO_BIG_AST",
            "UNEXPECTED_AST_STRUCTURE",
            "SYNTAX_ERROR",
            "INCORRECT_DATA",
            "TYPE_MISMATCH",
            "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
        ),
        400,
    ),
    **dict.fromkeys(
        (
            "UNKNOWN_TABLE",
            "UNKNOWN_FUNCTION",
            "UNKNOWN_IDENTIFIER",
            "UNKNOWN_TYPE",
            "UNKNOWN_STORAGE",
            "UNKNOWN_DATABASE",
            "UNKNOWN_SETTING",
            "UNKNOWN_DIRECTION_OF_SORTING",
            "UNKNOWN_AGGREGATE_FUNCTION",
            "UNKNOWN_FORMAT",
            "UNKNOWN_DATABASE_ENGINE",
            "UNKNOWN_TYPE_OF_QUERY",
            "UNKNOWN_ROLE",
        ),
        404,
    ),
    "QUERY_IS_TOO_LARGE": 413,
    "NOT_IMPLEMENTED": 501,
    "SOCKET_TIMEOUT": 503,
    "CANNOT_OPEN_FILE": 503,
    "CANNOT_SCHEDULE_TASK": 503,
    "HTTP_LENGTH_REQUIRED": 411,
    "TIMEOUT_EXCEEDED": 408,
    "UNSUPPORTED_MEDIA_TYPE": 415,
}


def http_status(error: EngineError) -> int:
    return _STATUS_BY_NAME.get(error.name, 500)


def body(error: EngineError, version: str) -> bytes:
    message = error.message.rstrip()
    return f"{message} (version {version})\n".encode()


def make(code: int, name: str, message: str) -> EngineError:
    return EngineError(f"Code: {code}. DB::Exception: {message}. ({name})")
