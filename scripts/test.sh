#!/usr/bin/env bash
# Install what is missing, then run the whole test suite. Extra arguments go to pytest.
WINGSMITH_EXTRAS=test
source "$(dirname "$0")/_env.sh"
# The console's browser test drives Debian's Chromium; install it when it is missing.
bash scripts/install-browser.sh
set +e
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
