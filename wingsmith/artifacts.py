"""Artifacts: a Hugging Face repository pinned at a commit, on its way through review.
The models here are what the API, the artifact workflow and its activities exchange."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from wingsmith.review import DraftFacts, RecordedDecision
from wingsmith.teams import DEFAULT_TEAM

Stage = Literal["resolving", "draft", "approved", "rejected", "expired", "superseded", "failed"]


def evidence_tag(catalog_version: str) -> str:
    """`recipes-<content hash>` of a catalog version: names a draft opened for new recipe evidence."""
    return "recipes-" + catalog_version.rsplit(".", 1)[-1]


def artifact_id(repo_id: str, sha: str, catalog_version: str | None = None) -> str:
    """`<org>/<name>@<sha>`; a draft the watch opened because the recipe catalog changed the model's
    evidence (same commit) is `<org>/<name>@<sha>+recipes-<catalog hash>`, a review of its own."""
    base = f"{repo_id}@{sha}"
    return f"{base}+{evidence_tag(catalog_version)}" if catalog_version else base


def artifact_workflow_id(repo_id: str, sha: str, catalog_version: str | None = None) -> str:
    return f"artifact/{artifact_id(repo_id, sha, catalog_version)}"


class ReviewPolicy(BaseModel):
    deadline_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    # Reminders go out this long before the deadline (those already past at draft time are skipped).
    remind_before_seconds: list[int] = Field(default_factory=lambda: [24 * 3600, 3600])
    four_eyes: bool = True
    signal_decisions: bool = True
    # The names a signal may decide under: the plane's approvers (names only, never tokens). A signal
    # carries no credential, so a name outside this list is refused; so is the registrant's.
    signal_reviewers: list[str] = Field(default_factory=list)


class ArtifactWorkflowInput(BaseModel):
    repo_id: str
    revision: str
    sha: str
    requested_by: str
    # The artifact is the organisation's; the team is the registrant's, and owns the branch's watch.
    team: str = DEFAULT_TEAM
    policy: ReviewPolicy = Field(default_factory=ReviewPolicy)
    catalog_version: str | None = Field(None, description="set when the watch opened this draft for new recipe "
                                        "evidence at an approved commit: the catalog version to read it from")


class RefusedDecision(BaseModel):
    via: Literal["api", "signal"]
    decision: str
    reviewer: str
    reason: str
    kind: str
    at: datetime


class ArtifactStatus(BaseModel):
    """The `status` query."""
    artifact_id: str
    stage: Stage
    requested_by: str
    draft: DraftFacts | None = None
    deadline: datetime | None = None
    decision: RecordedDecision | None = None
    refused: list[RefusedDecision] = Field(default_factory=list)
    reminders_sent: int = 0
    failure: str | None = None


class ArtifactOutcome(BaseModel):
    artifact_id: str
    stage: Stage
    decision: RecordedDecision | None = None
