#!/usr/bin/env bash
# Times `stb compile` on generated projects of 300, 3,000 and 10,000 models and prints wall
# time and peak memory (max RSS). Usage: scripts/bench-compile.sh [runs-per-size]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
runs="${1:-3}"
work="${TMPDIR:-/tmp}/stb-bench-compile"
cargo build --release --locked -p stb -p stb-bench --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
generate="$CARGO_TARGET_DIR/release/stb-bench-generate"
printf '%-8s %-10s %-12s %-12s %s\n' models pipelines "wall (s)" "peak (MB)" "runs"
for models in 300 3000 10000; do
  pipelines=$(( models / 100 > 1 ? models / 100 : 2 ))
  project="$work/$models"
  "$generate" --models "$models" --pipelines "$pipelines" --out "$project"
  best_wall=""; best_rss=""
  for _ in $(seq "$runs"); do
    # %e: elapsed wall seconds, %M: maximum resident set size in KiB
    read -r wall rss < <( { /usr/bin/time -f '%e %M' "$stb" compile --project-dir "$project" >/dev/null; } 2>&1 | tail -1 )
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [ -z "$best_rss" ] || [ "$rss" -gt "$best_rss" ]; then best_rss=$rss; fi
  done
  printf '%-8s %-10s %-12s %-12s %s\n' "$models" "$pipelines" "$best_wall" "$(( best_rss / 1024 ))" "$runs"
done
echo "wall: best of $runs runs; peak: largest max RSS over the runs (GNU time)." >&2
