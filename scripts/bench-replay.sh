#!/usr/bin/env bash
# Replay throughput: a direct build replays N rows of an adopted table through a model,
# against ClickHouse's own INSERT ... SELECT of the same query into a table of the same
# shape; then the same build with the replay cut into chunks (`[build] replay_chunk_rows`,
# a tenth of the rows unless given), against both. Each figure is the best of the runs,
# all in the same run of the script. Uses the local stack (`stb local up`, started here if
# needed and left running).
# Usage: scripts/bench-replay.sh [rows] [runs] [chunk rows]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
rows="${1:-5000000}"
runs="${2:-3}"
chunk_rows="${3:-$(( rows / 10 > 0 ? rows / 10 : 1 ))}"
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
# configure [chunk rows]: the project file, with replays cut into chunks when given.
configure() {
  {
    printf 'name = "bench"\ndefault_target = "dev"\n'
    if [ -n "${1:-}" ]; then printf '[build]\nreplay_chunk_rows = %s\n' "$1"; fi
    printf '[targets.dev]\ndatabase = "%s"\n' "$database"
  } > "$project/streambuild_project.toml"
}
configure
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

# The replay step's time in the last build (a chunked replay's step holds all its chunks)
# and how many chunks it ran.
replay_ms() {
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(next(o["elapsed_ms"] for o in e["statement_outcomes"] if o["step_id"].startswith("replay_")))' "$project/target/run/build/execution.json"
}
best_stb=""; best_ref=""; best_chunked=""; written=0; chunks=0
for _ in $(seq "$runs"); do
  configure
  "$stb" build --auto-approve --json --project-dir "$project" >/dev/null
  replay=$(replay_ms)
  written="$(query "SELECT count() FROM $database.tbl__clean")"
  configure "$chunk_rows"
  "$stb" build --auto-approve --events --project-dir "$project" > "$project/events.jsonl"
  chunked=$(replay_ms)
  chunks=$(grep -c '"replay_chunk_completed"' "$project/events.jsonl" || true)
  chunked_written="$(query "SELECT count() FROM $database.tbl__clean")"
  if [ "$chunked_written" != "$written" ]; then
    echo "the chunked replay wrote $chunked_written rows, the single statement $written" >&2
    exit 1
  fi
  query "TRUNCATE TABLE $database.reference"
  start=$(date +%s%N)
  query "$reference_sql"
  ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ -z "$best_stb" ] || [ "$replay" -lt "$best_stb" ]; then best_stb=$replay; fi
  if [ -z "$best_chunked" ] || [ "$chunked" -lt "$best_chunked" ]; then best_chunked=$chunked; fi
  if [ -z "$best_ref" ] || [ "$ref_ms" -lt "$best_ref" ]; then best_ref=$ref_ms; fi
done
python3 - "$rows" "$written" "$best_stb" "$best_ref" "$best_chunked" "$chunks" "$chunk_rows" <<'PY'
import sys
rows, written, stb_ms, ref_ms, chunked_ms, chunks, chunk_rows = (int(v) for v in sys.argv[1:])
rate = lambda ms: written / (max(ms, 1) / 1000)
print(f"source rows {rows} | replayed rows {written} | stb replay {stb_ms} ms ({rate(stb_ms):,.0f} rows/s) | "
      f"INSERT ... SELECT {ref_ms} ms ({rate(ref_ms):,.0f} rows/s) | ratio {rate(stb_ms) / rate(ref_ms):.2f}")
print(f"chunked: {chunks} chunks of at most {chunk_rows} rows | {chunked_ms} ms ({rate(chunked_ms):,.0f} rows/s) | "
      f"chunked/single {rate(chunked_ms) / rate(stb_ms):.2f} | chunked/INSERT ... SELECT {rate(chunked_ms) / rate(ref_ms):.2f}")
PY
query "DROP DATABASE IF EXISTS $database SYNC"
