"""The offline Hub's data: models at a commit, their files and card facts (see build_snapshot.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

SNAPSHOT_FILE = Path(__file__).with_name("snapshot.json")


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    return json.loads(Path(path).read_text())


def load_snapshot(path: Path | str | None = None) -> dict:
    """The snapshot as {"models": {repo_id: model}}; a copy, so servers can move branches freely."""
    data = _load(str(path or SNAPSHOT_FILE))
    return {"models": {k: dict(v) for k, v in data["models"].items()}}


def shipped_models(path: Path | str | None = None) -> list[str]:
    return sorted(_load(str(path or SNAPSHOT_FILE))["models"])
