"""The engine's log stays at the information level: chDB ignores `logger.level` in its
connection string and logs every trace message (tens of megabytes a minute, and a good
share of the engine's CPU under the test suite) unless `log-level` is given."""

import subprocess
import sys
import textwrap
from pathlib import Path

from chhttp import config

# chDB runs one engine per process, so the engine opens in a child process of its own.
_OPEN_AND_QUERY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from chhttp.engine import Engine

    data, config_file, log_file, aside = (Path(p) for p in sys.argv[1:5])
    engine = Engine(data, config_file, log_file, 500)
    engine.open(aside)
    connection = engine.connect()
    engine.scalar(connection, "CREATE TABLE t (x UInt64) ENGINE = MergeTree ORDER BY x")
    engine.scalar(connection, "INSERT INTO t SELECT number FROM numbers(1000)")
    assert engine.scalar(connection, "SELECT count() FROM t") == "1000"
    """
)


def test_the_engine_logs_information_but_no_debug_or_trace(tmp_path):
    log_file = tmp_path / "engine.log"
    config_file = config.write(tmp_path / "config.xml")
    localstack_dir = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-c", _OPEN_AND_QUERY, tmp_path / "data", config_file, log_file, tmp_path / "aside"],
        cwd=localstack_dir,
        check=True,
        timeout=300,
    )
    lines = log_file.read_text(errors="replace").splitlines()
    assert any("<Information>" in line for line in lines), "the engine wrote no log at all"
    noisy = [line for line in lines if "<Trace>" in line or "<Debug>" in line]
    assert noisy == [], f"{len(noisy)} debug/trace lines, first: {noisy[0]}"
