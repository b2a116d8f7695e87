#!/usr/bin/env bash
# Install what is missing, then run the gates (ruff, mypy) and the whole test suite.
# Extra arguments go to pytest.
# perf: AIConfigurator, so the planning-by-load tests run (and fail, not skip, if it is missing).
WINGSMITH_EXTRAS=test,dev,perf
source "$(dirname "$0")/_env.sh"
# Tests drive Debian's Chromium (the console) and HAProxy (TLS in front of Temporal); install what is missing.
bash scripts/install-debian.sh
# The accessibility checker the console's browser tests inject (axe-core, pinned, into .cache/npm).
bash scripts/install-js.sh
set +e
# Lint and types first: they take seconds, and a failure there fails the run like a failing test.
ruff check . || { echo "ruff check failed" >&2; exit 1; }
mypy || { echo "mypy failed" >&2; exit 1; }
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
