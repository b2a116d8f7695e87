"""The artifact workflow's contract (`artifact/<org>/<name>@<sha>`): a Hugging Face repository
pinned at a commit, on its way through review. What the API, the artifact workflow, the watch and
their activities exchange, and the names they call each other by."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from contracts.ids import MODEL, SHA, STAGE
from contracts.ids import artifact_id as artifact_id
from contracts.ids import artifact_workflow_id as artifact_workflow_id
from contracts.ids import evidence_tag as evidence_tag
from wingsmith.review import DraftFacts, RecordedDecision
from wingsmith.review import ReviewRequest as ReviewRequest  # the review update's payload
from wingsmith.review import ReviewSignal as ReviewSignal  # the approve and reject signals' payload
from wingsmith.teams import DEFAULT_TEAM

# The workflow's type name and its handlers' names: clients start and call it by these.
WORKFLOW = "ArtifactWorkflow"
QUERY_STATUS = "status"
UPDATE_REVIEW = "review"  # ReviewRequest -> ArtifactStatus (wingsmith.review)
SIGNAL_APPROVE = "approve"  # ReviewSignal
SIGNAL_REJECT = "reject"  # ReviewSignal
SIGNAL_SUPERSEDED = "superseded"  # the artifact id of the draft that replaces it

# Hub answers that no retry can change: the repository or revision does not exist, or is gated.
HUB_MISSING = ["RepoNotFound", "RevisionNotFound", "GatedRepo"]
# ... and, for a registration, a token that cannot be read or a repository that is no model.
HUB_FINAL = [*HUB_MISSING, "HubTokenUnavailable", "MissingConfig", "InvalidSource"]
# The type a failed resolve carries when its cause names none.
RESOLVE_FAILED = "ResolveFailed"

Stage = Literal["resolving", "draft", "approved", "rejected", "expired", "superseded", "failed"]


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


def search_attributes(params: ArtifactWorkflowInput) -> list[SearchAttributePair[str]]:
    """What the artifact is found by in the Temporal UI: its stage, its repository and its commit."""
    return [SearchAttributePair(STAGE, "resolving"), SearchAttributePair(MODEL, params.repo_id),
            SearchAttributePair(SHA, params.sha)]


def start_search_attributes(params: ArtifactWorkflowInput) -> TypedSearchAttributes:
    return TypedSearchAttributes(search_attributes(params))
