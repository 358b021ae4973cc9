#!/usr/bin/env bash
# How `stb plan` grows with a project: for each size (default 1,000 to 20,000 models) a
# generated project (stb-bench-generate: chains of 100 models per pipeline, joins across
# pipelines), compiled, then planned in every mode and state, each timed as a whole process:
#
#   direct   nothing built         empty database: everything is created and checked
#   direct   nothing, distinct     the same with every model's query text distinct (the
#                                  generated models repeat a few shapes, and a validation
#                                  asks about each text once)
#   direct   all built             every relation there (`stb plan`: every model rebuilt)
#   direct   built, unchanged      the same with every model's fingerprint (`--changed`)
#   direct   one changed           one model's query edited (`--changed`)
#   direct   one selected          `-s` of a model early in a chain, with its downstream
#   virtual  nothing built         empty database: everything is staged
#   virtual  deployed, cold        every model deployed and published, nothing changed,
#                                  the first plan after the deployment (nothing kept
#                                  from an earlier plan in target/.catalog_cache.json)
#   virtual  all deployed          the same, planned again (the usual case)
#   virtual  one changed           one model's query edited
#   mixed    nothing built         every other pipeline virtual (each joins the pipeline
#                                  two before it: direct and virtual do not read each other)
#
# For each it prints the wall time, peak memory, the statements the plan sent (from
# system.query_log), the ratio of the plan's time to the whole compile's (`--full`) on
# the same project timed once per size before any state, the ratio of CPU times, and
# the same project's whole compile timed again right after the plan ("compile now") with
# the plan's ratio to it: the machine's load then is the plan's (a deployed project's
# Kafka consumers share the cores with both).
# Uses the local stack (`stb local up`, started here if needed and left running).
# --no-deploy leaves out the two virtual states that need every model deployed first
# (deploying 20,000 models' relations on the local engine takes over half an hour).
# --only direct|virtual|mixed runs that mode's states alone; --keep leaves the last
# state's database (stb_bench_scale) in place to plan against again.
# --compare OTHER_STB: after each timed plan, the same plan made by another build of stb
# (an older commit's) on the same state, and its outputs compared with this build's: the
# `--json` output, the text and target/run/plan/, with what changes from one run to the
# next left out (timings, times, the plan hash; a virtual or mixed plan's new deployment
# gets the same id in both).
# Prints "outputs identical" or where they first differ.
# Usage: scripts/bench-plan.sh [--no-deploy] [--only MODE] [--keep] [--compare STB] [sizes...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deploy=1
only=""
keep=0
compare=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --no-deploy) deploy=0; shift ;;
    --only) only="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --compare) compare="$2"; shift 2 ;;
    *) break ;;
  esac
done
# want <mode>: whether the run covers that mode (all of them unless --only names one).
want() { [ -z "$only" ] || [ "$only" = "$1" ]; }
sizes=("$@")
if [ "${#sizes[@]}" -eq 0 ]; then sizes=(1000 2000 5000 10000 20000); fi
work="${TMPDIR:-/tmp}/stb-bench-plan"
database="stb_bench_scale"
# shellcheck source=scripts/bench-stack.sh
. "$repo/scripts/bench-stack.sh"
mkdir -p "$work"

reset_database() {
  sql "DROP DATABASE IF EXISTS $database SYNC" >/dev/null
  sql "CREATE DATABASE $database" >/dev/null
}

# Whole-process wall time (s), peak resident memory (MiB) and CPU time (user + system, s)
# of a command.
timed() { # command...
  local wall peak user system status=0
  /usr/bin/time -o "$work/time" -f '%e %M %U %S' "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
  read -r wall peak user system < <(tail -1 "$work/time")
  if [ "$status" -ne 0 ]; then
    echo "failed ($status): $*" >&2
    head -c 800 "$work/stdout" >&2
    tail -5 "$work/stderr" >&2
  fi
  echo "$wall $(( peak / 1024 )) $(awk "BEGIN{print $user + $system}")"
}

# Statements clients sent since `start` (the local server tags each with a log_comment;
# the benchmark's own reads are left out by their text).
count_queries() { # start
  sql "SYSTEM FLUSH LOGS" >/dev/null
  # The local server's own statements (a request's settings as one SET, a new session's
  # database) are not the client's.
  sql "SELECT count() FROM system.query_log WHERE type IN ('QueryFinish', 'ExceptionBeforeStart', 'ExceptionWhileProcessing') AND log_comment != '' AND event_time_microseconds >= toDateTime64('$1', 6) AND query NOT LIKE '%system.query_log%' AND query NOT LIKE 'SYSTEM FLUSH LOGS%' AND query NOT LIKE 'SELECT toString(now64(6))%' AND query NOT LIKE 'SET %' AND query != 'SELECT currentDatabase()'"
}

# Makes the plan with this build and with $compare, and compares what each printed and
# wrote (see --compare).
compare_plans() { # mode project [stb plan arguments...]
  local mode="$1" project="$2" side bin status
  shift 2
  # Both plan the same new deployment, so its id (and what is made from it) agrees.
  if [ "$mode" != direct ]; then set -- "$@" --deployment-id 20261201T000000Z_compar; fi
  for side in this other; do
    bin="$stb"
    if [ "$side" = other ]; then bin="$compare"; fi
    rm -rf "$work/$side"
    mkdir -p "$work/$side"
    # Exit statuses are compared as files too: a plan that fails on one side only differs.
    status=0
    "$bin" plan --json --project-dir "$project" "$@" >"$work/$side/stdout.json" 2>/dev/null || status=$?
    echo "$status" >"$work/$side/status.json"
    if [ -d "$project/target/run/plan" ]; then cp -R "$project/target/run/plan" "$work/$side/run"; fi
    status=0
    "$bin" plan --project-dir "$project" "$@" >"$work/$side/stdout.txt" 2>/dev/null || status=$?
    echo "$status" >"$work/$side/status.txt"
  done
  if [ "$(cat "$work/this/status.json" "$work/this/status.txt")" != "$(printf '0\n0')" ]; then
    echo "  this build's plan failed (exit $(cat "$work/this/status.json"), $(cat "$work/this/status.txt"))"
  fi
  python3 - "$work/this" "$work/other" <<'PY'
import os, re, sys
this, other = sys.argv[1], sys.argv[2]
varying = [
    (re.compile(r"\d{8}T\d{6}Z_[0-9a-z]{6}"), "DEPLOYMENT"),
    (re.compile(r"\(\d+ ms\)"), "(N ms)"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"), "TIME"),
    (re.compile(r'"elapsed_ms":\s*\d+'), '"elapsed_ms": N'),
    (re.compile(r'"plan_hash":\s*"[0-9a-f]+"'), '"plan_hash": H'),
]
def files(root):
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8", errors="replace").read()
            for pattern, stand_in in varying:
                text = pattern.sub(stand_in, text)
            found[os.path.relpath(path, root)] = text
    return found
a, b = files(this), files(other)
differences = sorted(set(a) ^ set(b)) + sorted(n for n in set(a) & set(b) if a[n] != b[n])
if not differences:
    print(f"  outputs identical ({len(a)} files)")
    sys.exit(0)
for name in differences[:5]:
    if name not in a or name not in b:
        print(f"  differs: {name} only in {'this build' if name in a else 'the other'}")
        continue
    left, right = a[name].splitlines(), b[name].splitlines()
    line = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), min(len(left), len(right)))
    print(f"  differs: {name} line {line + 1}:\n    this:  {left[line][:300] if line < len(left) else '(end)'}\n    other: {right[line][:300] if line < len(right) else '(end)'}")
print(f"  {len(differences)} of {len(set(a) | set(b))} files differ")
PY
}

compile_s=""
compile_cpu=""
plan() { # models mode state project [stb plan arguments...]
  local models="$1" mode="$2" state="$3" project="$4" start wall peak cpu queries now_s
  shift 4
  start="$(sql "SELECT toString(now64(6))")"
  read -r wall peak cpu < <(timed "$stb" plan --json --project-dir "$project" "$@")
  queries="$(count_queries "$start")"
  # The same project's whole compile right after the plan, under the same load: a
  # deployed project's Kafka consumers keep the engine busy on the machine's cores, and a
  # compile timed before the deployment would compare an idle machine with a busy one.
  # Its artifacts go first so it writes every file, as the size's first compile did.
  rm -rf "${project:?}/target/compiled" "$project/target/manifest.json" "$project/target/streambuild_dag.json"
  read -r now_s _ _ < <(timed "$stb" compile --full --project-dir "$project")
  # The CPU ratio is the plan's own work against the compile's: the wall ratio also holds
  # the server's time, which a deployed project's Kafka consumers compete for.
  printf 'models %6s | %-7s | %-17s | plan %7.2f s | peak %4s MiB | queries %5s | plan/compile %5.2f | cpu/compile cpu %5.2f | compile now %5.2f s | plan/compile now %5.2f\n' \
    "$models" "$mode" "$state" "$wall" "$peak" "$queries" "$(awk "BEGIN{print $wall / $compile_s}")" \
    "$(awk "BEGIN{print $cpu / $compile_cpu}")" "$now_s" "$(awk "BEGIN{print $wall / $now_s}")"
  if [ -n "$compare" ]; then compare_plans "$mode" "$project" "$@"; fi
}

# Every relation a direct build of the project creates, from its compiled statements:
# the landings, every model's table, then the views (which read tables). With
# `landings`, the landings only (what a virtual project has before its deployment).
create_relations() { # project [landings]
  python3 - "$1/target/manifest.json" "$url" "${2:-all}" <<'PY'
import json, os, sys, urllib.request
manifest, url, what = sys.argv[1], sys.argv[2], sys.argv[3]
root = os.path.dirname(manifest)
def run(path):
    sql = open(os.path.join(root, path)).read()
    urllib.request.urlopen(urllib.request.Request(url, data=sql.encode())).read()
loaded = json.load(open(manifest))
# Each landing whole (its Kafka table, landing table and view), as a first build leaves it.
for source in loaded["sources"].values():
    for resource in source["resources"]:
        run(resource["path"])
resources = [] if what == "landings" else [r for m in loaded["models"].values() for r in m["resources"]]
for resource in resources:
    if resource["kind"] == "table":
        run(resource["path"])
for resource in resources:
    if resource["kind"] != "table":
        run(resource["path"])
PY
}

for models in "${sizes[@]}"; do
  project="$work/direct-$models"
  "$CARGO_TARGET_DIR/release/stb-bench-generate" --models "$models" \
    --pipelines $(( models / 100 > 1 ? models / 100 : 2 )) --out "$project"
  printf '[targets.dev]\ndatabase = "%s"\n' "$database" > "$project/streambuild_local.toml"
  # The whole compile (`--full`): what a plan is compared with (a plan compiles every
  # model in memory; an incremental compile of an unchanged project would flatter it).
  read -r compile_s compile_peak compile_cpu < <(timed "$stb" compile --full --project-dir "$project")
  printf 'models %6s | compile %.2f s | peak %s MiB | cpu %.2f s\n' "$models" "$compile_s" "$compile_peak" "$compile_cpu"
  first_model="$(find "$project/pipelines" -name 'p0_m1.sql')"

  if want direct; then
    reset_database
    plan "$models" direct "nothing built" "$project"
    distinct="$work/distinct-$models"
    "$CARGO_TARGET_DIR/release/stb-bench-generate" --models "$models" --distinct \
      --pipelines $(( models / 100 > 1 ? models / 100 : 2 )) --out "$distinct"
    cp "$project/streambuild_local.toml" "$distinct/"
    plan "$models" direct "nothing, distinct" "$distinct"
    echo "  creating the relations of $models models ..." >&2
    create_relations "$project"
    plan "$models" direct "all built" "$project"
    "$CARGO_TARGET_DIR/release/stb-bench-deploy" "$project" --direct-baseline >/dev/null
    plan "$models" direct "built, unchanged" "$project" --changed
    cp "$first_model" "$work/saved.sql"
    printf '\n-- changed for the benchmark\n' >> "$first_model"
    plan "$models" direct "one changed" "$project" --changed
    cp "$work/saved.sql" "$first_model"
    plan "$models" direct "one selected" "$project" -s p0_m1
  fi

  if want virtual; then
    virtual="$work/virtual-$models"
    rm -rf "$virtual"
    cp -R "$project" "$virtual"
    rm -rf "$virtual/target"
    printf '[defaults]\npipeline_mode = "virtual"\n[targets.dev]\ndatabase = "%s"\n' "$database" > "$virtual/streambuild_local.toml"
    reset_database
    plan "$models" virtual "nothing built" "$virtual"
    if [ "$deploy" -eq 1 ]; then
      "$stb" compile --project-dir "$virtual" >/dev/null
      echo "  deploying $models virtual models ..." >&2
      create_relations "$virtual" landings
      "$CARGO_TARGET_DIR/release/stb-bench-deploy" "$virtual" 20261130T000000Z_bench >/dev/null
      # The first plan after the deployment reads every relation and keeps what it read
      # (target/.catalog_cache.json: tables' keys and columns, stable views' definitions);
      # the plans after it read only relations changed since.
      sleep 2
      plan "$models" virtual "deployed, cold" "$virtual"
      plan "$models" virtual "all deployed" "$virtual"
      virtual_first="$(find "$virtual/pipelines" -name 'p0_m1.sql')"
      printf '\n-- changed for the benchmark\n' >> "$virtual_first"
      plan "$models" virtual "one changed" "$virtual"
    fi
  fi

  if want mixed; then
    mixed="$work/mixed-$models"
    "$CARGO_TARGET_DIR/release/stb-bench-generate" --models "$models" --mixed \
      --pipelines $(( models / 100 > 1 ? models / 100 : 2 )) --out "$mixed"
    printf '[targets.dev]\ndatabase = "%s"\n' "$database" > "$mixed/streambuild_local.toml"
    reset_database
    plan "$models" mixed "nothing built" "$mixed"
  fi
  if [ "$keep" -eq 0 ]; then sql "DROP DATABASE IF EXISTS $database SYNC" >/dev/null; fi
done
