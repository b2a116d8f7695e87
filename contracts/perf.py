"""The perf worker's contract: the activities that ask AIConfigurator for estimates and traffic plans.

They run only on the perf task queue (`wingsmith.domain.config.perf_task_queue`), polled by the perf worker
(worker/perf.py) that `wingsmith up` starts when the `perf` extra is installed. A caller that finds no
perf worker gets no figures and says so (`NOT_INSTALLED`); it never waits on the queue for ever: give
these activities a schedule-to-close timeout.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.perf.estimates import NOT_INSTALLED, Estimate, EstimateRequest
from wingsmith.domain.perf.traffic import CardPlan, TrafficTarget

ACTIVITY_ESTIMATE = "estimate_performance"
ACTIVITY_PLAN_TARGET = "plan_for_traffic_target"

# The ApplicationError type (non-retryable) of a perf worker without AIConfigurator.
ERROR_NOT_INSTALLED = "PerfNotInstalled"

# A draft asks for each card × layout the recipe offers: a few dozen at most.
MAX_REQUESTS = 64
MAX_CARDS = 16

__all__ = ["ACTIVITY_ESTIMATE", "ACTIVITY_PLAN_TARGET", "ERROR_NOT_INSTALLED", "MAX_CARDS",
           "MAX_REQUESTS", "NOT_INSTALLED", "CardPlan", "Estimate", "EstimateInput", "EstimateOutput",
           "EstimateRequest", "PlanningBeat", "TargetInput", "TargetOutput", "TrafficTarget"]


class EstimateInput(BaseModel):
    requests: list[EstimateRequest] = Field(min_length=1, max_length=MAX_REQUESTS)


class EstimateOutput(BaseModel):
    estimates: list[Estimate]


class TargetInput(BaseModel):
    model: str = Field(min_length=1, max_length=200)
    model_commit: str | None = Field(default=None, max_length=64)
    config: dict | None = None
    cards: list[str] = Field(min_length=1, max_length=MAX_CARDS)
    target: TrafficTarget
    backend: str = "vllm"

    @field_validator("cards")
    @classmethod
    def _known_cards(cls, cards: list[str]) -> list[str]:
        return [get_hardware(card).id for card in cards]


class TargetOutput(BaseModel):
    plans: list[CardPlan] = Field(description="one per card, in the order asked")


class PlanningBeat(BaseModel):
    """The heartbeat details of `plan_for_traffic_target`: how far the plan is, read by whoever follows it
    (the API's status URL of a traffic plan, wingsmith/adapters/traffic_plans.py). Details, not a result: a plan that
    is retried starts its beats again."""

    planned: list[str] = Field(default_factory=list, max_length=MAX_CARDS, description="cards planned so far")
    searching: str | None = Field(default=None, description="the card being planned now")
