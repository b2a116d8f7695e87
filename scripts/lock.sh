#!/usr/bin/env bash
# Write the lock files in requirements/ from pyproject.toml, with every file's hashes, for Python 3.11 on
# any platform. Run after changing a dependency in pyproject.toml; commit the pyproject and the locks together.
#   plane.lock        the plane (scripts/up.sh, the image)
#   plane-perf.lock   the plane with the perf extra (an image built with EXTRAS=perf)
#   dev.lock          every extra: test, dev, perf (scripts/test.sh, CI)
#   lowest.lock       the lowest versions pyproject.toml allows for its direct dependencies, with test and
#                     dev: scripts/test-lowest.sh runs the unit tier on it, so the floors are proven
#   tools.lock        uv itself (requirements/tools.in), which installs the others (scripts/_env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_tools.sh
compile() {
  out=$1; shift
  "$tools/bin/uv" pip compile pyproject.toml "$@" --generate-hashes --python-version 3.11 --universal --quiet \
    --custom-compile-command "scripts/lock.sh" -o "requirements/$out"
}
compile plane.lock
compile plane-perf.lock --extra perf
compile dev.lock --extra test --extra dev --extra perf
compile lowest.lock --extra test --extra dev --resolution lowest-direct
"$tools/bin/uv" pip compile requirements/tools.in --generate-hashes --python-version 3.11 --universal --quiet \
  --custom-compile-command "scripts/lock.sh" -o requirements/tools.lock
echo "requirements/: locks written" >&2
