#!/usr/bin/env bash
# The dev server at scale: for each size (default 2,000 and 10,000 models) a generated
# project (stb-bench-generate, as scripts/bench-plan.sh makes it), `stb dev` on the local
# stack (loopback, auth disabled, an empty database), and the answers the UI waits for,
# each timed by curl as the browser would ask:
#
#   ready              from `stb dev` starting to the first answer of /api/definitions
#                      (the server compiles the project first)
#   definitions        GET /api/definitions: what the lineage, catalog and model pages
#                      draw from (size in MiB)
#   definitions, 304   the same with the ETag the browser kept (If-None-Match)
#   plan preview       GET /api/plan: the plan of everything (nothing built)
#
# and, on the same project in the same run, `stb compile --full` and `stb plan --json` as
# whole processes, so the server's answers can be read against the commands' bounds
# (docs/performance.md). Prints the server's peak memory (VmHWM) after the requests.
# Uses the local stack (`stb local up`, started here if needed and left running).
# Usage: scripts/bench-dev.sh [sizes...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes=("$@")
if [ "${#sizes[@]}" -eq 0 ]; then sizes=(2000 10000); fi
work="${TMPDIR:-/tmp}/stb-bench-dev"
database="stb_bench_dev"
# shellcheck source=scripts/bench-stack.sh
. "$repo/scripts/bench-stack.sh"
mkdir -p "$work"

server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
finish() {
  stop_server
  sql "DROP DATABASE IF EXISTS $database SYNC" >/dev/null || true
}
trap finish EXIT

now() { date +%s.%N; }
# Whole-process wall time (s) of a command.
wall() {
  /usr/bin/time -o "$work/time" -f '%e' "$@" >/dev/null 2>"$work/stderr" || {
    echo "failed: $*" >&2
    tail -5 "$work/stderr" >&2
    exit 1
  }
  tail -1 "$work/time"
}
# curl's total time (s), HTTP status and bytes for a GET of the dev server.
get() { # path [header]
  local args=(-s -o "$work/body" -w '%{time_total} %{http_code} %{size_download}\n')
  if [ "$#" -gt 1 ]; then args+=(-H "$2"); fi
  curl "${args[@]}" "$api$1"
}
line() { # models what seconds [detail]
  printf 'models %6s | %-17s | %7.2f s%s\n' "$1" "$2" "$3" "${4:+ | $4}"
}

for models in "${sizes[@]}"; do
  project="$work/project-$models"
  rm -rf "$project"
  "$CARGO_TARGET_DIR/release/stb-bench-generate" --models "$models" \
    --pipelines $(( models / 100 > 1 ? models / 100 : 2 )) --out "$project" >/dev/null
  printf '[targets.dev]\ndatabase = "%s"\n' "$database" >"$project/streambuild_local.toml"
  sql "DROP DATABASE IF EXISTS $database SYNC" >/dev/null
  sql "CREATE DATABASE $database" >/dev/null

  line "$models" "compile --full" "$(wall "$stb" compile --full --project-dir "$project")"
  line "$models" "stb plan --json" "$(wall "$stb" plan --json --project-dir "$project")"

  started="$(now)"
  "$stb" dev --project-dir "$project" --database "$database" --vars '{}' --ui-port 0 \
    --auth-mode disabled >"$work/dev.out" 2>"$work/dev.err" &
  server_pid=$!
  api=""
  while [ -z "$api" ]; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/dev.err" >&2; exit 1; }
    api="$(sed -n 's#^ *api *\(http://[^ ]*\)/api$#\1#p' "$work/dev.out" | head -1)"
    sleep 0.05
  done
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/api/definitions")" = 200 ]; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/dev.err" >&2; exit 1; }
    sleep 0.05
  done
  line "$models" "ready" "$(awk "BEGIN{print $(now) - $started}")"

  read -r seconds status bytes < <(get /api/definitions)
  [ "$status" = 200 ] || { echo "/api/definitions answered $status" >&2; exit 1; }
  etag="$(curl -s -D - -o /dev/null "$api/api/definitions" | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p' | tr -d '\r')"
  line "$models" "definitions" "$seconds" "$(awk "BEGIN{printf \"%.1f MiB\", $bytes / 1048576}")"
  read -r seconds status _ < <(get /api/definitions "If-None-Match: $etag")
  [ "$status" = 304 ] || { echo "/api/definitions with its ETag answered $status" >&2; exit 1; }
  line "$models" "definitions, 304" "$seconds"
  read -r seconds status bytes < <(get /api/plan)
  [ "$status" = 200 ] || { echo "/api/plan answered $status: $(head -c 400 "$work/body")" >&2; exit 1; }
  line "$models" "plan preview" "$seconds" "$(awk "BEGIN{printf \"%.1f MiB\", $bytes / 1048576}")"
  printf 'models %6s | %-17s | %s\n' "$models" "server peak" \
    "$(awk '/VmHWM/ {printf "%d MiB", $2 / 1024}' "/proc/$server_pid/status")"
  stop_server
done
