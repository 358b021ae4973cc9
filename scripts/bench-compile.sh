#!/usr/bin/env bash
# Times `stb compile` on generated projects of 300, 3,000 and 10,000 models.
# Prints, per size: the compile itself (`--check`: discovery, analysis, DDL, manifest, all
# in memory), a cold compile that writes every artifact into an empty target directory,
# a warm recompile of the unchanged project, and the floor: the time a minimal program
# (stb-bench-floor) needs to create the same artifact files, with the cold compile's ratio
# to it. Wall time is the best of N runs; peak memory is the largest max RSS seen (GNU time).
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

# measure <label> <command...>: best wall seconds and peak MB over $runs runs
measure() {
  local best_wall="" best_rss=0 wall rss
  for _ in $(seq "$runs"); do
    [ -n "${before:-}" ] && eval "$before"
    read -r wall rss < <( { /usr/bin/time -f '%e %M' "$@" >/dev/null; } 2>&1 | tail -1 )
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
  done
  printf '%s %s\n' "$best_wall" "$(( best_rss / 1024 ))"
}

printf '%-7s %-9s | %-8s %-8s | %-10s %-8s | %-10s %-8s | %-8s %-10s\n' models pipelines "check s" "MB" "cold s" "MB" "warm s" "MB" "floor s" "cold/floor"
for models in 300 3000 10000; do
  pipelines=$(( models / 100 > 1 ? models / 100 : 2 ))
  project="$work/$models"
  "$generate" --models "$models" --pipelines "$pipelines" --out "$project"
  before=""
  read -r check_s check_mb < <(measure "$stb" compile --check --project-dir "$project")
  before="rm -rf '$project/target'; sync; sleep 1"
  read -r cold_s cold_mb < <(measure "$stb" compile --project-dir "$project")
  before=""
  "$stb" compile --project-dir "$project" >/dev/null
  read -r warm_s warm_mb < <(measure "$stb" compile --project-dir "$project")
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
  printf '%-7s %-9s | %-8s %-8s | %-10s %-8s | %-10s %-8s | %-8s %-10s\n' "$models" "$pipelines" "$check_s" "$check_mb" "$cold_s" "$cold_mb" "$warm_s" "$warm_mb" "$best_floor" "$ratio"
done
echo "best of $runs runs; MB = peak resident memory" >&2
