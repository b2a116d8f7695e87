"""The watch on upstream: a Temporal Schedule per approved repository and branch
(`watch/<org>/<name>@<branch>`) that checks where the branch points and, on a new commit, opens a new
draft for review. The messages here are shared by the schedule's workflow, its activities and the API;
`draft_diff` says what a new draft changes against the approved artifact."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from wingsmith.artifacts import ReviewPolicy

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
WATCH_PREFIX = "watch/"


def watch_schedule_id(repo_id: str, branch: str) -> str:
    return f"{WATCH_PREFIX}{repo_id}@{branch}"


def watchable(revision: str) -> bool:
    """A branch (or tag) moves; a pinned commit never does, so it has nothing to watch."""
    return not SHA_RE.match(revision)


class WatchInput(BaseModel):
    repo_id: str
    branch: str
    policy: ReviewPolicy = Field(default_factory=ReviewPolicy, description="for the drafts the watch opens")


class EnsureWatchInput(BaseModel):
    watch: WatchInput
    task_queue: str


class UpstreamCheck(BaseModel):
    """Where the branch points now, against the newest approved artifact of the repository."""

    head_sha: str
    approved_id: str | None
    approved_sha: str | None
    known: bool = Field(description="an artifact for the head commit exists already (a draft, or decided)")

    @property
    def moved(self) -> bool:
        return self.approved_sha is not None and self.head_sha != self.approved_sha


class WatchNotice(BaseModel):
    repo_id: str
    branch: str
    approved_id: str | None
    new_artifact_id: str
    head_sha: str


class WatchOutcome(BaseModel):
    repo_id: str
    branch: str
    head_sha: str
    opened: str | None = Field(None, description="the artifact id of the draft the watch opened")
    note: str


# --- what a new draft changes -----------------------------------------------------------------------

def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value} if prefix else {}


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """config.json keys (dotted for nested ones) that were added, removed or changed."""
    a, b = _flatten(old), _flatten(new)
    return [{"key": k, "approved": a.get(k), "new": b.get(k)} for k in sorted(a.keys() | b.keys())
            if a.get(k) != b.get(k) or (k in a) != (k in b)]


def _variants(evidence: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {v["name"]: {"precision": v.get("precision"), "vram_minimum_gb": v.get("vram_minimum_gb"),
                        "checkpoint": v.get("checkpoint")} for v in (evidence or {}).get("variants", [])}


def draft_diff(approved: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What a draft (registry row with its latest draft) changes against the approved artifact: config
    fields, weight bytes, variants and their published floors, and the recipe evidence's catalog."""
    old_p, new_p = approved.get("proposal") or {}, new.get("proposal") or {}
    old_d, new_d = approved.get("draft") or {}, new.get("draft") or {}
    old_v, new_v = _variants(old_d.get("evidence")), _variants(new_d.get("evidence"))
    variants = [{"name": n, "approved": old_v.get(n), "new": new_v.get(n)}
                for n in sorted(old_v.keys() | new_v.keys()) if old_v.get(n) != new_v.get(n)]
    out: dict[str, Any] = {
        "against": approved["id"],
        "config": config_changes(old_p.get("config") or {}, new_p.get("config") or {}),
        "weight_bytes": {"approved": old_p.get("weight_bytes"), "new": new_p.get("weight_bytes")},
        "variants": variants,
        "catalog_version": {"approved": old_d.get("catalog_version"), "new": new_d.get("catalog_version")},
    }
    out["changed"] = sorted(
        [f"config.{c['key']}" for c in out["config"]]
        + (["weight_bytes"] if old_p.get("weight_bytes") != new_p.get("weight_bytes") else [])
        + [f"variant.{v['name']}" for v in variants]
        + (["catalog_version"] if old_d.get("catalog_version") != new_d.get("catalog_version") else []))
    return out
