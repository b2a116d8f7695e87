"""The token table a plane falls back on when nobody configured one (`WINGSMITH_AUTH_TOKENS` unset): a
file beside the plane's other state, `$WINGSMITH_HOME/tokens.json`, created once with two principals
(`local-admin`, `local-reviewer`) so four-eyes review works on one laptop.

An adapter of its own rather than part of the local supervisor (`wingsmith.local`): the API reads it at
start whoever started the API, and the API must not depend on the process that runs a local plane."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


def local_admin_tokens(tokens_file: Path) -> str:
    """The tokens JSON for a local plane: reuse the stored one, or create it once."""
    if tokens_file.exists():
        return tokens_file.read_text()
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    # Two people, so four-eyes review works on a laptop: the admin registers, the reviewer approves.
    raw = json.dumps({secrets.token_urlsafe(24): {"name": "local-admin", "roles": ["admin"]},
                      secrets.token_urlsafe(24): {"name": "local-reviewer", "roles": ["approver"]}})
    # O_EXCL: two processes starting at once do not each write their own table (one fails loudly instead).
    fd = os.open(tokens_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(raw)
    return raw
