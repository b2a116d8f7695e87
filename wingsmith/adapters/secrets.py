"""Secrets by reference. A setting never holds a secret; it holds where to find one:
`env:NAME` or a bare `NAME` (an environment variable), or `file:<path>`. The value is read at call
time, in the activity or request that needs it, and no message here ever contains it."""

from __future__ import annotations

import os
import re
from pathlib import Path

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Tokens that also parse as env var names (Hugging Face's `hf_...`, for one) must not be taken for a
# reference: looking them up would put the secret into a "not set" message.
_SECRET_PREFIXES = ("hf_",)


class SecretUnavailable(Exception):
    pass


def _env_name(ref: str) -> str | None:
    name = ref[4:] if ref.startswith("env:") else ref
    if not _ENV_NAME.fullmatch(name) or name.startswith(_SECRET_PREFIXES):
        return None
    return name


def describe_ref(ref: str) -> str:
    """How to name a reference in a message without revealing anything secret."""
    if ref.startswith("file:"):
        return f"the file {ref[5:]}"
    name = _env_name(ref)
    return f"the env var {name}" if name else "the configured reference"


def read_secret_ref(ref: str, *, what: str = "the secret", setting: str = "the reference") -> str:
    """The secret `ref` points at. `what` and `setting` only shape the messages."""
    if ref.startswith("file:"):
        path = Path(ref[5:]).expanduser()
        try:
            value = path.read_text().strip()
        except OSError as exc:
            raise SecretUnavailable(f"cannot read {what} file {path}: {exc.strerror}") from None
        if not value:
            raise SecretUnavailable(f"{what} file {path} is empty")
        return value
    name = _env_name(ref)
    if name is None:
        # Most likely the secret itself was put where its reference belongs: never echo it.
        raise SecretUnavailable(f"{setting} must name an env var or be file:<path>, not hold the token itself")
    value = os.environ.get(name, "").strip()
    if not value:
        raise SecretUnavailable(f"the env var {name} named by {setting} is not set")
    return value
