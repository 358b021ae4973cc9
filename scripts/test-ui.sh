#!/usr/bin/env bash
# The browser tests of `stb dev`'s web UI: Playwright driving Debian's Chromium against real
# `stb dev` servers on the local stack. Installs Chromium when it is missing, builds the UI,
# stb and the event producer, starts the local stack when it is not running, and runs
# web/tests/*.spec.ts. Screenshots and traces of a failure are kept in web/test-results.
#   scripts/test-ui.sh                 the tests
#   STB_UI_SCREENSHOTS=1 scripts/test-ui.sh   also retake docs/ui/*.png
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/streambuild"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
export STB_TEST_STACK_DIR="${STB_TEST_STACK_DIR:-$cache/test-stack}"

if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq chromium
fi

"$repo/scripts/build-ui.sh"
cargo build --locked -p stb -p stb-example-orders -p stb-bench --manifest-path "$repo/Cargo.toml"
export STB_BIN="$CARGO_TARGET_DIR/debug/stb"
export STB_BENCH_GENERATE="$CARGO_TARGET_DIR/debug/stb-bench-generate"
export STB_PRODUCER="$CARGO_TARGET_DIR/debug/orders-producer"
if ! "$STB_BIN" local env --state-dir "$STB_TEST_STACK_DIR" >/dev/null 2>&1; then
  "$STB_BIN" local up --state-dir "$STB_TEST_STACK_DIR" --clickhouse-port 0 --kafka-port 0
fi
mkdir -p "$repo/docs/ui"
cd "$repo/web"
npx playwright test "$@"
