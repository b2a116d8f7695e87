"""DraftPerformanceWorkflow: a draft's expected performance, after the draft (contracts/draft_performance.py).

The draft is already saved when it starts, so nothing a reviewer waits for depends on it. It first asks
Temporal whether a perf worker polls the perf queue (none: the extra is not installed, said on the draft
at once), then asks for one card × layout at a time, the draft's own shape first, and writes each answer
onto the draft as it comes, so the first figures show while the rest are searched.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

from contracts import draft_performance as contract
from contracts import traffic_plan as traffic_contract
from contracts.draft_performance import DraftPerformanceInput, PerfPollingInput, SavePerformanceInput
from contracts.perf import (
    ACTIVITY_ESTIMATE,
    ACTIVITY_PLAN_TARGET,
    ERROR_NOT_INSTALLED,
    EstimateInput,
    EstimateOutput,
    TargetOutput,
)
from contracts.traffic_plan import TrafficPlanInput, TrafficPlanResult
from wingsmith.draft_performance import NOT_INSTALLED, DraftPerformance, PerformanceRow, rows_of
from wingsmith.perf.estimates import MODES, EstimateRequest
from workflows import policies


# A cold search holds the CPU for tens of seconds to minutes, and searches take turns on the perf worker:
# generous for one, but bounded, so a perf worker that went away ends the wait. Its ticker heartbeats every
# 5 s, so a dead worker is noticed within the heartbeat timeout.
def _estimate(task_queue: str) -> workflow.ActivityConfig:
    return workflow.ActivityConfig(
        task_queue=task_queue, schedule_to_close_timeout=timedelta(hours=2), heartbeat_timeout=timedelta(minutes=2),
        retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=[ERROR_NOT_INSTALLED]))


_POLLED = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=30),
                                  retry_policy=RetryPolicy(maximum_attempts=5))


async def _perf_worker_polls(queue: str) -> bool:
    """Asked first, so a plane without the extra answers at once instead of waiting on an unpolled queue."""
    return await workflow.execute_activity(contract.ACTIVITY_PERF_POLLED, PerfPollingInput(task_queue=queue),
                                           result_type=bool, **_POLLED)


def _gave_no_answer(err: ActivityError) -> str | None:
    """None when the perf worker lacks the extra (say so); else why it gave no answer, in words."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == ERROR_NOT_INSTALLED:
        return None
    return f"the perf worker gave no answer: {cause.message if isinstance(cause, FailureError) else err}"


@workflow.defn(name=contract.WORKFLOW)
class DraftPerformanceWorkflow:
    @workflow.run
    async def run(self, params: DraftPerformanceInput) -> DraftPerformance:
        if not await _perf_worker_polls(params.perf_task_queue):
            return await self._save(params, DraftPerformance(status="unavailable", reason=NOT_INSTALLED))
        rows: list[PerformanceRow] = []
        for request in params.requests:
            try:
                answer = await workflow.execute_activity(
                    ACTIVITY_ESTIMATE, EstimateInput(requests=[request]), result_type=EstimateOutput,
                    **_estimate(params.perf_task_queue))
                found = rows_of(answer.estimates)
            except ActivityError as err:
                why = _gave_no_answer(err)
                if why is None:
                    return await self._save(params, DraftPerformance(status="unavailable", reason=NOT_INSTALLED))
                found = _unanswered(request, why)
            rows += found
            await self._save(params, DraftPerformance(status="pending", entries=found))
        return await self._save(params, DraftPerformance(status="estimated", entries=[]), rows)

    async def _save(self, params: DraftPerformanceInput, performance: DraftPerformance,
                    rows: list[PerformanceRow] | None = None) -> DraftPerformance:
        # Only the new rows travel (the registry merges them): the history grows by one answer per step.
        await workflow.execute_local_activity(contract.ACTIVITY_SAVE_PERFORMANCE, SavePerformanceInput(
            artifact_id=params.artifact_id, version=params.version, performance=performance), **policies.REGISTRY)
        return performance.model_copy(update={"entries": rows}) if rows is not None else performance


def _unanswered(request: EstimateRequest, reason: str) -> list[PerformanceRow]:
    return [PerformanceRow(card=request.card, layout=request.layout, mode=mode, backend=request.backend,
                           isl=request.isl, osl=request.osl, reason=reason) for mode in MODES]


@workflow.defn(name=traffic_contract.WORKFLOW)
class TrafficPlanWorkflow:
    """A workload's traffic target, planned per card on the perf queue; the API waits for it."""

    @workflow.run
    async def run(self, params: TrafficPlanInput) -> TrafficPlanResult:
        if not await _perf_worker_polls(params.perf_task_queue):
            return TrafficPlanResult(unavailable=NOT_INSTALLED)
        try:
            answer = await workflow.execute_activity(ACTIVITY_PLAN_TARGET, params.ask, result_type=TargetOutput,
                                                     **_estimate(params.perf_task_queue))
        except ActivityError as err:
            return TrafficPlanResult(unavailable=_gave_no_answer(err) or NOT_INSTALLED)
        return TrafficPlanResult(plans=answer.plans)
