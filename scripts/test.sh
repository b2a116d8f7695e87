#!/usr/bin/env bash
# Install what is missing, then run the gates (ruff, mypy) and the whole test suite.
# Extra arguments go to pytest.
WINGSMITH_EXTRAS=test,dev
source "$(dirname "$0")/_env.sh"
# The console's browser test drives Debian's Chromium; install it when it is missing.
bash scripts/install-browser.sh
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
