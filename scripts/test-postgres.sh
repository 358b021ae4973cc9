#!/usr/bin/env bash
# The PostgreSQL server the control-store tests use: a private cluster on a free loopback
# port, started from Debian's postgresql binaries (installed by scripts/test.sh).
#   scripts/test-postgres.sh start   # starts it, or finds it running; prints its URL
#   scripts/test-postgres.sh stop    # stops it (only this cluster, by its data directory)
# The cluster lives in $STB_TEST_POSTGRES_DIR (default /tmp/stb-test-postgres-<uid>): the
# server runs as the postgres user when we are root, and that user cannot enter /root.
set -euo pipefail

action="${1:-start}"
dir="${STB_TEST_POSTGRES_DIR:-/tmp/stb-test-postgres-$(id -u)}"
bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "PostgreSQL server binaries not found (install Debian's postgresql package)" >&2
  exit 1
fi
as_server() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9

running() {
  [ -f "$dir/port" ] && "$bindir/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dir/port")"
}

case "$action" in
  start)
    if ! running; then
      if [ ! -f "$dir/data/PG_VERSION" ]; then
        [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
        as_server "$bindir/initdb" -D "$dir/data" -U stb --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
          || { cat "$dir/initdb.log" >&2; exit 1; }
      fi
      python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$dir/port"
      port="$(cat "$dir/port")"
      # 9>&-: the server must not inherit (and hold forever) this script's lock.
      as_server "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $dir" start >/dev/null 9>&- \
        || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    fi
    echo "postgresql://stb@127.0.0.1:$(cat "$dir/port")/postgres"
    ;;
  stop)
    if [ -f "$dir/data/PG_VERSION" ]; then
      as_server "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
