#!/usr/bin/env bash
# Install what is missing, then run the gates (ruff, mypy) and the tests. Extra arguments go to pytest.
#   scripts/test.sh           every tier (CI runs this): unit, integration, journey, on
#                             WINGSMITH_TEST_WORKERS pytest-xdist workers (3), then the `solo` tests alone
#   scripts/test.sh --fast    the gates and the unit tier (no server), before each commit
# perf: AIConfigurator, so the planning-by-load tests run (and, in CI, fail rather than skip if it is missing).
fast=false
if [ "${1:-}" = "--fast" ]; then
  fast=true
  shift
fi
WINGSMITH_EXTRAS=test,dev,perf
source "$(dirname "$0")/_env.sh"
if [ "$fast" = false ]; then
  # Tests drive Debian's Chromium (the console) and HAProxy (TLS in front of Temporal); install what is missing.
  bash scripts/install-debian.sh
  # The accessibility checker the console's browser tests inject (axe-core, pinned, into .cache/npm).
  bash scripts/install-js.sh
fi
set +e
# A temporary root of this run's own: pytest's default one is shared by every run on the machine, and a
# second run (the fast tier before a commit, beside a whole-suite run) deletes the older runs' directories,
# databases included. Removed when the run passes; kept, and named, when it fails.
base=$(mktemp -d "${TMPDIR:-/tmp}/wingsmith-tests.XXXXXX")
# Lint and types first: they take seconds, and a failure there fails the run like a failing test.
ruff check . || { echo "ruff check failed" >&2; exit 1; }
mypy || { echo "mypy failed" >&2; exit 1; }
if [ "$fast" = true ]; then
  # Only the places the unit tier lives in are collected (tests/conftest.py: UNIT_PLACES), so collection
  # imports no browser, server or AIConfigurator module; -m unit leaves out what there asks for a server.
  mapfile -t places < <(python -c 'from tests.conftest import UNIT_PLACES; print("\n".join("tests/" + p for p in UNIT_PLACES))')
  python -m pytest -m unit -q -p no:cacheprovider -n auto --basetemp="$base/unit" "${places[@]}" "$@"
  rc=$?
else
  # Every tier in two parts: what may share the machine on several workers, each with its own Temporal and
  # Postgres, then the `solo` tests one at a time, since they judge time or memory against bounds set on a
  # machine doing nothing else (tests/conftest.py).
  # loadscope deals a whole module to one worker, in the order collection left them (the longest first);
  # tests/test_suite_dealing.py checks that these flags still do.
  dealing=(--dist loadscope --no-loadscope-reorder)
  python -m pytest -m "not solo" -n "${WINGSMITH_TEST_WORKERS:-3}" "${dealing[@]}" --basetemp="$base/parallel" "$@"
  parallel=$?
  # A passing part's files (about 1.4 GB of databases, logs and browser profiles: ten seconds of disk here) go
  # while the solo part runs, which leaves a core idle on average; a failing part's stay for the look.
  cleaning=""
  if [ "$parallel" -eq 0 ]; then
    rm -rf "$base/parallel" &
    cleaning=$!
  fi
  # The solo part collects only the places solo tests live in (not the whole suite, to pick sixty tests),
  # unless the arguments name what to run.
  solo_places=()
  named=false
  for arg in "$@"; do [[ "$arg" == -* ]] || named=true; done
  [ "$named" = true ] || mapfile -t solo_places < <(python -c 'from tests.conftest import solo_paths
print("\n".join(solo_paths()))')
  python -m pytest -m solo --basetemp="$base/solo" "$@" "${solo_places[@]}"
  solo=$?
  [ -z "$cleaning" ] || wait "$cleaning"
  if [ "$parallel" -eq 5 ] && [ "$solo" -eq 5 ]; then
    rc=5
  elif [ "$parallel" -ne 0 ] && [ "$parallel" -ne 5 ]; then
    rc=$parallel
  elif [ "$solo" -ne 0 ] && [ "$solo" -ne 5 ]; then
    rc=$solo
  else
    rc=0
  fi
fi
if [ "$rc" -eq 0 ]; then
  rm -rf "$base"
else
  echo "the tests' servers' logs and files: $base" >&2
fi
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
