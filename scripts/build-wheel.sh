#!/usr/bin/env bash
# Builds the wheel that carries stb, its web UI embedded, from the lock files:
#   scripts/build-wheel.sh [OUT_DIR]      (default: dist/)
# The web UI is built by scripts/build-ui.sh (npm ci from web/package-lock.json), stb with
# `cargo --locked` in the `wheel` profile (optimised, stripped), by maturin pinned below in
# a virtual environment of its own. SOURCE_DATE_EPOCH is the last commit's time, so the
# archive's timestamps never depend on the day it was packaged. Prints the wheel's path
# and size.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/streambuild"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
out="${1:-$repo/dist}"
maturin_version="1.16.0"
venv="$cache/maturin-$maturin_version"

if [ ! -x "$venv/bin/maturin" ]; then
  echo "==> installing maturin $maturin_version in $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi

"$repo/scripts/build-ui.sh"

SOURCE_DATE_EPOCH="$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 315532800)"
export SOURCE_DATE_EPOCH
mkdir -p "$out"
# One wheel in OUT_DIR afterwards: this build's (its name carries the version and the
# platform tag maturin derives).
rm -f "$out"/streambuild_rs-*.whl
echo "==> building the wheel (maturin $maturin_version, cargo profile 'wheel')"
"$venv/bin/maturin" build --locked --manifest-path "$repo/crates/stb/Cargo.toml" --out "$out"
wheel="$(ls "$out"/streambuild_rs-*.whl)"
size=$(stat -c %s "$wheel")
echo "==> $wheel ($(( size / 1024 / 1024 )) MiB, $size bytes)"
