"""AutoscalerWorkflow (`autoscaler/<workload id>`): a workload's autoscaling loop. Every period an activity reads
the gateway's measurements of the workload's backends and decides (wingsmith/domain/autoscaling.py); each
decision is recorded with its inputs; a scale goes to the workload through its own `scale` update, after the
team's quota was claimed, so placement picks the clusters as for a person's scale. A scale past the team's
budget is held, or with `approval_past_budget` waits for `approve_decision` (like a draft for its review) until
a deadline. The loop ends by itself once the policy is removed or the workload is gone, and continues as new
every `ticks_per_run` decisions so its history stays short."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from contracts import autoscaler as contract
from contracts.autoscaler import (
    AutoscalerInput,
    AutoscalerState,
    AutoscalerStatus,
    DecideInput,
    DecideResult,
    DecisionApproval,
    DecisionRecord,
    Outcome,
    RecordedDecision,
    ScaleAsk,
    ScaleOutcome,
)
from contracts.ids import autoscaler_workflow_id
from wingsmith.domain.autoscaling import Decision, LastChange
from workflows import policies

KEEP_RECENT = 20  # decisions the status shows (the registry keeps them all)


def _loop() -> str:
    """Which loop this is: the same through its continue-as-new runs, another once the policy is removed and set
    again (a new loop under the same id counts its ticks from 1 again). It keys the decisions' records and the
    scale updates, so a new loop's tick 1 is neither taken for the old one's record nor for its update."""
    return workflow.info().first_execution_run_id


@workflow.defn(name=contract.WORKFLOW)
class AutoscalerWorkflow:
    def __init__(self) -> None:
        self.params: AutoscalerInput | None = None
        self.state = AutoscalerState()
        self.waiting: RecordedDecision | None = None
        self.approval: DecisionApproval | None = None

    @workflow.run
    async def run(self, params: AutoscalerInput) -> AutoscalerStatus:
        self.params = params
        self.state = params.state or AutoscalerState()
        for _ in range(params.ticks_per_run):
            try:
                result = await workflow.execute_activity(
                    contract.ACTIVITY_DECIDE, DecideInput(workload_id=params.workload_id, now=workflow.now(),
                                                          last_change=self.state.last_change),
                    result_type=DecideResult, **policies.AUTOSCALER_DECIDE)
            except ActivityError as failed:
                # A tick whose reading failed after its retries (Postgres away for minutes, a bad row) decides
                # nothing; the loop goes on, so a workload's autoscaling does not stop with one bad period.
                workflow.logger.warning("autoscaler of %s skipped a tick: %s", params.workload_id, failed.cause)
                await workflow.sleep(timedelta(seconds=params.period_seconds))
                continue
            if result.stop is not None or result.decision is None:
                workflow.logger.info("autoscaler of %s ends: %s", params.workload_id, result.stop)
                return self.status()
            await self._act(result.decision, result.approval_past_budget)
            await workflow.sleep(timedelta(seconds=params.period_seconds))
        workflow.continue_as_new(params.model_copy(update={"state": self.state}))

    async def _act(self, decision: Decision, approval_past_budget: bool) -> None:
        self.state.ticks += 1
        tick = self.state.ticks
        if decision.action == "hold":
            await self._record(tick, decision, "held")
            return
        outcome = await self._scale(tick, decision, past_budget=False)
        if outcome.outcome == "held_budget" and decision.action == "scale_out" and approval_past_budget:
            outcome = await self._wait_for_approval(tick, decision, outcome)
        if outcome.outcome == "scaled":
            self.state.last_change = LastChange(action=decision.action, at=workflow.now(),
                                                replicas_from=decision.replicas_from, replicas_to=decision.replicas_to)
        await self._record(tick, decision, outcome.outcome, outcome.words)

    async def _scale(self, tick: int, decision: Decision, *, past_budget: bool) -> ScaleOutcome:
        assert self.params is not None
        ask = ScaleAsk(workload_id=self.params.workload_id, replicas=decision.replicas_to, team=self.params.team,
                       past_budget=past_budget, update_id=f"{workflow.info().workflow_id}/{_loop()}/tick/{tick}")
        return await workflow.execute_activity(contract.ACTIVITY_SCALE, ask, result_type=ScaleOutcome,
                                               **policies.AUTOSCALER_SCALE)

    async def _wait_for_approval(self, tick: int, decision: Decision, held: ScaleOutcome) -> ScaleOutcome:
        assert self.params is not None
        self.waiting = RecordedDecision(tick=tick, decision=decision, outcome="waiting_approval", note=held.words)
        self.approval = None
        await self._record(tick, decision, "waiting_approval", held.words, step=f"{_loop()}:{tick}:waiting")
        try:
            await workflow.wait_condition(lambda: self.approval is not None,
                                          timeout=timedelta(seconds=self.params.approval_timeout_seconds))
        except TimeoutError:
            self.waiting = None
            return ScaleOutcome(outcome="held_budget", words=f"{held.words}; no approval within "
                                f"{self.params.approval_timeout_seconds:.0f} s (expired)")
        approval, self.waiting = self.approval, None
        assert approval is not None
        if not approval.approve:
            return ScaleOutcome(outcome="held_budget", words=f"{held.words}; rejected by {approval.by}"
                                + (f": {approval.comment}" if approval.comment else ""))
        outcome = await self._scale(tick, decision, past_budget=True)
        words = f"past the budget, approved by {approval.by}" + (f": {approval.comment}" if approval.comment else "")
        return outcome.model_copy(update={"words": f"{words}; {outcome.words}".strip("; ")})

    async def _record(self, tick: int, decision: Decision, outcome: Outcome, note: str = "",
                      step: str | None = None) -> None:
        assert self.params is not None
        record = DecisionRecord(tick=tick, decision=decision, outcome=outcome, note=note,
                                workload_id=self.params.workload_id,
                                workflow_id=autoscaler_workflow_id(self.params.workload_id),
                                step=step or f"{_loop()}:{tick}")
        self.state.recent = [*self.state.recent, RecordedDecision(tick=tick, decision=decision, outcome=outcome,
                                                                  note=note)][-KEEP_RECENT:]
        await workflow.execute_local_activity(contract.ACTIVITY_RECORD, record, **policies.REGISTRY)

    @workflow.update(name=contract.UPDATE_APPROVE)
    async def approve_decision(self, approval: DecisionApproval) -> AutoscalerStatus:
        self.approval = approval
        return self.status()

    @approve_decision.validator
    def _validate_approval(self, approval: DecisionApproval) -> None:
        if self.waiting is None:
            raise ApplicationError("no decision of this autoscaler waits for an approval",
                                   type=contract.NOTHING_TO_APPROVE)
        if approval.tick != self.waiting.tick:
            raise ApplicationError(f"decision {approval.tick} does not wait for an approval; decision "
                                   f"{self.waiting.tick} does", type=contract.NOTHING_TO_APPROVE)

    @workflow.query(name=contract.QUERY_STATUS)
    def status(self) -> AutoscalerStatus:
        return AutoscalerStatus(workload_id=self.params.workload_id if self.params else "", waiting=self.waiting,
                                recent=list(self.state.recent), last_change=self.state.last_change,
                                ticks=self.state.ticks)
