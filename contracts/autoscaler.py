"""The autoscaler's contract (`autoscaler/<workload id>`): one durable loop per workload with an autoscaling
policy. Its input and state (carried across continue-as-new), the approval update, the status query, and the
names and payloads of its activities (activities/autoscaler.py registers them under these names)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from contracts.ids import autoscaler_workflow_id as autoscaler_workflow_id
from wingsmith.domain.autoscaling import Decision, LastChange
from wingsmith.domain.teams import DEFAULT_TEAM

WORKFLOW = "AutoscalerWorkflow"
QUERY_STATUS = "status"  # -> AutoscalerStatus
UPDATE_APPROVE = "approve_decision"  # DecisionApproval -> AutoscalerStatus

# Why an approval is refused (`ApplicationError` type).
NOTHING_TO_APPROVE = "NothingToApprove"

# Its activities (names recorded in histories: never rename one).
ACTIVITY_DECIDE = "autoscaler.decide"  # DecideInput -> DecideResult (reads the measurements, decides: read-only)
ACTIVITY_SCALE = "autoscaler.scale"  # ScaleAsk -> ScaleOutcome (the quota's claim, then the workload's scale)
ACTIVITY_RECORD = "autoscaler.record"  # DecisionRecord -> None

# What came of a decision, as the audit shows it.
Outcome = Literal["held", "scaled", "waiting_approval", "held_quota", "held_budget", "refused", "rejected",
                  "expired"]


class RecordedDecision(BaseModel):
    tick: int
    decision: Decision
    outcome: Outcome
    note: str = ""


class AutoscalerState(BaseModel):
    ticks: int = Field(default=0, description="decisions taken over every run: numbers them")
    last_change: LastChange | None = None
    recent: list[RecordedDecision] = Field(default_factory=list, description="the last few, newest last")


class AutoscalerInput(BaseModel):
    workload_id: str = Field(min_length=1)
    team: str = DEFAULT_TEAM
    period_seconds: float = Field(default=30, gt=0, le=3600)
    approval_timeout_seconds: float = Field(default=3600, gt=0, le=7 * 86_400,
                                            description="a decision past the budget waits this long for an approval")
    ticks_per_run: int = Field(default=120, ge=1, le=10_000, description="continue as new after this many")
    state: AutoscalerState | None = None  # set when continuing as new


class DecideInput(BaseModel):
    workload_id: str
    now: datetime
    last_change: LastChange | None = None


class DecideResult(BaseModel):
    """The decision, or why the loop ends (the policy removed, the workload gone)."""
    decision: Decision | None = None
    approval_past_budget: bool = False
    stop: str | None = None


class ScaleAsk(BaseModel):
    workload_id: str
    replicas: int = Field(ge=1, le=256)
    team: str = DEFAULT_TEAM
    requested_by: str = "autoscaler"
    past_budget: bool = Field(default=False, description="an approver let this one go past the team's budget")
    update_id: str = Field(description="the scale update's id: sent again, it is the same update")


class ScaleOutcome(BaseModel):
    outcome: Literal["scaled", "held_quota", "held_budget", "refused"]
    words: str = ""


class DecisionRecord(RecordedDecision):
    """A decision as the registry keeps it: the workload's, by the autoscaler's workflow id and step."""
    workload_id: str
    workflow_id: str
    step: str


class DecisionApproval(BaseModel):
    tick: int = Field(ge=1, description="the decision waiting (its tick, as the status shows it)")
    approve: bool = True
    by: str = "unknown"
    comment: str = Field(default="", max_length=2000)


class AutoscalerStatus(BaseModel):
    workload_id: str
    waiting: RecordedDecision | None = Field(default=None, description="the decision waiting for an approval")
    recent: list[RecordedDecision] = Field(default_factory=list)
    last_change: LastChange | None = None
    ticks: int = 0
