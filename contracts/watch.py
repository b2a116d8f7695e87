"""The watch's contract: one run of the watch on upstream (`WatchWorkflow`), started by the Temporal
Schedule `watch/<org>/<name>@<branch>` that the artifact workflow ensures once a draft is approved.
Its schedule id, memo (its owner), input, check, notice and outcome."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from contracts.artifact import ReviewPolicy
from wingsmith.domain.teams import DEFAULT_TEAM

WORKFLOW = "WatchWorkflow"

# Its activities, and the one the artifact workflow calls on approval (activities/watch.py; names
# recorded in histories: never rename one).
ACTIVITY_CHECK = "watch.check"  # WatchInput -> UpstreamCheck
ACTIVITY_NOTIFY = "watch.notify"  # WatchNotice -> None
ACTIVITY_ENSURE_SCHEDULE = "watch.ensure_schedule"  # EnsureWatchInput -> str (the schedule id)

WATCH_PREFIX = "watch/"


def watch_schedule_id(repo_id: str, branch: str) -> str:
    return f"{WATCH_PREFIX}{repo_id}@{branch}"


class WatchInput(BaseModel):
    repo_id: str
    branch: str
    policy: ReviewPolicy = Field(default_factory=ReviewPolicy, description="for the drafts the watch opens")
    kube_task_queue: str | None = Field(None, description="where the drafts it opens read the fleet's cards live "
                                        "(as a registered draft does); None: manual inventories only")


class EnsureWatchInput(BaseModel):
    watch: WatchInput
    task_queue: str
    # Who made the watch (the registrant of its first approved artifact) and the team that owns it.
    requested_by: str = "unknown"
    team: str = DEFAULT_TEAM


def watch_memo(params: EnsureWatchInput) -> dict[str, str]:
    """What a watch's schedule records about its owner (its memo: the API lists and guards by it)."""
    return {"team": params.team, "created_by": params.requested_by}


def watch_team(memo: Any) -> str:
    """The team that owns a watch, from its schedule's memo (watches made before teams: the default one)."""
    team = memo.get("team") if isinstance(memo, dict) else None
    return team if isinstance(team, str) and team else DEFAULT_TEAM


class UpstreamCheck(BaseModel):
    """Where the branch points now, and the recipe catalog in force, against the newest approved
    artifact of the repository."""

    head_sha: str
    approved_id: str | None
    approved_sha: str | None
    known: bool = Field(description="an artifact for the head commit exists already (a draft, or decided)")
    catalog_version: str = Field("", description="the recipe catalog in force at this run")
    approved_catalog_version: str | None = None
    evidence_moved: bool = Field(False, description="the catalog in force says something else about this model "
                                 "than the approved draft's evidence")
    evidence_known: bool = Field(False, description="a draft for that evidence exists already")

    @property
    def moved(self) -> bool:
        return self.approved_sha is not None and self.head_sha != self.approved_sha


class WatchNotice(BaseModel):
    repo_id: str
    branch: str
    approved_id: str | None
    new_artifact_id: str
    head_sha: str
    reason: Literal["new commit", "recipe catalog"] = "new commit"
    catalog_version: str | None = None


class WatchOutcome(BaseModel):
    repo_id: str
    branch: str
    head_sha: str
    catalog_version: str = Field("", description="the recipe catalog in force when this run looked")
    opened: str | None = Field(None, description="the artifact id of the draft the watch opened")
    note: str
