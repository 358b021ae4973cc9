#!/usr/bin/env bash
# Times `stb plan` against a warehouse that already holds every relation of a large project
# (default 2,000 models) and counts the queries the plan sends: first as direct pipelines,
# then as virtual ones with every model deployed and published (stb-bench-deploy), for an
# unchanged project and after one model's query changed. Uses the local stack
# (`stb local up`, started here if needed and left running).
# Usage: scripts/bench-plan.sh [models] [runs]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
models="${1:-2000}"
runs="${2:-3}"
work="${TMPDIR:-/tmp}/stb-bench-plan"
database="stb_bench_plan"
cargo build --release --locked -p stb -p stb-bench --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
"$stb" local up >&2
eval "$("$stb" local env)"
url="${STB_LOCAL_CLICKHOUSE_URL:?}/"
export STREAMBUILD_CLICKHOUSE_HOST="$STB_LOCAL_CLICKHOUSE_HOST"
export STREAMBUILD_CLICKHOUSE_PORT="$STB_LOCAL_CLICKHOUSE_PORT"

project="$work/$models"
rm -rf "$project"
"$CARGO_TARGET_DIR/release/stb-bench-generate" --models "$models" \
  --pipelines $(( models / 100 > 1 ? models / 100 : 2 )) --out "$project"
printf '[targets.dev]\ndatabase = "%s"\n' "$database" > "$project/streambuild_local.toml"
"$stb" compile --project-dir "$project" >/dev/null

# "Deploy" the project's relations: one table per model relation, named as the build
# would name them, with the model's columns (the plan reads names and columns only), and
# each source's landing table.
echo "creating the relations of $models models in $database ..." >&2
python3 - "$project/target/manifest.json" "$url" "$database" <<'PY'
import json, sys, urllib.request
manifest, url, database = sys.argv[1], sys.argv[2], sys.argv[3]
def run(sql):
    urllib.request.urlopen(urllib.request.Request(url, data=sql.encode())).read()
run(f"DROP DATABASE IF EXISTS {database} SYNC")
run(f"CREATE DATABASE {database}")
models = json.load(open(manifest))["models"]
for model in models.values():
    columns = ", ".join(f"`{c['name']}` {c['type']}" for c in (model.get("spec") or {}).get("columns", [])) or "x UInt8"
    for resource in model["resources"]:
        run(f"CREATE TABLE {database}.`{resource['name']}` ({columns}) ENGINE = Memory")
# The landing tables, as compiled, so the plan's shrink guard measures every replay root's
# window (its live count and the root's query over the landing) as it would on a target.
import os
root = os.path.dirname(manifest)
for source in json.load(open(manifest))["sources"].values():
    for resource in source["resources"]:
        if resource["kind"] == "table":
            run(open(os.path.join(root, resource["path"])).read())
PY

count_queries() {
  curl -s "$url" --data-binary "SYSTEM FLUSH LOGS" >/dev/null
  # Client statements carry a log_comment (the local server's query id); the server's own
  # session SETs do not. The benchmark's own statements are left out by their text.
  curl -s "$url" --data-binary "SELECT count() FROM system.query_log WHERE type = 'QueryFinish' AND log_comment != '' AND event_time_microseconds >= toDateTime64('$1', 6) AND query NOT LIKE '%system.query_log%' AND query NOT LIKE 'SYSTEM FLUSH LOGS%' AND query NOT LIKE 'SELECT toString(now64(6))%'"
}

best=""
rss=0
for _ in $(seq "$runs"); do
  start="$(curl -s "$url" --data-binary "SELECT toString(now64(6))")"
  read -r wall peak < <( { /usr/bin/time -f '%e %M' "$stb" plan --json --project-dir "$project" >/dev/null; } 2>&1 | tail -1 )
  queries="$(count_queries "$start")"
  if [ -z "$best" ] || awk "BEGIN{exit !($wall < $best)}"; then best=$wall; fi
  if [ "$peak" -gt "$rss" ]; then rss=$peak; fi
done
# The same plan writing one file per statement under target/run/plan/steps/ as well (what
# plans up to 1,000 statements do by default): the cost of the per-statement files.
best_steps=""
for _ in $(seq "$runs"); do
  wall="$( { STB_PLAN_STEP_FILES_LIMIT=1000000000 /usr/bin/time -f '%e' "$stb" plan --json --project-dir "$project" >/dev/null; } 2>&1 | tail -1 )"
  if [ -z "$best_steps" ] || awk "BEGIN{exit !($wall < $best_steps)}"; then best_steps=$wall; fi
done
files="$(find "$project/target/run/plan/steps" -type f | wc -l)"
relations="$(curl -s "$url" --data-binary "SELECT count() FROM system.tables WHERE database = '$database'")"
printf 'models %s | relations %s | plan %s s (best of %s) | peak %s MB | queries per plan %s | with %s step files %s s\n' \
  "$models" "$relations" "$best" "$runs" "$(( rss / 1024 ))" "$queries" "$files" "$best_steps"
curl -s "$url" --data-binary "DROP DATABASE IF EXISTS $database SYNC" >/dev/null

# The same project in virtual pipelines, every model deployed and published.
virtual="$work/virtual-$models"
rm -rf "$virtual"
cp -R "$project" "$virtual"
rm -rf "$virtual/target"
printf '[defaults]\npipeline_mode = "virtual"\n[targets.dev]\ndatabase = "%s"\n' "$database" > "$virtual/streambuild_local.toml"
"$stb" compile --project-dir "$virtual" >/dev/null
echo "deploying $models virtual models in $database ..." >&2
python3 - "$virtual/target/manifest.json" "$url" "$database" <<'PY'
import json, os, sys, urllib.request
manifest, url, database = sys.argv[1], sys.argv[2], sys.argv[3]
def run(sql):
    urllib.request.urlopen(urllib.request.Request(url, data=sql.encode())).read()
run(f"DROP DATABASE IF EXISTS {database} SYNC")
run(f"CREATE DATABASE {database}")
root = os.path.dirname(manifest)
for source in json.load(open(manifest))["sources"].values():
    for resource in source["resources"]:
        if resource["kind"] == "table":
            run(open(os.path.join(root, resource["path"])).read())
PY
"$CARGO_TARGET_DIR/release/stb-bench-deploy" "$virtual" 20261130T000000Z_bench >/dev/null
virtual_plan() { # label
  local best="" queries=0 start wall peak changes
  for _ in $(seq "$runs"); do
    start="$(curl -s "$url" --data-binary "SELECT toString(now64(6))")"
    read -r wall peak < <( { /usr/bin/time -f '%e %M' "$stb" plan --json --project-dir "$virtual" > "$work/virtual-plan.json"; } 2>&1 | tail -1 )
    queries="$(count_queries "$start")"
    if [ -z "$best" ] || awk "BEGIN{exit !($wall < $best)}"; then best=$wall; fi
  done
  changes="$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(sum(1 for c in p["object_changes"] if c["change_type"] != "no_op"), len(p["rebuild_subtrees"]))' "$work/virtual-plan.json")"
  printf 'virtual, %s | models %s | plan %s s (best of %s) | peak %s MB | queries per plan %s | changed objects, subtrees: %s\n' \
    "$1" "$models" "$best" "$runs" "$(( peak / 1024 ))" "$queries" "$changes"
}
virtual_plan "all deployed, nothing changed"
# One model's query changes: it and its downstream are planned as a partial deployment.
first_model="$(find "$virtual/pipelines" -name '*.sql' | sort | awk 'NR == 1')"
printf '\n-- changed for the benchmark\n' >> "$first_model"
virtual_plan "one model changed"
curl -s "$url" --data-binary "DROP DATABASE IF EXISTS $database SYNC" >/dev/null
