"""The traffic plan workflow (`traffic-plan/<uuid>`): the API asks the perf queue, through it, for the
smallest configuration per card that meets a workload's traffic target (contracts.perf.ACTIVITY_PLAN_TARGET).
Without a perf worker polling the queue it answers at once with the reason instead of plans."""

from __future__ import annotations

from pydantic import BaseModel, Field

from contracts.perf import TargetInput
from wingsmith.perf.traffic import CardPlan

WORKFLOW = "TrafficPlanWorkflow"


class TrafficPlanInput(BaseModel):
    ask: TargetInput
    perf_task_queue: str


class TrafficPlanResult(BaseModel):
    plans: list[CardPlan] = Field(default_factory=list)
    unavailable: str | None = Field(default=None, description="why there are no plans (the perf extra is absent)")
