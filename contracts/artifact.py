"""The artifact workflow's contract (`artifact/<org>/<name>@<sha>`): a Hugging Face repository
pinned at a commit, on its way through review. What the API, the artifact workflow, the watch and
their activities exchange, and the names they call each other by (activities/artifact.py and
activities/follow.py register theirs under the names here)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from contracts.ids import MODEL, SHA, STAGE
from contracts.ids import artifact_id as artifact_id
from contracts.ids import artifact_workflow_id as artifact_workflow_id
from contracts.ids import evidence_tag as evidence_tag
from wingsmith.domain.drafts import DraftContent
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.recipes import Evidence
from wingsmith.domain.review import DraftFacts, RecordedDecision
from wingsmith.domain.review import ReviewRequest as ReviewRequest  # the review update's payload
from wingsmith.domain.review import ReviewSignal as ReviewSignal  # the approve and reject signals' payload
from wingsmith.domain.teams import DEFAULT_TEAM

# The workflow's type name and its handlers' names: clients start and call it by these.
WORKFLOW = "ArtifactWorkflow"
QUERY_STATUS = "status"
UPDATE_REVIEW = "review"  # ReviewRequest -> ArtifactStatus (wingsmith.domain.review)
SIGNAL_APPROVE = "approve"  # ReviewSignal
SIGNAL_REJECT = "reject"  # ReviewSignal
SIGNAL_SUPERSEDED = "superseded"  # the artifact id of the draft that replaces it

# Its activities (names recorded in histories: never rename one).
ACTIVITY_RESOLVE = "resolve_artifact"  # ResolveArtifactInput -> ArtifactProposal
ACTIVITY_GATHER_EVIDENCE = "gather_evidence"  # EvidenceInput -> EvidenceResult
ACTIVITY_SIZE_DRAFT = "size_draft"  # SizeDraftInput -> DraftContent
ACTIVITY_SAVE_DRAFT = "save_draft"  # SaveDraftInput -> SaveDraftResult
ACTIVITY_RECORD_DECISION = "record_decision"  # RecordDecisionInput -> None
ACTIVITY_RECORD_EVENT = "record_artifact_event"  # ArtifactEventInput -> None
ACTIVITY_SET_STATE = "set_artifact_state"  # ArtifactStateInput -> None
ACTIVITY_REMIND_REVIEWERS = "remind_reviewers"  # ReminderInput -> None
ACTIVITY_UPGRADE_FOLLOWERS = "follow.upgrade_followers"  # FollowApproval -> FollowOutcome (activities/follow.py)
# (the watch's schedule, ensured on approval: contracts.watch.ACTIVITY_ENSURE_SCHEDULE)

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
    kube_task_queue: str | None = Field(None, description="where the registered clusters' cards are read live for "
                                        "the draft's sizing; None: only their manual inventories count")


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


# --- its activities' payloads ----------------------------------------------------------------------


class ResolveArtifactInput(BaseModel):
    repo_id: str
    sha: str


class EvidenceInput(BaseModel):
    repo_id: str
    catalog_version: str | None = None  # None: the catalog in force


class EvidenceResult(BaseModel):
    catalog_version: str
    evidence: Evidence | None


class SizeDraftInput(BaseModel):
    proposal: ArtifactProposal
    evidence: Evidence | None
    # The cards the registered clusters have, so the draft sizes on one of them first (None: not known).
    fleet_cards: list[str] | None = None


class SaveDraftInput(BaseModel):
    workflow_id: str
    artifact_id: str
    revision: str
    requested_by: str
    version: int
    proposal: ArtifactProposal
    catalog_version: str
    content: DraftContent


class SaveDraftResult(BaseModel):
    superseded_workflows: list[str]


class RecordDecisionInput(BaseModel):
    workflow_id: str
    artifact_id: str
    decision: RecordedDecision


class ArtifactEventInput(BaseModel):
    workflow_id: str
    artifact_id: str
    step: str
    kind: str
    actor: str = "system"
    detail: dict = {}


class ArtifactStateInput(BaseModel):
    workflow_id: str
    artifact_id: str
    repo_id: str
    revision: str
    sha: str
    requested_by: str
    state: str
    step: str
    detail: dict = {}


class ReminderInput(BaseModel):
    workflow_id: str
    artifact_id: str
    deadline: datetime
    reminder: int


class FollowApproval(BaseModel):
    workflow_id: str = Field(description="the approved artifact's workflow: the events' source")
    artifact_id: str
    approver: str


class FollowOutcome(BaseModel):
    upgrading: list[str] = Field(default_factory=list, description="workloads that accepted the upgrade")
    refused: dict[str, str] = Field(default_factory=dict, description="workload -> why it refused")
    told: list[str] = Field(default_factory=list, description="manual workloads told a newer version exists")
