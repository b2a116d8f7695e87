# Sourced by scripts/up.sh and scripts/test.sh: make ./.venv hold everything the project needs.
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Wingsmith needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
extras=${WINGSMITH_EXTRAS:-}
stamp=".venv/.wingsmith-installed"
want="$(sha256sum pyproject.toml | cut -c1-16) ${extras}"
if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
  echo "installing Wingsmith into .venv ${extras:+(extras: $extras)}…" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
