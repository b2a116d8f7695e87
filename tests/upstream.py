"""Where the tests' upstream tier finds the full upstream snapshots (Dynamo recipes and CRDs, vLLM
recipes, published Hugging Face configs): `WINGSMITH_UPSTREAM_DIR`, else `../shared/upstream` beside
the repository. The plane itself never reads them; tests that check the importers and the shipped
builds against them do.

Missing data skips those tests with the reason and how to provide it, except under `CI=true`,
where it fails them: CI always has the data, so a skip there would hide a broken setup.
The directory is read when this module is imported, before the harness clears `WINGSMITH_*`.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

UPSTREAM_ENV = "WINGSMITH_UPSTREAM_DIR"
DEFAULT_UPSTREAM = Path(__file__).resolve().parents[2] / "shared" / "upstream"
UPSTREAM = Path(os.environ[UPSTREAM_ENV]).expanduser() if os.environ.get(UPSTREAM_ENV) else DEFAULT_UPSTREAM
HUB_SNAPSHOT = Path(__file__).resolve().parents[1] / "sim" / "hub" / "snapshot.json"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_reason(path: Path) -> str:
    return (f"upstream tier: {path} not found. Point {UPSTREAM_ENV} at a copy of the team's upstream "
            "snapshot (dynamo/, vllm-recipes/, hf-configs/, each with its SOURCE.md), or place it at "
            f"{DEFAULT_UPSTREAM}")


def require_upstream(*parts: str) -> Path:
    """The path under the upstream directory, or skip (fail under CI) the caller.

    Safe at module level: a test module or conftest calling it while being collected is skipped
    whole, with the reason."""
    path = UPSTREAM.joinpath(*parts)
    if path.exists():
        return path
    if IN_CI:
        pytest.fail(missing_reason(path) + " (CI=true: the upstream tier must run)", pytrace=False)
    pytest.skip(missing_reason(path), allow_module_level=True)


@cache
def _snapshot_models() -> dict[str, dict]:
    return json.loads(HUB_SNAPSHOT.read_text())["models"]


def snapshot_repos() -> list[str]:
    """Every model the shipped Hub snapshot holds (the same set as upstream's hf-configs)."""
    return sorted(_snapshot_models())


def snapshot_config_text(repo_id: str) -> str:
    """A model's config.json, byte for byte as published and as the shipped snapshot holds it."""
    files = _snapshot_models()[repo_id]["files"]
    return next(f["content"] for f in files if f["path"] == "config.json")


def snapshot_config(repo_id: str) -> dict:
    """A model's published config.json as the repository's own Hub snapshot ships it: what tests use
    when they need a real config but not the upstream tree. A fresh copy (tests may modify it)."""
    return json.loads(snapshot_config_text(repo_id))


def snapshot_meta(repo_id: str) -> dict:
    """The published figures of upstream's meta.json, as the shipped snapshot carries them:
    `total_size_bytes` (None where upstream publishes none and the snapshot's total is derived),
    `parameters` (None when unpublished) and `parameters_total`. tests/hub/test_snapshot.py checks
    them against upstream's meta.json in the upstream tier."""
    model = _snapshot_models()[repo_id]
    counts = model["safetensors"] or {}
    return {"total_size_bytes": model["weight_total"] if model["weight_total_kind"] == "published" else None,
            "parameters": dict(counts["parameters"]) if counts.get("parameters") else None,
            "parameters_total": counts.get("total")}
