"""Turning one HTTP request into the parts ClickHouse's HTTP handler works with."""

from __future__ import annotations

import base64
import gzip
import hmac
import zlib
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP

import lz4.frame

from . import compression, errors

# URL parameters the HTTP layer consumes itself; every other parameter is a query setting.
HTTP_PARAMETERS = frozenset(
    {
        "query",
        "query_id",
        "database",
        "default_format",
        "session_id",
        "session_timeout",
        "session_check",
        "user",
        "password",
        "quota_key",
        "compress",
        "decompress",
        "buffer_size",
        "wait_end_of_query",
        "stacktrace",
        "role",
        "client_protocol_version",
        "default_session_timeout",
    }
)


@dataclass
class Credentials:
    user: str
    password: str


@dataclass
class ParsedRequest:
    params: dict[str, str]
    query_params: dict[str, str]  # param_<name> values, without the prefix
    settings: dict[str, str]
    text: bytes  # URL query, a newline, then the body (or the form's query field)
    credentials: Credentials
    readonly: bool
    extra_headers: dict[str, str] = field(default_factory=dict)


def parse_pairs(pairs: list[tuple[str, str]], readonly: bool, body: bytes, headers) -> ParsedRequest:
    params: dict[str, str] = {}
    for name, value in pairs:
        params[name] = value
    content_type = headers.get("Content-Type", "")
    if content_type.lower().startswith("multipart/form-data"):
        for name, value in _form_fields(content_type, body).items():
            params[name] = value
        body = b""
    query_params = {name[len("param_") :]: value for name, value in params.items() if name.startswith("param_")}
    settings = {
        name: value for name, value in params.items() if name not in HTTP_PARAMETERS and not name.startswith("param_")
    }
    url_query = params.get("query", "").encode()
    if url_query and body:
        text = url_query + b"\n" + body
    else:
        text = url_query or body
    return ParsedRequest(params, query_params, settings, text, credentials(params, headers), readonly)


def _form_fields(content_type: str, body: bytes) -> dict[str, str]:
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields = {}
    if not message.is_multipart():
        raise errors.make(36, "BAD_ARGUMENTS", "Cannot parse multipart/form-data body")
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name is None:
            continue
        payload = part.get_payload(decode=True) or b""
        fields[name] = payload.decode("utf-8", errors="replace")
    return fields


def credentials(params: dict[str, str], headers) -> Credentials:
    user = headers.get("X-ClickHouse-User")
    password = headers.get("X-ClickHouse-Key")
    authorization = headers.get("Authorization", "")
    if user is None and authorization.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(authorization[6:].strip()).decode()
        except ValueError as error:
            raise errors.make(516, "AUTHENTICATION_FAILED", "Cannot decode basic authentication header") from error
        user, _, password = decoded.partition(":")
    if user is None:
        user = params.get("user")
        password = params.get("password") if password is None else password
    return Credentials(user or "default", password or "")


def authenticate(given: Credentials, expected: Credentials) -> None:
    """Constant-time comparison of both name and password, as the real server's checks are."""
    name_ok = hmac.compare_digest(given.user.encode(), expected.user.encode())
    password_ok = hmac.compare_digest(given.password.encode(), expected.password.encode())
    if not (name_ok and password_ok):
        raise errors.make(
            516,
            "AUTHENTICATION_FAILED",
            f"{given.user}: Authentication failed: password is incorrect, or there is no user with such name",
        )


def decode_body(body: bytes, headers, params: dict[str, str]) -> bytes:
    """Undo HTTP Content-Encoding, then ClickHouse's own block compression (decompress=1)."""
    encoding = headers.get("Content-Encoding", "").strip().lower()
    try:
        if encoding in ("gzip", "x-gzip"):
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        elif encoding == "lz4":
            body = lz4.frame.decompress(body)
        elif encoding not in ("", "identity"):
            raise errors.make(73, "UNKNOWN_FORMAT", f"Unknown HTTP Content-Encoding: {encoding}")
    except (OSError, zlib.error, RuntimeError) as error:
        raise errors.make(271, "CANNOT_DECOMPRESS", f"Cannot decode request body: {error}") from error
    if params.get("decompress") == "1":
        try:
            body = compression.decompress(body)
        except compression.CompressionError as error:
            raise errors.make(40, "CHECKSUM_DOESNT_MATCH", str(error)) from error
    return body


def encode_response(body: bytes, accept_encoding: str, params: dict[str, str], settings: dict[str, str]):
    """Apply compress=1 and, when enabled, HTTP compression. Returns (body, headers)."""
    headers = {}
    if params.get("compress") == "1":
        body = compression.compress(body)
    if settings.get("enable_http_compression", "1") not in ("0", "false"):
        accepted = [item.split(";")[0].strip().lower() for item in accept_encoding.split(",") if item.strip()]
        if "lz4" in accepted:
            body = lz4.frame.compress(body)
            headers["Content-Encoding"] = "lz4"
        elif "gzip" in accepted:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        elif "deflate" in accepted:
            body = zlib.compress(body)
            headers["Content-Encoding"] = "deflate"
    return body, headers

