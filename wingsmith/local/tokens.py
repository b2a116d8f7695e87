"""The API tokens of a local plane, kept in its home so a restart keeps the same logins."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


def local_admin_tokens(tokens_file: Path) -> str:
    """The tokens JSON for a local plane: reuse the stored one, or create an admin token once."""
    if tokens_file.exists():
        return tokens_file.read_text()
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    # Two people, so four-eyes review works on a laptop: the admin registers, the reviewer approves.
    raw = json.dumps({secrets.token_urlsafe(24): {"name": "local-admin", "roles": ["admin"]},
                      secrets.token_urlsafe(24): {"name": "local-reviewer", "roles": ["approver"]}})
    fd = os.open(tokens_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(raw)
    return raw
