"""The Hugging Face token, read from its reference at call time: the name of an env var, or
`file:<path>`. The token itself is never stored on an object, logged or put in a message."""

from __future__ import annotations

import os
import re
from pathlib import Path

from wingsmith.hub.errors import HubTokenUnavailable

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def describe(ref: str | None) -> str:
    """How to name the reference in a message without revealing anything secret."""
    if not ref:
        return "no token configured (WINGSMITH_HF_TOKEN_REF is unset)"
    if ref.startswith("file:"):
        return f"the token file {ref[5:]}"
    return f"the env var {ref}" if _looks_like_name(ref) else "the configured token reference"


def read_token(ref: str | None) -> str | None:
    if not ref:
        return None
    if ref.startswith("file:"):
        path = Path(ref[5:]).expanduser()
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise HubTokenUnavailable(f"cannot read the Hugging Face token file {path}: {exc.strerror}") from None
        if not token:
            raise HubTokenUnavailable(f"the Hugging Face token file {path} is empty")
        return token
    if not _looks_like_name(ref):
        # Most likely the token itself was put where its reference belongs; do not echo it.
        raise HubTokenUnavailable("WINGSMITH_HF_TOKEN_REF must name an env var or be file:<path>, "
                                  "not hold the token itself")
    token = os.environ.get(ref, "").strip()
    if not token:
        raise HubTokenUnavailable(f"the env var {ref} named by WINGSMITH_HF_TOKEN_REF is not set")
    return token


def _looks_like_name(ref: str) -> bool:
    return bool(_ENV_NAME.fullmatch(ref)) and not ref.startswith("hf_")
