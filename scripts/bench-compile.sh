#!/usr/bin/env bash
# Times `stb compile` on generated projects of 300, 3,000 and 10,000 models.
# Prints, per size: the compile itself (`--check`: discovery, analysis, DDL, manifest, all
# in memory), a cold compile that writes every artifact into an empty target directory,
# a warm whole recompile of the unchanged project (`--full`), the incremental recompiles
# (nothing changed; one model file edited to add an output column, which rewrites its three
# artifacts and manifest.json), and the floor: the time a minimal program (stb-bench-floor)
# needs to create the same artifact files, with the cold compile's ratio to it. Wall time
# is the best of N runs, the incremental ones also as a median; peak memory is the largest
# max RSS seen (GNU time).
# Usage: scripts/bench-compile.sh [runs-per-measure]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
runs="${1:-3}"
work="${TMPDIR:-/tmp}/stb-bench-compile"
cargo build --release --locked -p stb -p stb-bench --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
generate="$CARGO_TARGET_DIR/release/stb-bench-generate"
floor="$CARGO_TARGET_DIR/release/stb-bench-floor"

# measure <command...>: best wall seconds, peak MB and median wall seconds over $runs runs
measure() {
  local best_wall="" best_rss=0 wall rss walls=()
  for _ in $(seq "$runs"); do
    [ -n "${before:-}" ] && eval "$before"
    read -r wall rss < <( { /usr/bin/time -f '%e %M' "$@" >/dev/null; } 2>&1 | tail -1 )
    walls+=("$wall")
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
  done
  local median
  median=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  printf '%s %s %s\n' "$best_wall" "$(( best_rss / 1024 ))" "$median"
}

# Edits one model between runs: adds an output column, then takes it out again.
toggle_column() { # file
  if grep -q 'AS bench_extra,' "$1"; then
    sed -i '/AS bench_extra,/d' "$1"
  else
    sed -i "0,/^SELECT\$/s//SELECT\n  'x'::String AS bench_extra,/" "$1"
  fi
}

printf '%-7s %-9s | %-8s %-8s | %-10s %-8s | %-10s %-8s | %-14s | %-20s %-6s | %-8s %-10s\n' models pipelines "check s" "MB" "cold s" "MB" "warm full s" "MB" "no change s/med" "one edited s/median" "MB" "floor s" "cold/floor"
for models in 300 3000 10000; do
  pipelines=$(( models / 100 > 1 ? models / 100 : 2 ))
  project="$work/$models"
  "$generate" --models "$models" --pipelines "$pipelines" --out "$project"
  before=""
  read -r check_s check_mb _ < <(measure "$stb" compile --check --project-dir "$project")
  before="rm -rf '$project/target'; sync; sleep 1"
  read -r cold_s cold_mb _ < <(measure "$stb" compile --project-dir "$project")
  before=""
  "$stb" compile --project-dir "$project" >/dev/null
  read -r warm_s warm_mb _ < <(measure "$stb" compile --full --project-dir "$project")
  read -r same_s _ same_median < <(measure "$stb" compile --project-dir "$project")
  edited="$(find "$project/pipelines" -name '*.sql' | sort | sed -n "$(( models / 2 ))p")"
  before="toggle_column '$edited'"
  read -r edit_s edit_mb edit_median < <(measure "$stb" compile --project-dir "$project")
  before=""
  grep -q 'AS bench_extra,' "$edited" && toggle_column "$edited"
  # The edit must have taken the incremental path, or the figure means nothing.
  toggle_column "$edited"
  "$stb" compile --json --project-dir "$project" | grep -q '"whole_compile": null' \
    || { echo "one edited model did not compile incrementally" >&2; exit 1; }
  toggle_column "$edited"
  "$stb" compile --project-dir "$project" >/dev/null
  # The floor writes a copy of the artifact tree the compiles just made (best of N too).
  best_floor=""
  for _ in $(seq "$runs"); do
    rm -rf "$work/floor"
    sync
    sleep 1  # removing thousands of files leaves the disk busy for a moment (discard)
    read -r floor_s _ < <("$floor" "$project/target" "$work/floor")
    if [ -z "$best_floor" ] || awk "BEGIN{exit !($floor_s < $best_floor)}"; then best_floor=$floor_s; fi
  done
  rm -rf "$work/floor"
  ratio=$(awk "BEGIN{printf \"%.2f\", $cold_s / ($best_floor > 0 ? $best_floor : 0.01)}")
  printf '%-7s %-9s | %-8s %-8s | %-10s %-8s | %-10s %-8s | %-14s | %-20s %-6s | %-8s %-10s\n' "$models" "$pipelines" "$check_s" "$check_mb" "$cold_s" "$cold_mb" "$warm_s" "$warm_mb" "$same_s/$same_median" "$edit_s/$edit_median" "$edit_mb" "$best_floor" "$ratio"
done
echo "best of $runs runs; MB = peak resident memory" >&2
