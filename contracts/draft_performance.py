"""The draft's performance workflow (`artifact/<org>/<name>@<sha>/performance/<version>`): started by the
artifact workflow once the draft is saved, it asks the perf queue for AIConfigurator's estimates, one
card × layout at a time, and writes each answer onto the draft. The draft never waits for it; without a
perf worker polling the queue, the draft says so instead of figures."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.domain.draft_performance import MAX_ESTIMATES, DraftPerformance
from wingsmith.domain.perf.estimates import EstimateRequest

WORKFLOW = "DraftPerformanceWorkflow"
# Its activities, on the main queue (the estimates themselves: contracts.perf.ACTIVITY_ESTIMATE on the perf queue).
ACTIVITY_PERF_POLLED = "perf_worker_polling"  # PerfPollingInput -> bool
ACTIVITY_SAVE_PERFORMANCE = "save_draft_performance"  # SavePerformanceInput -> None


def performance_workflow_id(artifact_workflow_id: str, version: int) -> str:
    return f"{artifact_workflow_id}/performance/{version}"


class DraftPerformanceInput(BaseModel):
    artifact_id: str
    version: int
    requests: list[EstimateRequest] = Field(max_length=MAX_ESTIMATES)
    perf_task_queue: str


class PerfPollingInput(BaseModel):
    task_queue: str


class SavePerformanceInput(BaseModel):
    artifact_id: str
    version: int
    performance: DraftPerformance = Field(description="rows replace those of the same card × layout × mode")
