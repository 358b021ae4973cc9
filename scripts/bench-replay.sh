#!/usr/bin/env bash
# Replay throughput: a direct build replays N rows of an adopted table through a model,
# against ClickHouse's own INSERT ... SELECT of the same query into a table of the same
# shape. Uses the local stack (`stb local up`, started here if needed and left running).
# Usage: scripts/bench-replay.sh [rows] [runs]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
rows="${1:-5000000}"
runs="${2:-3}"
database="stb_bench_replay"
cargo build --release --locked -p stb --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
"$stb" local up >&2
eval "$("$stb" local env)"
export STREAMBUILD_CLICKHOUSE_HOST="$STB_LOCAL_CLICKHOUSE_HOST"
export STREAMBUILD_CLICKHOUSE_PORT="$STB_LOCAL_CLICKHOUSE_PORT"
export STREAMBUILD_LIVE_STABILIZATION_SECONDS=0
query() { curl -sS --fail-with-body "$STB_LOCAL_CLICKHOUSE_URL/" --data-binary "$1"; }

project="${TMPDIR:-/tmp}/stb-bench-replay"
rm -rf "$project"
mkdir -p "$project/sources" "$project/pipelines/pl__events"
printf 'name = "bench"\ndefault_target = "dev"\n[targets.dev]\ndatabase = "%s"\n' "$database" \
  > "$project/streambuild_project.toml"
cat > "$project/sources/events.yml" <<'YML'
sources:
  - name: events
    kind: stream_table
    table_name: events
    replay_boundary:
      mode: offsets
      columns:
        _replay_partition: p
        _replay_offset: o
        _replay_timestamp: ts
YML
# The model's query as the author writes it; the reference INSERT runs the same text with
# the source table in place of __source("events").
select_list="_replay_partition::UInt32 AS _replay_partition, _replay_offset::UInt64 AS _replay_offset, _replay_timestamp::DateTime64(3, 'UTC') AS _replay_timestamp, kind::String AS kind, (amount * 2)::UInt64 AS amount"
printf 'MODEL (order_by ["_replay_partition", "_replay_offset"]);\nSELECT %s\nFROM __source("events")\nWHERE kind != '"'"'ignored'"'"'\n' \
  "$select_list" > "$project/pipelines/pl__events/clean.sql"

echo "loading $rows rows into $database.events ..." >&2
query "DROP DATABASE IF EXISTS $database SYNC"
query "CREATE DATABASE $database"
query "CREATE TABLE $database.events (p UInt32, o UInt64, ts DateTime64(3, 'UTC'), kind String, amount UInt64) ENGINE = MergeTree ORDER BY (p, o)"
query "INSERT INTO $database.events SELECT number % 3, intDiv(number, 3), toDateTime64('2026-11-01 00:00:00', 3, 'UTC') + number, ['a', 'b', 'ignored'][number % 3 + 1], number % 1000 FROM numbers($rows)"
query "CREATE TABLE $database.reference (_replay_partition UInt32, _replay_offset UInt64, _replay_timestamp DateTime64(3, 'UTC'), kind String, amount UInt64) ENGINE = MergeTree ORDER BY (_replay_partition, _replay_offset)"
reference_sql="INSERT INTO $database.reference SELECT $select_list FROM (SELECT *, p AS _replay_partition, o AS _replay_offset, ts AS _replay_timestamp FROM $database.events) WHERE kind != 'ignored'"

best_stb=""; best_ref=""; written=0
for _ in $(seq "$runs"); do
  "$stb" build --auto-approve --json --project-dir "$project" >/dev/null
  replay_ms="$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(next(o["elapsed_ms"] for o in e["statement_outcomes"] if o["step_id"].startswith("replay_")))' "$project/target/run/build/execution.json")"
  written="$(query "SELECT count() FROM $database.tbl__clean")"
  query "TRUNCATE TABLE $database.reference"
  start=$(date +%s%N)
  query "$reference_sql"
  ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ -z "$best_stb" ] || [ "$replay_ms" -lt "$best_stb" ]; then best_stb=$replay_ms; fi
  if [ -z "$best_ref" ] || [ "$ref_ms" -lt "$best_ref" ]; then best_ref=$ref_ms; fi
done
python3 - "$rows" "$written" "$best_stb" "$best_ref" <<'PY'
import sys
rows, written, stb_ms, ref_ms = (int(v) for v in sys.argv[1:])
stb_rate = written / (stb_ms / 1000)
ref_rate = written / (ref_ms / 1000)
print(f"source rows {rows} | replayed rows {written} | stb replay {stb_ms} ms ({stb_rate:,.0f} rows/s) | "
      f"INSERT ... SELECT {ref_ms} ms ({ref_rate:,.0f} rows/s) | ratio {stb_rate / ref_rate:.2f}")
PY
query "DROP DATABASE IF EXISTS $database SYNC"
