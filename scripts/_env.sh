# Sourced by scripts/up.sh and scripts/test.sh: make ./.venv hold everything the project needs, installed from
# the lock files (requirements/, written by scripts/lock.sh) with their hashes: the same versions on every
# machine. Reinstalls only when pyproject.toml or the lock changed since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Wingsmith needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
VENV=${WINGSMITH_VENV:-.venv}
extras=${WINGSMITH_EXTRAS:-}
case ",$extras," in
  *,test,*|*,dev,*) lock=requirements/dev.lock ;;
  *,perf,*) lock=requirements/plane-perf.lock ;;
  *) lock=requirements/plane.lock ;;
esac
lock=${WINGSMITH_LOCK:-$lock}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
stamp="$VENV/.wingsmith-installed"
want="$(cat pyproject.toml "$lock" | sha256sum | cut -c1-16) ${extras} ${lock}"
if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
  echo "installing Wingsmith into $VENV from $lock…" >&2
  # With uv (scripts/_tools.sh): it installs the lock's three hundred packages in seconds from its cache,
  # where pip fetched each from the index again and took over a minute. WINGSMITH_INSTALLER=pip uses pip.
  if [ "${WINGSMITH_INSTALLER:-uv}" = pip ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    install=("$VENV/bin/python" -m pip install --quiet)
  else
    # shellcheck source=scripts/_tools.sh
    source scripts/_tools.sh
    # Compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine sets it) nothing
    # is cached on import, and every process would compile AIConfigurator, pandas and the Kubernetes client
    # again (the suite took minutes longer without it).
    install=("$tools/bin/uv" pip install --quiet --python "$VENV/bin/python" --compile-bytecode)
  fi
  # The lock holds every package with its hashes; the project itself goes in on top, without dependencies.
  "${install[@]}" --require-hashes --no-deps -r "$lock"
  "${install[@]}" --no-deps -e .
  echo "$want" > "$stamp"
fi
export PATH="$PWD/$VENV/bin:$PATH"
