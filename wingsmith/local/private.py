"""The plane's home holds its registry, workflow histories (temporal.db), logs, tokens and the
clusters' kubeconfigs: no other user of the machine may read it. The home is 0700 (0711 when the
embedded Postgres runs as its own user and must pass through it), every file the plane creates in it
is 0600, and files left readable by an earlier version are tightened when `up` starts.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

# Owner only, for every file and directory this process and its children create from now on.
PRIVATE_UMASK = 0o077


def make_private(home: Path, *, traversable: bool = False) -> None:
    """Create or tighten `home`; `traversable` lets another user pass through (never list or read)."""
    os.umask(PRIVATE_UMASK)
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o711 if traversable else 0o700)
    for path in home.rglob("*"):
        try:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                path.chmod(stat.S_IMODE(mode) & ~0o077)
        except OSError:  # a file a running part just removed
            continue


def private_file(path: Path) -> int:
    """Create `path` (and its directory) owner-only, or make an existing one so; returns an fd for appending."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def open_private_log(path: Path) -> BinaryIO:
    return os.fdopen(private_file(path), "ab")
