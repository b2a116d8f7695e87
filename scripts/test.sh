#!/usr/bin/env bash
# Install what is missing, then run the whole test suite. Extra arguments go to pytest.
WINGSMITH_EXTRAS=test
source "$(dirname "$0")/_env.sh"
set +e
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
