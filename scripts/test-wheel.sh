#!/usr/bin/env bash
# The wheel as a new user meets it: builds it (scripts/build-wheel.sh) and prints its size,
# installs it with pip into a fresh virtual environment on a PATH that holds Python and the
# basic tools but no cargo, rustc, C compiler, Node.js or npm, and times that; then, in an
# empty environment (env -i) on that PATH, the quickstart of docs/quickstart.md: stb init,
# stb local up (a stack of its own, free ports), stb build, stb local produce, stb test,
# stb audit, and stb dev serving the embedded web UI at /. Last, `cargo install --path
# crates/stb` into a temporary root gives a working stb too.
# `stb local up` installs the stack into a fresh Python environment of the new user's own,
# as it does for anyone; pip's download cache is shared with this machine's user
# (PIP_CACHE_DIR), so chDB is downloaded once, not on every run.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/streambuild"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
pip_cache="${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}"
uv_version="0.13.9"
work="$(mktemp -d)"
dev_pid=""
stack_started=""
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null || true
  [ -n "$stack_started" ] && as_user stb local down --state-dir "$work/stack" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '==> %s\n' "$*"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# A PATH with python3 and basic tools only.
mkdir -p "$work/bin" "$work/home"
for tool in python3 sh bash env cat ls mkdir rm sleep grep sed head tail tr cut sort uname id date dirname basename readlink; do
  ln -s "$(command -v "$tool")" "$work/bin/$tool"
done
clean_path="$work/venv/bin:$work/bin"
# What a new user's shell would run: nothing of this machine's environment but HOME and PATH.
user_env=(env -i HOME="$work/home" PATH="$clean_path" LANG=C.UTF-8 PIP_CACHE_DIR="$pip_cache")
as_user() { "${user_env[@]}" "$@"; }

"$repo/scripts/build-wheel.sh" "$work/dist"
wheel="$(ls "$work"/dist/*.whl)"
# Deterministic packaging: building again from the same commit gives the same archive, byte
# for byte (the binary comes from the same cached build; see docs/install.md).
"$repo/scripts/build-wheel.sh" "$work/again" >/dev/null
if ! cmp -s "$wheel" "$work/again/$(basename "$wheel")"; then
  echo "two builds of one commit gave different wheels"; exit 1
fi
say "a second build gave the same wheel (sha256 $(sha256sum "$wheel" | cut -c1-16)…)"

for tool in cargo rustc cc gcc c++ node npm; do
  if PATH="$clean_path" command -v "$tool" >/dev/null 2>&1; then
    echo "the clean PATH still has $tool"; exit 1
  fi
done
say "installing $(basename "$wheel") into a fresh virtual environment (no toolchain on PATH)"
started=$(date +%s%N)
as_user python3 -m venv "$work/venv"
as_user "$work/venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"
say "installed in $(ms_since "$started") ms"
as_user stb --version
# uv users install it as a tool: its own environment, stb on the tool bin path.
python3 -m venv "$work/uv"
"$work/uv/bin/pip" install --quiet --disable-pip-version-check "uv==$uv_version"
started=$(date +%s%N)
as_user env UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/uv-bin" UV_CACHE_DIR="$work/uv-cache" \
  "$work/uv/bin/uv" tool install --offline --quiet "$wheel"
say "uv tool install took $(ms_since "$started") ms"
as_user "$work/uv-bin/stb" --version

say "the quickstart (docs/quickstart.md) on a local stack of its own"
cd "$work"
as_user stb init shop --mode virtual
cd "$work/shop"
started=$(date +%s%N)
stack_started=yes
as_user stb local up --state-dir "$work/stack" --clickhouse-port 0 --kafka-port 0
say "stb local up installed and started the stack in $(ms_since "$started") ms"
eval "$(as_user stb local env --state-dir "$work/stack")"
# The second form of the quickstart's step 2: the stack is on free ports.
cat > streambuild_local.toml <<TOML
[connection]
host = "127.0.0.1"
port = $STB_LOCAL_CLICKHOUSE_PORT

[vars]
kafka_brokers = "$STB_LOCAL_KAFKA_BROKERS"
TOML
staged_id() {
  as_user stb deployment list --json |
    python3 -c 'import json, sys; print(next(d["deployment_id"] for d in json.load(sys.stdin)["deployments"] if d["state"] == "staged"))'
}
as_user stb build --auto-approve
as_user stb deployment list
first="$(staged_id)"
as_user stb deployment promote "$first"
as_user stb local produce --topic shop.events --state-dir "$work/stack" <<JSON
{"event_id":"e1","kind":"click","amount":2}
{"event_id":"e2","kind":"click","amount":3}
{"event_id":"e3","kind":"view","amount":1}
JSON
query() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], sys.argv[2].encode()).read().decode().strip())' "$STB_LOCAL_CLICKHOUSE_URL" "$1"; }
per_kind="SELECT kind, sum(events), sum(total_amount) FROM shop_dev.tbl__amount_per_kind GROUP BY kind ORDER BY kind"
expected="$(printf 'click\t2\t5\nview\t1\t1')"
arrived=""
for _ in $(seq 240); do
  if [ "$(query "$per_kind")" = "$expected" ]; then arrived=yes; break; fi
  sleep 0.5
done
[ -n "$arrived" ] || { echo "the three events never reached amount_per_kind: $(query "$per_kind")"; exit 1; }
as_user stb test
as_user stb audit
cat > pipelines/pl__events/amount_per_kind.sql <<'SQL'
MODEL (
  description "Events, their total and their largest amount per kind",
  engine "SummingMergeTree",
  order_by ["kind"],
);

SELECT
  kind::String AS kind,
  count()::UInt64 AS events,
  sum(amount)::UInt64 AS total_amount,
  max(amount)::SimpleAggregateFunction(max, UInt64) AS largest
FROM __ref("events_parsed")
GROUP BY kind
SQL
as_user stb plan
as_user stb build --auto-approve
second="$(staged_id)"
as_user stb deployment audit
as_user stb deployment promote "$second"
largest="SELECT kind, max(largest) FROM shop_dev.tbl__amount_per_kind GROUP BY kind ORDER BY kind"
[ "$(query "$largest")" = "$(printf 'click\t3\nview\t1')" ] || { echo "the second deployment replayed wrong: $(query "$largest")"; exit 1; }
[ "$(query "$per_kind")" = "$expected" ] || { echo "the second deployment lost or doubled events: $(query "$per_kind")"; exit 1; }
# It asks first; the answer is typed.
echo y | as_user stb deployment rollback --previous
[ "$(query "$per_kind")" = "$expected" ] || { echo "the rollback does not read the first deployment: $(query "$per_kind")"; exit 1; }
as_user stb test

say "stb dev serves the embedded web UI"
# exec: $! must be stb itself, not a shell around it, so the kill below stops the server.
(exec "${user_env[@]}" stb dev --watch --ui-port 0 > "$work/dev.log" 2>&1) &
dev_pid=$!
base=""
for _ in $(seq 120); do
  base="$(sed -n 's|^ *api *\(http://[^ ]*\)/api$|\1|p' "$work/dev.log")"
  [ -n "$base" ] && break
  kill -0 "$dev_pid" 2>/dev/null || { cat "$work/dev.log"; exit 1; }
  sleep 0.5
done
[ -n "$base" ] || { echo "stb dev did not start"; cat "$work/dev.log"; exit 1; }
page="$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$base/")"
if ! grep -q '<div id="app">' <<<"$page" || grep -q "built without its web UI" <<<"$page"; then
  echo "/ did not serve the web UI:"; echo "$page"; exit 1
fi
kill "$dev_pid"; wait "$dev_pid" 2>/dev/null || true; dev_pid=""
as_user stb local down --state-dir "$work/stack"
stack_started=""

say "cargo install --path crates/stb"
started=$(date +%s%N)
cargo install --quiet --locked --debug --path "$repo/crates/stb" --root "$work/cargo-root"
"$work/cargo-root/bin/stb" --version
say "cargo install took $(ms_since "$started") ms (reusing $CARGO_TARGET_DIR)"
say "the wheel works: $(basename "$wheel"), $(( $(stat -c %s "$wheel") / 1024 / 1024 )) MiB"
