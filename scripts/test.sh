#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
#
# On a fresh Debian machine it installs what is missing (C toolchain for librdkafka, Python
# venv support, Node.js for the web UI), builds the web UI and the workspace, starts the local stack (chDB ClickHouse server +
# tansu broker), and runs: formatting, clippy, the Python server's unit tests and every Rust
# test, unit and integration, against the real engine and broker; the browser tests of the
# web UI; then the one-command demo (scripts/demo.sh) and the wheel a new user installs
# (scripts/test-wheel.sh). The Rust tests, the browser tests, the demo and the wheel each
# run even when one before them failed; the script ends with the wall time of every step, the ten slowest
# tests and every step that failed, and exits non-zero on any failure. Caches live outside
# the checkout so a fresh clone reuses them:
#   CARGO_TARGET_DIR  (default ~/.cache/streambuild/target)
#   STB_VENV          (default ~/.cache/streambuild/venv)
#   STB_TEST_STACK_DIR (default ~/.cache/streambuild/test-stack)
# Usage: scripts/test.sh [--busy N]
#   --busy N  runs the suite beside N processes that keep a CPU busy each (stopped at the
#             end): the suite must pass on a loaded laptop, not only on an idle machine.
set -euo pipefail

busy=0
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) busy="${2:?--busy needs a number}"; shift 2 ;;
    --busy=*) busy="${1#--busy=}"; shift ;;
    *) echo "unknown option: $1 (usage: scripts/test.sh [--busy N])" >&2; exit 2 ;;
  esac
done
case "$busy" in ''|*[!0-9]*) echo "--busy needs a number, not '$busy'" >&2; exit 2 ;; esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/streambuild"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
export STB_VENV="${STB_VENV:-$cache/venv}"
export STB_TEST_STACK_DIR="${STB_TEST_STACK_DIR:-$cache/test-stack}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
start=$(date +%s)
step_names=()
step_starts=()
step() {
  step_names+=("$*")
  step_starts+=("$(date +%s)")
  printf '\n==> [%ss] %s\n' "$(( $(date +%s) - start ))" "$*"
}
failed=()
# Runs a step that must not stop the ones after it; a failure is remembered.
keep_going() {
  local name="$1"
  shift
  if ! "$@"; then
    failed+=("$name")
    echo "==> FAILED: $name"
  fi
}

busy_pids=()
stop_busy() {
  for pid in ${busy_pids[@]+"${busy_pids[@]}"}; do kill "$pid" 2>/dev/null || true; done
  busy_pids=()
}
trap stop_busy EXIT
if [ "$busy" -gt 0 ]; then
  for _ in $(seq "$busy"); do
    # Each loop ends by itself once this script is gone, even if it was killed outright.
    sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' busy "$$" </dev/null >/dev/null 2>&1 &
    busy_pids+=("$!")
  done
  echo "==> $busy busy processes beside the suite: ${busy_pids[*]}"
fi

step "checking system packages"
missing=()
command -v cc >/dev/null || missing+=(gcc)
command -v c++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
command -v perl >/dev/null || missing+=(perl)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
if command -v python3 >/dev/null && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=(python3-venv)
fi
# The control store's PostgreSQL tests run a real server, and `script` (util-linux) drives
# a terminal for the interactive commands' tests.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v script >/dev/null || missing+=(util-linux)
# The web UI is built with Node.js (scripts/build-ui.sh checks the version).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }

step "formatting"
cargo fmt --all -- --check

step "building the web UI (scripts/build-ui.sh: lock-file install, type check, vite build)"
"$repo/scripts/build-ui.sh"

step "building (target: $CARGO_TARGET_DIR)"
cargo build --workspace --all-targets --locked

step "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

stb="$CARGO_TARGET_DIR/debug/stb"
stop_stack() {
  "$stb" local down --state-dir "$STB_TEST_STACK_DIR" >/dev/null 2>&1 || true
  "$repo/scripts/test-postgres.sh" stop || true
}
# Leave the stack running for the next local run, but never behind a CI job.
if [ "${CI:-}" = "true" ]; then trap 'stop_busy; stop_stack' EXIT; fi

step "starting the local test stack in $STB_TEST_STACK_DIR"
stack_start=$(date +%s%N)
"$stb" local up --state-dir "$STB_TEST_STACK_DIR" --clickhouse-port 0 --kafka-port 0
echo "stack ready in $(( ($(date +%s%N) - stack_start) / 1000000 )) ms"

step "starting the control store's test PostgreSQL server"
STB_TEST_POSTGRES_URL="$("$repo/scripts/test-postgres.sh" start)"
export STB_TEST_POSTGRES_URL
echo "PostgreSQL at $STB_TEST_POSTGRES_URL"

step "Python unit tests of the local ClickHouse server"
"$STB_VENV/bin/python" -m pip install --quiet --disable-pip-version-check pytest==9.2.0
(cd localstack && "$STB_VENV/bin/python" -m pytest -q tests)

step "Rust tests (unit, integration, end to end)"
# nextest writes its JUnit report under its store directory (the workspace's target/).
junit_candidates=("$repo/target/nextest/ci/junit.xml" "$CARGO_TARGET_DIR/nextest/ci/junit.xml")
rm -f "${junit_candidates[@]}"
if cargo nextest --version >/dev/null 2>&1; then
  keep_going "Rust tests" cargo nextest run --workspace --locked --profile ci
else
  echo "cargo-nextest not found; using cargo test"
  keep_going "Rust tests" cargo test --workspace --locked
fi

step "browser tests of the web UI (scripts/test-ui.sh: Playwright, Debian's Chromium)"
keep_going "browser tests" "$repo/scripts/test-ui.sh"

step "the one-command demo (scripts/demo.sh --stop)"
run_demo() {
  local demo_log
  demo_log="$(mktemp)"
  if ! "$repo/scripts/demo.sh" --stop >"$demo_log" 2>&1 || ! grep -q '^Demo passed$' "$demo_log"; then
    cat "$demo_log"
    echo "the demo failed"
    return 1
  fi
  sed -n '/^Demo summary$/,/^Demo passed$/p' "$demo_log"
}
keep_going "demo" run_demo

step "the wheel (scripts/test-wheel.sh: built, installed without toolchains, the quickstart)"
keep_going "wheel" "$repo/scripts/test-wheel.sh"

end=$(date +%s)
echo
echo "==> wall time of each step"
for index in "${!step_names[@]}"; do
  next=$(( index + 1 ))
  until_s=${step_starts[$next]:-$end}
  printf '  %5ss  %s\n' "$(( until_s - step_starts[index] ))" "${step_names[$index]}"
done
printf '  %5ss  total\n' "$(( end - start ))"
junit=""
for candidate in "${junit_candidates[@]}"; do
  if [ -f "$candidate" ]; then junit="$candidate"; break; fi
done
if [ -n "$junit" ]; then
  echo "==> the ten slowest tests"
  if ! python3 - "$junit" <<'PY'
import sys
import xml.etree.ElementTree as tree
cases = [(float(c.get("time") or 0), f'{c.get("classname")} {c.get("name")}') for c in tree.parse(sys.argv[1]).iter("testcase")]
for seconds, name in sorted(cases, reverse=True)[:10]:
    print(f"  {seconds:7.1f}s  {name}")
PY
  then
    echo "==> could not read $junit"
  fi
fi
if ((${#failed[@]})); then
  echo "==> FAILED steps: ${failed[*]}"
  exit 1
fi
echo "==> [$(( end - start ))s] all tests passed"
