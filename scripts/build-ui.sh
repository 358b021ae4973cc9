#!/usr/bin/env bash
# Builds the web UI of `stb dev` (web/, Svelte + Vite) into web/dist, which the stb binary
# embeds when it is built next. Installs exactly what web/package-lock.json pins, checks
# the types and the accessibility warnings of every component, then builds.
#   scripts/build-ui.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo/web"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "build-ui: Node.js 20.19+ and npm are needed (https://nodejs.org, or your distribution's nodejs and npm)" >&2
  exit 1
fi
node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    console.error(`build-ui: Node.js ${process.versions.node} is too old; Vite needs 20.19 or newer`);
    process.exit(1);
  }'

# A lock-file install only when the lock changed since the last one (npm ci starts over).
stamp=node_modules/.package-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
fi
npm run --silent check
npm run --silent build
echo "web UI built in web/dist"
