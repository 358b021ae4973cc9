#!/usr/bin/env bash
# Sourced by the benchmarks that plan against the local stack (bench-plan.sh, bench-dev.sh):
# builds the release `stb` and the bench tools, starts the local stack if needed (left
# running), and sets `stb`, `url` (its ClickHouse HTTP address), the connection variables
# `stb` reads and `sql` (runs one statement there). Expects `repo`.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streambuild/target}"
cargo build --release --locked -p stb -p stb-bench --manifest-path "$repo/Cargo.toml" >&2
stb="$CARGO_TARGET_DIR/release/stb"
"$stb" local up >&2
eval "$("$stb" local env)"
url="${STB_LOCAL_CLICKHOUSE_URL:?}/"
export STREAMBUILD_CLICKHOUSE_HOST="$STB_LOCAL_CLICKHOUSE_HOST"
export STREAMBUILD_CLICKHOUSE_PORT="$STB_LOCAL_CLICKHOUSE_PORT"
sql() { curl -sf "$url" --data-binary "$1"; }
