#!/usr/bin/env bash
# One-model direct builds, end to end, per source kind: adopted offsets, timestamp and
# cursor tables, and managed Kafka landings in offsets and landed_at modes. For each: the
# median wall time of a rebuild, its statements, its requests to the server and where the time goes (compile, records,
# planning, statements by kind, the rest), from the build's own --events. Then the same
# one-model rebuild over a large adopted table against ClickHouse's own INSERT ... SELECT of
# the same query, both in the same run: the ratio at several sizes.
# Uses the local stack (`stb local up`, started here if needed and left running).
# Usage: scripts/bench-build.sh [rows for the one-model builds] [runs] [large sizes...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
rows="${1:-3000}"
runs="${2:-3}"
shift $(( $# > 2 ? 2 : $# ))
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(100000 2000000)
cargo build --release --locked -p stb -p stb-example-orders --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
producer="$CARGO_TARGET_DIR/release/orders-producer"
"$stb" local up >&2
eval "$("$stb" local env)"
export STREAMBUILD_CLICKHOUSE_HOST="$STB_LOCAL_CLICKHOUSE_HOST"
export STREAMBUILD_CLICKHOUSE_PORT="$STB_LOCAL_CLICKHOUSE_PORT"
unset STREAMBUILD_LIVE_STABILIZATION_SECONDS
query() { curl -sS --fail-with-body "$STB_LOCAL_CLICKHOUSE_URL/" --data-binary "$1"; }
work="${TMPDIR:-/tmp}/stb-bench-build"
rm -rf "$work"
mkdir -p "$work"

# project <dir> <database> <sources yaml> <model sql>
project() {
  mkdir -p "$1/sources" "$1/pipelines/pl__bench"
  printf 'name = "bench"\ndefault_target = "dev"\n[targets.dev]\ndatabase = "%s"\n' "$2" > "$1/streambuild_project.toml"
  printf '%s\n' "$3" > "$1/sources/source.yml"
  printf '%s\n' "$4" > "$1/pipelines/pl__bench/model.sql"
}

adopted() { # kind -> sources yaml
  local columns
  case $1 in
    offsets) columns="        _replay_partition: p
        _replay_offset: o
        _replay_timestamp: ts" ;;
    timestamp) columns="        _replay_timestamp: ts" ;;
    cursor) columns="        _replay_cursor: seq
        _replay_timestamp: ts" ;;
  esac
  printf 'sources:\n  - name: events\n    kind: stream_table\n    table_name: events\n    replay_boundary:\n      mode: %s\n      columns:\n%s\n' "$1" "$columns"
}

adopted_model='MODEL (order_by ["seq"]);
SELECT seq::UInt64 AS seq, kind::String AS kind, (amount * 2)::UInt64 AS amount
FROM __source("events")
WHERE kind != '"'"'ignored'"'"''

load_events() { # database rows
  query "DROP DATABASE IF EXISTS $1 SYNC"
  query "CREATE DATABASE $1"
  query "CREATE TABLE $1.events (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), seq UInt64, kind String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)"
  # Offsets are contiguous per partition, as Kafka's are.
  query "INSERT INTO $1.events SELECT number % 3, intDiv(number, 3), now64(3, 'UTC') - INTERVAL 1 HOUR + toIntervalMillisecond(number), number, ['a', 'b', 'ignored'][number % 3 + 1], number % 1000 FROM numbers($2)"
}

# Times `runs` rebuilds of the project in $1; prints one line with the median and where
# the time of the median run went.
measure() { # label dir
  local label=$1 dir=$2 results="$work/results-$RANDOM"
  : > "$results"
  "$stb" build --auto-approve --json --project-dir "$dir" >/dev/null  # greenfield, not timed
  for _ in $(seq "$runs"); do
    local start end since trips
    # Rebuilds come minutes apart in real use: let a landing that the previous build just
    # resumed reach its steady poll cycle, or pausing it would look free.
    sleep "${settle:-0}"
    since="$(query "SELECT now64(6)")"
    start=$(date +%s%N)
    "$stb" build --auto-approve --events --project-dir "$dir" > "$work/events.ndjson"
    end=$(date +%s%N)
    # Round trips: the requests the build sent, from the server's query log (the local
    # server runs each request's settings and database as SET and USE statements, and
    # reads a session's state back with its own queries: those are not requests).
    query "SYSTEM FLUSH LOGS" >/dev/null
    trips="$(query "SELECT count() FROM system.query_log WHERE type != 'QueryStart' AND event_time_microseconds > '$since' AND query NOT LIKE 'SET %' AND query NOT LIKE 'USE %' AND query != 'SELECT currentDatabase()' AND query NOT LIKE 'SELECT name, value FROM system.settings WHERE name IN %' AND query NOT LIKE 'SYSTEM FLUSH LOGS%'")"
    python3 - "$work/events.ndjson" "$(( (end - start) / 1000000 ))" "$trips" >> "$results" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
wall = int(sys.argv[2])
trips = int(sys.argv[3])
started = next(e for e in events if e["event"] == "run_started")["startupTimings"]
kinds = {}
count = 0
for e in events:
    if e["event"] == "statement_completed":
        count += 1
        step = e["stepId"] or ""
        kind = ("replay" if step.startswith("replay_") else "wait" if step.startswith("wait_") else
                "set aside" if step.startswith("set_aside_") else
                "capture" if step.startswith("capture_") else "pause" if step.startswith("pause_") else
                # drop_previous_ drops the old table at the end, as drop_ did at the start
                # before builds kept it aside: the same statement, moved.
                "ddl" if step.startswith(("drop_", "realize_", "prepare_", "activate_", "restore_", "recreate_", "reset_")) else "other")
        kinds[kind] = kinds.get(kind, 0) + (e.get("elapsedMs") or 0)
statements = sum(kinds.values())
# What keeping the target restorable costs: checking every statement before the build
# (part of planning) and again under the lock, reading the restore point and waiting until
# it is durable, and the swap (old tables renamed aside; dropping them at the end is the
# drop a build always made, moved).
point = next((e.get("elapsedMs") or 0 for e in events if e["event"] == "restore_point_durable"), 0)
recheck = next((e.get("elapsedMs") or 0 for e in events if e["event"] == "statements_rechecked"), 0)
safety = {"validation": started.get("validationMs") or 0, "recheck under the lock": recheck,
          "restore point": point, "swap": kinds.get("set aside", 0)}
known = started["compileMs"] + started["observabilityMs"] + started["planningMs"] + statements
print(json.dumps({"wall": wall, "trips": trips, "pause": kinds.get("pause", 0), "count": count, "compile": started["compileMs"], "records": started["observabilityMs"],
                  "planning": started["planningMs"], "kinds": kinds, "safety": safety, "rest": wall - known}))
PY
  done
  python3 - "$label" "$results" <<'PY'
import json, os, sys
label, path = sys.argv[1], sys.argv[2]
runs = sorted((json.loads(l) for l in open(path)), key=lambda r: r["wall"])
m = runs[len(runs) // 2]
kinds = " ".join(f"{k} {v}" for k, v in sorted(m["kinds"].items()))
pauses = sorted(r["pause"] for r in runs)
pause = (f" (without the pause {(m['wall'] - m['pause']) / 1000:.2f} s; pause {pauses[0]}-{pauses[-1]} ms over the runs)"
         if pauses[-1] else "")
# The restorable cost is a few requests: its own median over the runs (each part's median,
# and the sum's), not the parts of the run whose wall time was the median.
median = lambda values: sorted(values)[len(values) // 2]
safety = " ".join(f"{k} {median([r['safety'][k] for r in runs])}" for k in m["safety"])
sums = sorted(sum(r["safety"].values()) for r in runs)
restorable = median(sums)
print(f"{label:<23} median {m['wall'] / 1000:.2f} s{pause} | statements {m['count']}, round trips {m['trips']} | compile {m['compile']} ms, records {m['records']} ms, "
      f"planning {m['planning']} ms, statements [{kinds}] ms, rest (process start, confirmation, audits, final records) {m['rest']} ms | "
      f"restorable, median of the runs [{safety}] = {restorable} ms ({sums[0]}-{sums[-1]})"
      f" = {restorable / float(os.environ['round_trip_ms']):.1f} round trips of SELECT 1")
PY
}

# The floor under every request a build sends, measured now on the same server: the
# median of 50 `SELECT 1` round trips over one kept-alive connection, with the settings a
# build's requests carry. The restorable cost below is also shown in these units.
round_trip_ms="$(python3 - "$STB_LOCAL_CLICKHOUSE_HOST" "$STB_LOCAL_CLICKHOUSE_PORT" <<'PY'
import http.client, statistics, sys, time
connection = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]))
params = "send_progress_in_http_headers=1&http_headers_progress_interval_ms=100&cancel_http_readonly_queries_on_client_close=1"
times = []
for _ in range(50):
    started = time.perf_counter()
    connection.request("POST", "/?" + params, body=b"SELECT 1", headers={"X-ClickHouse-User": "default"})
    connection.getresponse().read()
    times.append((time.perf_counter() - started) * 1000)
print(f"{statistics.median(times):.1f}")
PY
)"
export round_trip_ms
echo "== a SELECT 1 round trip on this server: $round_trip_ms ms (median of 50)"
echo "== one-model rebuilds, $rows rows, median of $runs"
for kind in offsets timestamp cursor; do
  database="stb_bench_build_$kind"
  load_events "$database" "$rows" >/dev/null
  project "$work/$kind" "$database" "$(adopted "$kind")" "$adopted_model"
  measure "adopted $kind" "$work/$kind"
  query "DROP DATABASE IF EXISTS $database SYNC"
done
# Pausing a landing (DROP TABLE mv__S SYNC) waits for the Kafka engine's current block,
# whose length the source's settings decide: measured with the engine's default flush
# interval (7.5 s, the poll timeout bounding an idle block) and with a short one.
for variant in "offsets|kafka_poll_timeout_ms: \"200\"" "landed_at|kafka_poll_timeout_ms: \"200\"" \
    "offsets|kafka_flush_interval_ms: \"200\""; do
  mode="${variant%%|*}"
  setting="${variant#*|}"
  database="stb_bench_build_kafka_${mode}"
  topic="bench.build.$mode"
  query "DROP DATABASE IF EXISTS $database SYNC"
  "$producer" --brokers "$STB_LOCAL_KAFKA_BROKERS" --topic "$topic" --reset-topic --from 0 --count "$rows" >/dev/null
  project "$work/kafka_$mode" "$database" "sources:
  - name: orders
    kind: kafka
    broker_list: \"$STB_LOCAL_KAFKA_BROKERS\"
    topic: $topic
    replay_boundary: {mode: $mode}
    settings:
      $setting" 'MODEL (order_by ["event_id"]);
SELECT JSONExtractString(kafka_value, '"'"'event_id'"'"')::String AS event_id, JSONExtractUInt(kafka_value, '"'"'amount_cents'"'"')::UInt64 AS amount_cents
FROM __source("orders")'
  echo "(managed Kafka $mode: ${setting//\"/})"
  settle=5 measure "managed Kafka $mode" "$work/kafka_$mode"
  query "DROP DATABASE IF EXISTS $database SYNC"
done

echo "== a one-model rebuild over a large adopted table vs ClickHouse's own INSERT ... SELECT"
for size in "${sizes[@]}"; do
  database="stb_bench_build_large"
  load_events "$database" "$size" >/dev/null
  project "$work/large" "$database" "$(adopted offsets)" "$adopted_model"
  "$stb" build --auto-approve --json --project-dir "$work/large" >/dev/null
  query "CREATE TABLE $database.reference (seq UInt64, kind String, amount UInt64) ENGINE = MergeTree ORDER BY seq"
  best_build=""; best_ref=""; best_replay=""
  for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    "$stb" build --auto-approve --json --project-dir "$work/large" >/dev/null
    build_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    replay_ms="$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(next(o["elapsed_ms"] for o in e["statement_outcomes"] if o["step_id"].startswith("replay_")))' "$work/large/target/run/build/execution.json")"
    query "TRUNCATE TABLE $database.reference"
    start=$(date +%s%N)
    query "INSERT INTO $database.reference SELECT seq, kind, amount * 2 FROM $database.events WHERE kind != 'ignored'"
    ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ -z "$best_build" ] || [ "$build_ms" -lt "$best_build" ]; then best_build=$build_ms; fi
    if [ -z "$best_ref" ] || [ "$ref_ms" -lt "$best_ref" ]; then best_ref=$ref_ms; fi
    if [ -z "$best_replay" ] || [ "$replay_ms" -lt "$best_replay" ]; then best_replay=$replay_ms; fi
  done
  python3 -c "
import sys
size, build, replay, ref = (int(v) for v in sys.argv[1:])
print(f'rows {size:>10,} | build {build} ms end to end | replay statement {replay} ms | INSERT ... SELECT {ref} ms | '
      f'ratio end to end {ref / build:.2f}, replay statement {ref / max(replay, 1):.2f} | fixed cost outside the replay {build - replay} ms')
" "$size" "$best_build" "$best_replay" "$best_ref"
  query "DROP DATABASE IF EXISTS $database SYNC"
done
