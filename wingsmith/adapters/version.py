"""Which Wingsmith this is: the release (from the installed package) and the build (the image's build id,
else the checkout's commit). `wingsmith --version`, the API's `/version` and the workers' logs say it, so
a report names the code that made it."""

from __future__ import annotations

import functools
import os
import subprocess
from importlib import metadata
from pathlib import Path

# The repository this module sits in (an editable install); an installed wheel has no .git beside it.
_CHECKOUT = Path(__file__).resolve().parents[2]


def release() -> str:
    try:
        return metadata.version("wingsmith")
    except metadata.PackageNotFoundError:  # run from a tree that was never installed
        return "0+unknown"


@functools.cache
def build() -> str:
    """`WINGSMITH_BUILD` (the image sets it from its build argument; Worker Versioning's build id otherwise),
    else the checkout's commit (`+dirty` with uncommitted changes), else "unknown"."""
    for name in ("WINGSMITH_BUILD", "TEMPORAL_WORKER_BUILD_ID", "WINGSMITH_WORKER_BUILD_ID"):
        if value := os.environ.get(name, "").strip():
            return value[:255]
    if not (_CHECKOUT / ".git").exists():
        return "unknown"
    try:
        commit = subprocess.run(["git", "-C", str(_CHECKOUT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=2, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(_CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=2, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def describe() -> str:
    return f"wingsmith {release()} (build {build()})"
