#!/usr/bin/env bash
# Install the Debian packages the tests drive for real: Chromium for the console's browser test
# (Playwright drives it through executable_path; `playwright install` would download a browser, which
# these machines cannot) and HAProxy, the TLS terminator in front of Temporal in the secured-Temporal
# test (tests/production/tls.py says why not stunnel). Idempotent: installs only what is missing.
set -euo pipefail
# package -> a file it installs
declare -A wanted=([chromium]=/usr/bin/chromium [fonts-dejavu-core]=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
                   [haproxy]=/usr/sbin/haproxy)
missing=()
for package in "${!wanted[@]}"; do
  [ -e "${wanted[$package]}" ] || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-debian: ${missing[*]} missing, and installing needs root (or sudo)" >&2
    exit 1
  fi
fi
echo "install-debian: installing ${missing[*]}…" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d (or its absence in CI containers) decides whether Debian starts haproxy's service; the
# tests start their own with their own configuration either way.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for package in "${missing[@]}"; do
  if [ ! -e "${wanted[$package]}" ]; then
    echo "install-debian: apt-get finished but ${wanted[$package]} ($package) is still missing" >&2
    exit 1
  fi
done
