"""DraftPerformanceWorkflow: a draft's expected performance, after the draft (contracts/draft_performance.py).

The draft is already saved when it starts, so nothing a reviewer waits for depends on it. It asks for one
card × layout at a time, each card's likeliest shape first, and writes each answer onto the draft as it
comes, so the first figures show while the rest are searched.

Without a perf worker it does not give up: the ask stays queued on the perf queue, which costs nothing while
it waits (no timer, no polling, no history), and a perf worker that starts later, even days later, takes it
at once. Meanwhile the draft says why there are no figures and until when they may follow; the wait is
bounded (policies.WAIT_FOR_A_PERF_WORKER), and its end is said too. Whether anybody polls is asked of
Temporal first, so a plane without the extra says so at once. Its timeouts and retries are in
workflows/policies.py, with every workflow's.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutError,
    TimeoutType,
    WorkflowAlreadyStartedError,
)

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
from contracts.traffic_plan import (
    PLAN_TIMEOUT,
    TrafficPlanInput,
    TrafficPlanResult,
    TrafficPlanSlotInput,
    TrafficPlanTurn,
)
from wingsmith.domain.draft_performance import (
    NOT_INSTALLED,
    DraftPerformance,
    PerformanceRow,
    gave_up_waiting,
    rows_of,
    waiting_for_a_perf_worker,
)
from wingsmith.domain.perf.estimates import MODES, EstimateRequest
from workflows import policies


async def _perf_worker_polls(queue: str) -> bool:
    """Asked first, so a plane without the extra answers at once instead of waiting on an unpolled queue."""
    return await workflow.execute_activity(contract.ACTIVITY_PERF_POLLED, PerfPollingInput(task_queue=queue),
                                           result_type=bool, **policies.PERF_POLLED)


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
                **policies.draft_estimate(queue, queued=queued))
            return rows_of(answer.estimates)
        except ActivityError as err:
            if _timed_out(err, TimeoutType.SCHEDULE_TO_START):
                # Not taken: its worker went away, or is busy with other drafts. Say which, then wait for one.
                polled = await _perf_worker_polls(queue)
                await self._save(params, waiting_for_a_perf_worker(polled, queue, self._until()))
                return await self._ask(params, request, queued=True)
            if queued and _timed_out(err, TimeoutType.SCHEDULE_TO_CLOSE):
                return gave_up_waiting(queue, policies.WAIT_FOR_A_PERF_WORKER)
            why = _gave_no_answer(err)
            if why is None:
                return DraftPerformance(status="unavailable", reason=NOT_INSTALLED)
            return _unanswered(request, why)

    @staticmethod
    def _until() -> datetime:
        return workflow.now() + policies.WAIT_FOR_A_PERF_WORKER

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
                                                     **policies.perf_search(params.perf_task_queue))
        except ActivityError as err:
            return TrafficPlanResult(unavailable=_gave_no_answer(err) or NOT_INSTALLED)
        return TrafficPlanResult(plans=answer.plans)


@workflow.defn(name=traffic_contract.SLOT_WORKFLOW)
class TrafficPlanSlotWorkflow:
    """One of a team's traffic plans in flight (its id is the slot, contracts/traffic_plan.py): runs the plan
    as its child under the plan's own id, so the slot is held exactly as long as the plan runs. When an
    identical plan already runs (another request, maybe another team's, started it first) it says so and
    ends at once: the caller waits for that plan, and the slot is free again."""

    @workflow.run
    async def run(self, params: TrafficPlanSlotInput) -> TrafficPlanTurn:
        try:
            plan = await workflow.start_child_workflow(TrafficPlanWorkflow.run, params.plan, id=params.plan_id,
                                                       execution_timeout=PLAN_TIMEOUT)
        except WorkflowAlreadyStartedError:
            return TrafficPlanTurn(joined=params.plan_id)
        return TrafficPlanTurn(result=await plan)
