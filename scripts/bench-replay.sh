#!/usr/bin/env bash
# Replay throughput: a direct build replays N rows of an adopted table through a model,
# against ClickHouse's own INSERT ... SELECT of the same query into a table of the same
# shape; then the same build with the replay cut into chunks (`[build] replay_chunk_rows`),
# against both, once per chunk size: unless given, the smallest docs/build.md suggests
# for a landing table (5 million rows; a quarter of the rows when that is not less than
# the rows) and, below that guidance, a tenth of the rows. Each figure is the best of the
# runs, all in the same run of the script; every measurement starts once the engine has
# no merge running in the database. Uses the local stack (`stb local up`, started here if
# needed and left running).
# Usage: scripts/bench-replay.sh [rows] [runs] [chunk rows...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
rows="${1:-5000000}"
runs="${2:-3}"
shift $(( $# > 2 ? 2 : $# ))
chunk_sizes=("$@")
if [ ${#chunk_sizes[@]} -eq 0 ]; then
  guided=$(( rows > 5000000 ? 5000000 : rows / 4 ))
  chunk_sizes=("$(( guided > 0 ? guided : 1 ))" "$(( rows / 10 > 0 ? rows / 10 : 1 ))")
fi
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
# Waits until no merge runs in the database: each measurement starts on an engine that
# is not still merging the parts the previous one wrote (a set-aside table keeps merging
# until the build that set it aside drops it), so none pays for another's merges.
settle() {
  for _ in $(seq 600); do
    [ "$(query "SELECT count() FROM system.merges WHERE database = '$database'")" = 0 ] && return
    sleep 0.1
  done
  echo "merges in $database still running after 60 s" >&2
}
best_stb=""; best_ref=""; written=0
declare -A best_chunked chunk_counts
for _ in $(seq "$runs"); do
  configure
  settle
  "$stb" build --auto-approve --json --project-dir "$project" >/dev/null
  replay=$(replay_ms)
  written="$(query "SELECT count() FROM $database.tbl__clean")"
  for size in "${chunk_sizes[@]}"; do
    configure "$size"
    settle
    "$stb" build --auto-approve --events --project-dir "$project" > "$project/events.jsonl"
    chunked=$(replay_ms)
    chunk_counts[$size]=$(grep -c '"replay_chunk_completed"' "$project/events.jsonl" || true)
    chunked_written="$(query "SELECT count() FROM $database.tbl__clean")"
    if [ "$chunked_written" != "$written" ]; then
      echo "the chunked replay wrote $chunked_written rows, the single statement $written" >&2
      exit 1
    fi
    if [ -z "${best_chunked[$size]:-}" ] || [ "$chunked" -lt "${best_chunked[$size]}" ]; then
      best_chunked[$size]=$chunked
    fi
  done
  query "TRUNCATE TABLE $database.reference"
  settle
  start=$(date +%s%N)
  query "$reference_sql"
  ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ -z "$best_stb" ] || [ "$replay" -lt "$best_stb" ]; then best_stb=$replay; fi
  if [ -z "$best_ref" ] || [ "$ref_ms" -lt "$best_ref" ]; then best_ref=$ref_ms; fi
done
chunked_args=()
for size in "${chunk_sizes[@]}"; do
  chunked_args+=("$size" "${chunk_counts[$size]}" "${best_chunked[$size]}")
done
python3 - "$rows" "$written" "$best_stb" "$best_ref" "${chunked_args[@]}" <<'PY'
import sys
rows, written, stb_ms, ref_ms = (int(v) for v in sys.argv[1:5])
chunked = [int(v) for v in sys.argv[5:]]
rate = lambda ms: written / (max(ms, 1) / 1000)
print(f"source rows {rows} | replayed rows {written} | stb replay {stb_ms} ms ({rate(stb_ms):,.0f} rows/s) | "
      f"INSERT ... SELECT {ref_ms} ms ({rate(ref_ms):,.0f} rows/s) | ratio {rate(stb_ms) / rate(ref_ms):.2f}")
for chunk_rows, chunks, chunked_ms in zip(chunked[0::3], chunked[1::3], chunked[2::3]):
    print(f"chunked: {chunks} chunks of at most {chunk_rows} rows | {chunked_ms} ms ({rate(chunked_ms):,.0f} rows/s) | "
          f"chunked/single {rate(chunked_ms) / rate(stb_ms):.2f} | chunked/INSERT ... SELECT {rate(chunked_ms) / rate(ref_ms):.2f}")
PY
query "DROP DATABASE IF EXISTS $database SYNC"
