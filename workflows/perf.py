"""DraftPerformanceWorkflow: a draft's expected performance, after the draft (contracts/draft_performance.py).

The draft is already saved when it starts, so nothing a reviewer waits for depends on it. It asks for one
card × layout at a time, each card's likeliest shape first, and writes each answer onto the draft as it
comes, so the first figures show while the rest are searched.

Without a perf worker it does not give up: the ask stays queued on the perf queue, which costs nothing while
it waits (no timer, no polling, no history), and a perf worker that starts later, even days later, takes it
at once. Meanwhile the draft says why there are no figures and until when they may follow; the wait is
bounded (WAIT_FOR_A_PERF_WORKER), and its end is said too. Whether anybody polls is asked of Temporal first,
so a plane without the extra says so at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, TimeoutError, TimeoutType

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
from wingsmith.draft_performance import (
    NOT_INSTALLED,
    DraftPerformance,
    PerformanceRow,
    gave_up_waiting,
    rows_of,
    waiting_for_a_perf_worker,
)
from wingsmith.perf.estimates import MODES, EstimateRequest
from workflows import policies

# A cold search holds the CPU for tens of seconds to minutes, and searches take turns on the perf worker:
# generous for one, but bounded. Its ticker heartbeats every 5 s, so a dead worker is noticed within the
# heartbeat timeout.
_ONE_SEARCH = timedelta(hours=2)
_HEARTBEAT = timedelta(minutes=2)
_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[ERROR_NOT_INSTALLED])
# How long a draft's estimates stay queued for a perf worker that is not there: two review deadlines.
WAIT_FOR_A_PERF_WORKER = timedelta(days=14)
# While a perf worker polls, an ask it has not taken within this long finds it gone or busy: the draft says which.
_TAKEN_WITHIN = timedelta(minutes=5)


def _estimate(task_queue: str) -> workflow.ActivityConfig:
    return workflow.ActivityConfig(task_queue=task_queue, schedule_to_close_timeout=_ONE_SEARCH,
                                   heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY)


def _draft_estimate(task_queue: str, *, queued: bool) -> workflow.ActivityConfig:
    """A draft's ask: `queued` waits on the queue for a perf worker (bounded); otherwise one that polls is
    expected to take it within minutes, and a schedule-to-start timeout says it did not."""
    config = workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=_ONE_SEARCH,
                                     heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY)
    if queued:
        config["schedule_to_close_timeout"] = WAIT_FOR_A_PERF_WORKER + _ONE_SEARCH
    else:
        config["schedule_to_start_timeout"] = _TAKEN_WITHIN
    return config


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


def _timed_out(err: ActivityError, kind: TimeoutType) -> bool:
    return isinstance(err.cause, TimeoutError) and err.cause.type == kind


@workflow.defn(name=contract.WORKFLOW)
class DraftPerformanceWorkflow:
    @workflow.run
    async def run(self, params: DraftPerformanceInput) -> DraftPerformance:
        queued = not await _perf_worker_polls(params.perf_task_queue)
        if queued:
            await self._save(params, waiting_for_a_perf_worker(False, params.perf_task_queue, self._until()))
        rows: list[PerformanceRow] = []
        for request in params.requests:
            found = await self._ask(params, request, queued=queued)
            if isinstance(found, DraftPerformance):  # no perf worker will answer: said, and the end
                return await self._save(params, found, rows)
            queued = False  # a perf worker answered: it is there for the next ask
            rows += found
            await self._save(params, DraftPerformance(status="pending", entries=found))
        return await self._save(params, DraftPerformance(status="estimated", entries=[]), rows)

    async def _ask(self, params: DraftPerformanceInput, request: EstimateRequest, *,
                   queued: bool) -> list[PerformanceRow] | DraftPerformance:
        """The rows of one card × layout, or what the draft says when no perf worker will answer."""
        queue = params.perf_task_queue
        try:
            answer = await workflow.execute_activity(
                ACTIVITY_ESTIMATE, EstimateInput(requests=[request]), result_type=EstimateOutput,
                **_draft_estimate(queue, queued=queued))
            return rows_of(answer.estimates)
        except ActivityError as err:
            if _timed_out(err, TimeoutType.SCHEDULE_TO_START):
                # Not taken: its worker went away, or is busy with other drafts. Say which, then wait for one.
                polled = await _perf_worker_polls(queue)
                await self._save(params, waiting_for_a_perf_worker(polled, queue, self._until()))
                return await self._ask(params, request, queued=True)
            if queued and _timed_out(err, TimeoutType.SCHEDULE_TO_CLOSE):
                return gave_up_waiting(queue, WAIT_FOR_A_PERF_WORKER)
            why = _gave_no_answer(err)
            if why is None:
                return DraftPerformance(status="unavailable", reason=NOT_INSTALLED)
            return _unanswered(request, why)

    @staticmethod
    def _until() -> datetime:
        return workflow.now() + WAIT_FOR_A_PERF_WORKER

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
