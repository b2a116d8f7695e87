#!/usr/bin/env bash
# Install what is missing, then run the whole plane locally (Ctrl-C stops it).
# Extra arguments go to `wingsmith up`, e.g. scripts/up.sh --offline-hub
source "$(dirname "$0")/_env.sh"
exec wingsmith up "$@"
