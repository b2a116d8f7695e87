"""Secrets by reference. A setting never holds a secret; it holds where to find one:
`env:NAME` or a bare `NAME` (an environment variable), or `file:<path>`. The value is read at call
time, in the activity or request that needs it, and no message here ever contains it."""

from __future__ import annotations

import os
import re
from pathlib import Path

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SecretUnavailable(Exception):
    pass


def describe_ref(ref: str) -> str:
    if ref.startswith("file:"):
        return f"the file {ref[5:]}"
    name = ref[4:] if ref.startswith("env:") else ref
    return f"the env var {name}" if _ENV_NAME.fullmatch(name) else "the configured reference"


def read_secret_ref(ref: str) -> str:
    if ref.startswith("file:"):
        path = Path(ref[5:]).expanduser()
        try:
            value = path.read_text().strip()
        except OSError as exc:
            raise SecretUnavailable(f"cannot read {describe_ref(ref)}: {exc.strerror}") from None
    else:
        name = ref[4:] if ref.startswith("env:") else ref
        if not _ENV_NAME.fullmatch(name):
            # Most likely the secret itself was put where its reference belongs: never echo it.
            raise SecretUnavailable("a secret reference must be an env var name, env:NAME or file:<path>")
        value = os.environ.get(name, "").strip()
    if not value:
        raise SecretUnavailable(f"{describe_ref(ref)} is empty or unset")
    return value
