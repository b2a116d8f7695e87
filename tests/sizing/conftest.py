from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from tests.upstream import UPSTREAM, require_upstream

# Upstream tier: every published config, from WINGSMITH_UPSTREAM_DIR or ../shared/upstream.
HF_CONFIGS = UPSTREAM / "hf-configs"


@pytest.fixture(autouse=True)
def _published_configs() -> None:
    """Skipped with the reason (failed under CI) when the upstream configs are absent."""
    require_upstream("hf-configs")


@cache
def _load(repo: str, name: str) -> str:
    return (HF_CONFIGS / repo / name).read_text()


def config(repo: str) -> dict:
    """A fresh copy of a real published config.json (tests may modify it)."""
    return json.loads(_load(repo, "config.json"))


def meta(repo: str) -> dict:
    return json.loads(_load(repo, "meta.json"))


def weight_bytes(repo: str) -> int:
    total = meta(repo)["total_size_bytes"]
    assert total, f"{repo} has no total_size_bytes in meta.json"
    return total


def shipped_repos() -> list[str]:
    return sorted(str(p.parent.relative_to(HF_CONFIGS)) for p in HF_CONFIGS.glob("*/*/config.json"))


def shared_upstream() -> Path:
    """The upstream directory (tests/upstream.py: WINGSMITH_UPSTREAM_DIR, else ../shared/upstream); the
    caller is skipped with the reason (failed under CI) when it is absent."""
    return require_upstream()
