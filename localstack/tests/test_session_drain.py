"""A query that fails after sending some rows leaves them in its chDB connection, and the
engine hands them to the next query on that connection. A session keeps its connection
from one request to the next, so the server drains it after a failure: the next request
of the session gets its own rows only."""

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# Two rows leave before the third throws (one row per block).
_FAILS_MIDWAY = "SELECT 'leaked' AS h, throwIf(number = 2, 'boom') AS t FROM numbers(5) SETTINGS max_block_size = 1"


def _post(port: int, sql: str, session: str) -> tuple[int, bytes]:
    # Settings the client sends every time (stb tags its queries this way): nothing for
    # the session to change between the two requests.
    query = urllib.parse.urlencode({"session_id": session, "session_timeout": "60", "log_comment": "stb-run"})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/?{query}", data=sql.encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_session_query_after_a_failed_one_gets_only_its_own_rows(tmp_path):
    ready = tmp_path / "ready.json"
    localstack_dir = Path(__file__).resolve().parent.parent
    server = subprocess.Popen(
        [sys.executable, "-m", "chhttp", "--data-dir", str(tmp_path / "data"), "--port", "0", "--ready-file", str(ready)],
        cwd=localstack_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not ready.exists():
            assert server.poll() is None, "the server stopped before it was ready"
            time.sleep(0.1)
        port = json.loads(ready.read_text())["port"]
        for output_format in ("TabSeparated", "JSONEachRow"):
            status, body = _post(port, f"{_FAILS_MIDWAY} FORMAT {output_format}", "s1")
            assert status != 200 and b"boom" in body, body
            status, body = _post(port, "SELECT 42 AS answer FORMAT TabSeparated", "s1")
            assert (status, body) == (200, b"42\n"), body
    finally:
        server.terminate()
        server.wait(timeout=60)
