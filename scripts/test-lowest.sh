#!/usr/bin/env bash
# The floors in pyproject.toml, proven: a second venv (.venv-lowest) from requirements/lowest.lock, the lowest
# versions the direct dependencies allow, runs the unit tier. CI runs it beside the whole suite (.ci/run).
export WINGSMITH_VENV=.venv-lowest WINGSMITH_LOCK=requirements/lowest.lock WINGSMITH_EXTRAS=test,dev
# Without the perf extra (pinned to one version, it has no floor to prove): its tests skip here, in CI too.
export WINGSMITH_TEST_WITHOUT_PERF=1
source "$(dirname "$0")/_env.sh"
set +e
mapfile -t places < <(python -c 'from tests.conftest import UNIT_PLACES; print("\n".join("tests/" + p for p in UNIT_PLACES))')
# A temporary root of its own (scripts/test.sh says why), removed when the run passes.
base=$(mktemp -d "${TMPDIR:-/tmp}/wingsmith-lowest.XXXXXX")
python -m pytest -m unit -q -p no:cacheprovider -n auto --basetemp="$base" "${places[@]}" "$@"
rc=$?
[ "$rc" -eq 0 ] && rm -rf "$base"
[ "$rc" -eq 5 ] && { echo "pytest collected no tests: that is a failure, not a pass" >&2; exit 1; }
exit "$rc"
