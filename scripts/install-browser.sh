#!/usr/bin/env bash
# Install Debian's Chromium for the console's browser test (Playwright drives it through
# executable_path; `playwright install` would download a browser, which these machines cannot).
# Idempotent: does nothing when /usr/bin/chromium is already there.
set -euo pipefail
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-browser: $CHROMIUM is missing and installing it needs root (or sudo)" >&2
    exit 1
  fi
fi
echo "install-browser: installing Debian's chromium…" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "install-browser: apt-get finished but $CHROMIUM is still missing" >&2
  exit 1
fi
"$CHROMIUM" --version >&2 || true
