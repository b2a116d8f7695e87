"""The traffic plan workflows: the API asks the perf queue, through them, for the smallest configuration per
card that meets a workload's traffic target (contracts.perf.ACTIVITY_PLAN_TARGET). Without a perf worker
polling the queue the plan answers at once with the reason instead of plans.

Two workflows, so that planning by load is shared and fair between teams (docs/planning-by-load.md):
- `TrafficPlanWorkflow`, id `traffic-plan/<key>`: one plan, its id a digest of everything asked, so an
  identical plan in flight is joined, never searched twice at once.
- `TrafficPlanSlotWorkflow`, id `traffic-plan-slot/<team>/<n>`, n below the team's bound: one of a team's
  plans in flight. Temporal runs one workflow per id at a time, so the bound holds across every API
  replica without a lock or a table; the slot is free again when its plan ends, whoever waited for it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from pydantic import BaseModel, Field

from contracts.perf import TargetInput
from wingsmith.domain.perf.traffic import CardPlan

WORKFLOW = "TrafficPlanWorkflow"
SLOT_WORKFLOW = "TrafficPlanSlotWorkflow"
# How long a plan may run (its one search waits its turn on the perf queue, then runs for minutes); its slot
# lives a little longer, so a plan that runs out of time still ends before its slot and says so.
PLAN_TIMEOUT = timedelta(hours=2)
SLOT_TIMEOUT = PLAN_TIMEOUT + timedelta(minutes=1)


class TrafficPlanInput(BaseModel):
    ask: TargetInput
    perf_task_queue: str


class TrafficPlanResult(BaseModel):
    plans: list[CardPlan] = Field(default_factory=list)
    unavailable: str | None = Field(default=None, description="why there are no plans (the perf extra is absent)")


class TrafficPlanSlotInput(BaseModel):
    plan_id: str = Field(description="the plan's own workflow id (plan_workflow_id)")
    plan: TrafficPlanInput


class TrafficPlanTurn(BaseModel):
    """A slot's answer: the plan's result, or the id of the identical plan already running (then the slot
    ended at once, and the caller waits for that plan instead)."""

    result: TrafficPlanResult | None = None
    joined: str | None = None


def plan_key(params: TrafficPlanInput) -> str:
    """A digest of everything the plan's answer depends on (model, commit, config, cards, target, backend and
    the queue that answers), in a canonical form: two asks with the same key get the same plans."""
    canonical = json.dumps(params.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def plan_workflow_id(params: TrafficPlanInput) -> str:
    return f"traffic-plan/{plan_key(params)}"


def slot_workflow_id(team: str, slot: int) -> str:
    return f"traffic-plan-slot/{team}/{slot}"
