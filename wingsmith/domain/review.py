"""The rules of a draft review, as pure functions: the workflow's update validator and its signal
handlers call the same `check_review`, so a decision is judged the same whichever way it arrives."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from wingsmith.domain.text import MAX_LIST, CommentText, NameText, SanitizedText, identity_key, same_identity

Decision = Literal["approve", "reject"]
Via = Literal["api", "signal", "timer"]


class Selections(BaseModel):
    """What the approver picks from the evidence: a precision variant and opt-in features."""
    variant: NameText | None = None
    features: list[NameText] = Field(default_factory=list, max_length=MAX_LIST)


class ReviewDecision(BaseModel):
    """The body of `POST /v1/artifacts/{id}/review`."""
    decision: Decision
    comment: CommentText = ""
    draft_version: int = Field(ge=1, description="the draft version the reviewer read")
    selections: Selections = Field(default_factory=Selections)


class ReviewRequest(ReviewDecision):
    """The `review` update: the decision plus who made it (from the API token, never the body)."""
    reviewer: str


class ReviewSignal(BaseModel):
    """The `approve` / `reject` signals, for people deciding from the Temporal UI or CLI. Nothing
    authenticates a signal's sender, so the name is recorded as a claim, marked as coming via Temporal."""
    reviewer: SanitizedText = "unknown"
    comment: SanitizedText = ""
    draft_version: int | None = Field(default=None, description="defaults to the current draft")
    selections: Selections = Field(default_factory=Selections)


class RecordedDecision(BaseModel):
    decision: Literal["approve", "reject", "expire"]
    reviewer: str
    via: Via
    comment: str = ""
    draft_version: int
    selections: Selections = Field(default_factory=Selections)
    decided_at: datetime


class DraftFacts(BaseModel):
    """The part of a draft a review is checked against."""
    version: int
    variants: list[str]
    features: list[str]


class ReviewRefused(Exception):
    """Why a decision cannot be taken. `kind` is stable for API clients and Temporal failure types."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


# Failure types, shared by the workflow (as ApplicationError types) and the API (as HTTP statuses).
NOT_REVIEWABLE = "DraftNotReady"
STALE = "StaleDraftVersion"
DECIDED = "AlreadyDecided"
UNKNOWN_SELECTION = "UnknownSelection"
SELF_APPROVAL = "SelfApproval"
SIGNALS_OFF = "SignalDecisionsDisabled"
UNKNOWN_REVIEWER = "UnknownReviewer"

HTTP_STATUS = {NOT_REVIEWABLE: 409, STALE: 409, DECIDED: 409, UNKNOWN_SELECTION: 422, SELF_APPROVAL: 403,
               SIGNALS_OFF: 403, UNKNOWN_REVIEWER: 403}


def check_review(decision: Decision, reviewer: str, draft_version: int, selections: Selections, *,
                 draft: DraftFacts | None, decided: RecordedDecision | None, requested_by: str,
                 four_eyes: bool) -> None:
    if decided is not None:
        raise ReviewRefused(DECIDED, f"already decided: {decided.decision} by {decided.reviewer}")
    if draft is None:
        raise ReviewRefused(NOT_REVIEWABLE, "the draft is still being built; nothing to review yet")
    if draft_version != draft.version:
        raise ReviewRefused(STALE, f"draft version {draft_version} is stale; the current draft is "
                                   f"version {draft.version}: read it again before deciding")
    if decision == "approve" and four_eyes and same_identity(reviewer, requested_by):
        raise ReviewRefused(SELF_APPROVAL, f"{reviewer} registered this artifact and cannot approve it "
                                           "(four-eyes review is on)")
    if selections.variant is not None and selections.variant not in draft.variants:
        raise ReviewRefused(UNKNOWN_SELECTION, f"unknown variant {selections.variant!r}; the draft has "
                                               f"{', '.join(draft.variants) or 'no variants'}")
    unknown = sorted(set(selections.features) - set(draft.features))
    if unknown:
        raise ReviewRefused(UNKNOWN_SELECTION, f"unknown feature(s) {', '.join(unknown)}; the draft has "
                                               f"{', '.join(draft.features) or 'no features'}")


def check_signal_reviewer(reviewer: str, approvers: list[str], *, requested_by: str, four_eyes: bool) -> None:
    """A signal carries a name, not a credential: anyone with access to Temporal can send any name.
    So the name must at least be one of the plane's approvers, and (four-eyes) not the registrant's,
    compared the way people read names (NFKC, trimmed, casefolded: "Ops" and "ops " are "ops")."""
    if four_eyes and same_identity(reviewer, requested_by):
        raise ReviewRefused(SELF_APPROVAL, f"{reviewer!r} is the registrant's name; a decision by signal "
                                           "must come from someone else (four-eyes review is on)")
    if identity_key(reviewer) not in {identity_key(name) for name in approvers}:
        raise ReviewRefused(UNKNOWN_REVIEWER, f"{reviewer!r} is not an approver of this plane; a signal's name is "
                                              "only a claim, so it must name one (or use the review API)")
