#!/usr/bin/env bash
# The JavaScript the tests inject into pages (never served by the plane): axe-core, the accessibility
# checker, from the npm registry at a pinned version, into .cache/npm (gitignored). Idempotent.
set -euo pipefail
AXE_VERSION=4.14.1
cd "$(dirname "$0")/.."
target=.cache/npm/node_modules/axe-core
if [ -f "$target/package.json" ] && grep -q "\"version\": \"$AXE_VERSION\"" "$target/package.json"; then
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: apt-get install npm" >&2; exit 1; }
mkdir -p .cache/npm
npm install --prefix .cache/npm --no-save --no-package-lock --no-audit --no-fund "axe-core@$AXE_VERSION"
