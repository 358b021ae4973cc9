"""Entry point: `python -m chhttp --data-dir DIR --port N`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

from . import config
from .engine import Engine, EngineError
from .request import Credentials
from .server import Server

PASSWORD_ENV = "STB_LOCAL_CLICKHOUSE_PASSWORD"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chhttp", description=__doc__)
    parser.add_argument("--data-dir", required=True, type=Path, help="engine data directory (one server per directory)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8123, help="HTTP port; 0 picks a free port")
    parser.add_argument("--user", default="default", help="the user clients must authenticate as")
    parser.add_argument("--ready-file", type=Path, help="written with {port, pid} once the server accepts queries")
    parser.add_argument("--engine-log", type=Path, help="engine log file (information level)")
    parser.add_argument("--stream-flush-interval-ms", type=int, default=500, help="how often Kafka tables flush to views")
    parser.add_argument(
        "--system-logs",
        choices=sorted(config.SYSTEM_LOGS),
        default="all",
        help="which system logs the engine keeps (query_log, part_log, query_views_log)",
    )
    parser.add_argument(
        "--exit-with-pid",
        type=int,
        help="stop when this process is gone (a scratch server must not outlive the stb that started it)",
    )
    parser.add_argument(
        "--remove-on-exit",
        type=Path,
        help="a directory to delete once the server has stopped (a scratch server's whole state)",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    log = logging.getLogger("chhttp")
    data_dir = args.data_dir.resolve()
    state_dir = data_dir.parent
    config_file = config.write(state_dir / "clickhouse-config.xml", args.system_logs)
    engine = Engine(data_dir, config_file, args.engine_log, args.stream_flush_interval_ms)
    try:
        engine.open(state_dir / "kafka-set-aside")
    except EngineError as error:
        log.error("cannot open the engine in %s: %s", data_dir, error.message)
        return 1
    # The password comes from the environment so that it never shows in `ps`.
    expected = Credentials(args.user, os.environ.get(PASSWORD_ENV, ""))
    server = Server((args.host, args.port), engine, expected)
    port = server.server_address[1]
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    orphaned = threading.Event()
    if args.exit_with_pid:
        threading.Thread(target=watch_parent, args=(args.exit_with_pid, stop, log, orphaned), daemon=True).start()
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    serving.start()
    log.info("ClickHouse %s HTTP interface on http://%s:%d (data: %s)", engine.version, args.host, port, data_dir)
    if args.ready_file:
        temporary = args.ready_file.with_suffix(".tmp")
        temporary.write_text(json.dumps({"port": port, "pid": os.getpid(), "version": engine.version}))
        temporary.replace(args.ready_file)
    stop.wait()
    server.shutdown()
    server.server_close()
    engine.close()
    # Only a server whose process is gone cleans up after itself: one stopped by that
    # process leaves its directory (and log) for it to read and remove.
    if args.remove_on_exit and orphaned.is_set():
        shutil.rmtree(args.remove_on_exit, ignore_errors=True)
    return 0


def watch_parent(pid: int, stop: threading.Event, log: logging.Logger, orphaned: threading.Event | None = None) -> None:
    """Sets `stop` (and `orphaned`) once process `pid` is gone: killed, or ended without
    stopping us. When `pid` is our parent, being handed to another parent says so too,
    whatever process may reuse the number later."""
    parent = os.getppid() == pid
    while not stop.wait(1.0):
        try:
            os.kill(pid, 0)
            gone = parent and os.getppid() != pid
        except ProcessLookupError:
            gone = True
        except PermissionError:
            # Alive, only not ours to signal.
            gone = parent and os.getppid() != pid
        if gone:
            log.info("process %d is gone: shutting down", pid)
            if orphaned is not None:
                orphaned.set()
            stop.set()


if __name__ == "__main__":
    sys.exit(main())
