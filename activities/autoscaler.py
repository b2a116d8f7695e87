"""The autoscaler's activities: read the workload's policy, state and measurements and decide (read-only, so
repeating it is harmless); claim the team's quota and send the workload its `scale` update (the same update a
person's PATCH sends, with an update id of the tick, so a retry is the same update); record a decision (keyed
by the autoscaler's workflow id and tick)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from activities.registry import registry_pool
from contracts import autoscaler as contract
from contracts import workload as workload_contract
from contracts.autoscaler import DecideInput, DecideResult, DecisionRecord, ScaleAsk, ScaleOutcome
from contracts.ids import workload_workflow_id
from contracts.workload import ScaleRequest
from wingsmith.adapters import quota_claims
from wingsmith.adapters.store import autoscaling as store
from wingsmith.domain.autoscaling import decide

# Where a workload no longer scales: the loop ends. Others (rolling out, scaling, degraded) are held.
GONE_STATES = ("deleting", "deleted", "failed")
_ACCEPTED_GRACE_SECONDS = 1.0


class AutoscalerActivities:
    def __init__(self, db: asyncpg.Pool | None):
        self.db = db

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    @activity.defn(name=contract.ACTIVITY_DECIDE)
    async def decide(self, params: DecideInput) -> DecideResult:
        pool = self._pool()
        found = await store.policy_of(pool, params.workload_id)
        if found is None:
            return DecideResult(stop="the workload has no autoscaling policy any more")
        policy = found[0]
        workload = await store.workload_now(pool, params.workload_id)
        if workload is None or workload["state"] in GONE_STATES:
            return DecideResult(stop=f"the workload is {workload['state'] if workload else 'gone'}")
        seconds = max(policy.scale_up_window_s, policy.scale_down_window_s)
        samples = await store.samples_of(pool, params.workload_id, now=params.now, seconds=seconds)
        decision = decide(samples, now=params.now, replicas=workload["replicas"], policy=policy,
                          plan_capacity=workload["capacity"], last_change=params.last_change)
        if decision.action != "hold" and workload["state"] != "serving":
            decision = decision.model_copy(update={
                "action": "hold", "replicas_to": decision.replicas_from,
                "reasons": [*decision.reasons, f"but the workload is {workload['state']}: it scales once serving"]})
        return DecideResult(decision=decision, approval_past_budget=policy.approval_past_budget)

    @activity.defn(name=contract.ACTIVITY_SCALE)
    async def scale(self, ask: ScaleAsk) -> ScaleOutcome:
        pool = self._pool()
        try:
            taken = await quota_claims.claim_scale(ask.workload_id, ask.replicas, db=pool, past_budget=ask.past_budget)
        except quota_claims.QuotaRefused as refused:
            return ScaleOutcome(outcome="held_budget" if refused.only_budget else "held_quota",
                                words=refused.verdict.words)
        handle = activity.client().get_workflow_handle(workload_workflow_id(ask.workload_id))
        request = ScaleRequest(replicas=ask.replicas, requested_by=ask.requested_by, team=ask.team)
        try:
            # Accepted is enough: the workload rolls the scale out under its lock, and the next ticks hold
            # while it is `scaling`. A validator's refusal comes back at once.
            update = await handle.start_update(workload_contract.UPDATE_SCALE, request, id=ask.update_id,
                                               wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                                               rpc_timeout=timedelta(seconds=10))
            # A validator's refusal is an outcome known already, which result() raises at once.
            await asyncio.wait_for(update.result(), timeout=_ACCEPTED_GRACE_SECONDS)
        except TimeoutError:
            pass  # accepted and rolling out
        except WorkflowUpdateFailedError as err:
            await quota_claims.release(taken, db=pool)
            return ScaleOutcome(outcome="refused", words=getattr(err.cause, "message", None) or str(err.cause or err))
        except RPCError as err:
            if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION,
                                  RPCStatusCode.INVALID_ARGUMENT):
                raise  # Temporal unavailable: retried (the claim is the same claim again)
            await quota_claims.release(taken, db=pool)
            return ScaleOutcome(outcome="refused", words=f"the workload's workflow cannot take it ({err.message})")
        return ScaleOutcome(outcome="scaled", words=f"asked the workload for {ask.replicas} replica(s)")

    @activity.defn(name=contract.ACTIVITY_RECORD)
    async def record(self, r: DecisionRecord) -> None:
        await store.record_decision(self._pool(), workload_id=r.workload_id, source=r.workflow_id, step=r.step,
                                    decision=r.decision, outcome=r.outcome, note=r.note)

    def all(self) -> list[Callable[..., Any]]:
        return [self.decide, self.scale, self.record]
