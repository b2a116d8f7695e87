"""Real published configs and weight totals for the sizing tests, from the Hub snapshot the repository
ships (sim/hub/snapshot.json, built from upstream's hf-configs; its faithfulness to them is checked in
the upstream tier, tests/hub/test_snapshot.py). Nothing here needs the upstream tree."""

from __future__ import annotations

import json
from pathlib import Path

from tests.upstream import snapshot_config, snapshot_config_text, snapshot_meta, snapshot_repos


def config(repo: str) -> dict:
    """A fresh copy of a real published config.json (tests may modify it)."""
    return snapshot_config(repo)


def meta(repo: str) -> dict:
    return snapshot_meta(repo)


def weight_bytes(repo: str) -> int:
    total = meta(repo)["total_size_bytes"]
    assert total, f"{repo} has no published weight total"
    return total


def shipped_repos() -> list[str]:
    return snapshot_repos()


def config_file(repo: str, directory: Path) -> Path:
    """The published config.json written to `directory` in upstream's layout (`<org>/<name>/config.json`
    with its `meta.json` beside it, as `wingsmith size` reads them), for commands that take a file."""
    path = directory / repo / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(snapshot_config_text(repo))
    path.with_name("meta.json").write_text(json.dumps(meta(repo), indent=2) + "\n")
    return path
