# Sourced by scripts/_env.sh and scripts/lock.sh: uv, pinned with its hashes (requirements/tools.lock), in a
# venv of its own ($tools). Made once; two scripts starting at once (CI installs two venvs side by side) take
# turns on a lock file, and `.ready` is written last, so neither uses a half-made one.
tools=.cache/tools
want_tools="$(sha256sum requirements/tools.lock | cut -c1-16)"
if [ "$(cat "$tools/.ready" 2> /dev/null)" != "$want_tools" ]; then
  mkdir -p .cache
  (
    if command -v flock > /dev/null; then flock 9; fi  # (macOS has none: one script at a time there)
    if [ "$(cat "$tools/.ready" 2> /dev/null)" != "$want_tools" ]; then
      rm -rf "$tools"
      "${PYTHON:-python3}" -m venv "$tools"
      "$tools/bin/python" -m pip install --quiet --require-hashes --no-deps -r requirements/tools.lock
      echo "$want_tools" > "$tools/.ready"
    fi
  ) 9> .cache/tools.lock
fi
