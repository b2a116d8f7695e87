"""AutoscalerWorkflow on the time-skipping server with fake activities under the real names: the decision is the
real pure one, over measurements a small load model makes (TTFT over its target once the rate passes what the
replicas serve). A ramp up and down shows hold, out (past the budget: waiting for an approval), cooldown and in,
to the fewest replicas that serve the rate; removing the policy ends the loop; continue-as-new keeps the state."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from contracts import autoscaler as contract
from contracts.autoscaler import (
    AutoscalerInput,
    AutoscalerStatus,
    DecideInput,
    DecideResult,
    DecisionApproval,
    DecisionRecord,
    ScaleAsk,
    ScaleOutcome,
)
from contracts.ids import autoscaler_workflow_id
from wingsmith.domain.autoscaling import AutoscalingPolicy, Sample, decide
from worker.sandbox import WORKFLOW_RUNNER
from workflows.autoscaler import AutoscalerWorkflow

SLOT = 20
POLICY = AutoscalingPolicy(min_replicas=1, max_replicas=6, ttft_p95_ms=1000, requests_per_second_per_replica=2,
                           scale_up_window_s=60, scale_down_window_s=120, cooldown_s=120, approval_past_budget=True)


@dataclass
class Fleet:
    """One workload under a rate that moves with time, its replicas, and a budget that holds `budget` replicas."""
    replicas: int = 2
    budget: int = 3
    ramp: list[tuple[float, float]] = field(default_factory=lambda: [(0, 3.0), (200, 7.0), (600, 1.0)])
    start: datetime | None = None
    policy: AutoscalingPolicy | None = POLICY
    scales: list[ScaleAsk] = field(default_factory=list)
    records: dict[str, DecisionRecord] = field(default_factory=dict)

    def rate(self, at: datetime) -> float:
        assert self.start is not None
        offset = (at - self.start).total_seconds()
        return [r for since, r in self.ramp if offset >= since or since == 0][-1]

    def samples(self, now: datetime) -> list[Sample]:
        out = []
        for i in range(10, 0, -1):
            start = now - timedelta(seconds=SLOT * i)
            rate = self.rate(start)
            ttft = 500.0 if rate <= self.replicas * 2 else 2500.0
            out.append(Sample(start=start, end=start + timedelta(seconds=SLOT), requests_per_second=rate,
                              ttft_p95_ms=ttft))
        return out

    def activities(self) -> list:
        @activity.defn(name=contract.ACTIVITY_DECIDE)
        async def fake_decide(params: DecideInput) -> DecideResult:
            if self.start is None:
                self.start = params.now  # measured from before the loop began too, at the first rate
            if self.policy is None:
                return DecideResult(stop="the workload has no autoscaling policy any more")
            return DecideResult(decision=decide(self.samples(params.now), now=params.now, replicas=self.replicas,
                                                policy=self.policy, last_change=params.last_change),
                                approval_past_budget=self.policy.approval_past_budget)

        @activity.defn(name=contract.ACTIVITY_SCALE)
        async def fake_scale(ask: ScaleAsk) -> ScaleOutcome:
            if ask.replicas > self.budget and not ask.past_budget:
                return ScaleOutcome(outcome="held_budget", words="past team t's quota: budget: 30 used + 10 asked "
                                    "> 35 per hour")
            self.scales.append(ask)
            self.replicas = ask.replicas
            return ScaleOutcome(outcome="scaled", words=f"asked the workload for {ask.replicas} replica(s)")

        @activity.defn(name=contract.ACTIVITY_RECORD)
        async def fake_record(r: DecisionRecord) -> None:
            self.records.setdefault(f"{r.workflow_id}:{r.step}", r)

        return [fake_decide, fake_scale, fake_record]


async def test_hold_out_with_approval_cooldown_and_in(time_skipping_env: WorkflowEnvironment):
    env, fleet = time_skipping_env, Fleet()
    queue = f"as-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[AutoscalerWorkflow], activities=fleet.activities(),
                      workflow_runner=WORKFLOW_RUNNER):
        handle = await env.client.start_workflow(
            contract.WORKFLOW, AutoscalerInput(workload_id="wl", team="t", period_seconds=SLOT, ticks_per_run=7),
            id=autoscaler_workflow_id("wl"), task_queue=queue, result_type=AutoscalerStatus)

        async def status() -> AutoscalerStatus:
            return await handle.query(contract.QUERY_STATUS, result_type=AutoscalerStatus)

        await env.sleep(180)  # 3 rps on 2 replicas: within the target, no room for one fewer
        assert {r.decision.action for r in fleet.records.values()} == {"hold"} and fleet.scales == []

        await env.sleep(120)  # 7 rps from 200 s: TTFT missed over the whole minute → out to 4, past the budget
        waiting = (await status()).waiting
        assert waiting is not None and waiting.decision.replicas_to == 4 and "budget" in waiting.note
        assert fleet.scales == []
        with pytest.raises(WorkflowUpdateFailedError):  # not the decision that waits: refused by the validator
            await handle.execute_update(contract.UPDATE_APPROVE, DecisionApproval(tick=waiting.tick + 5, by="ana"))
        await handle.execute_update(contract.UPDATE_APPROVE, DecisionApproval(tick=waiting.tick, by="ana",
                                                                              comment="launch day"),
                                    result_type=AutoscalerStatus)
        await env.sleep(SLOT)
        assert [(s.replicas, s.past_budget) for s in fleet.scales] == [(4, True)]
        scaled = next(r for r in fleet.records.values() if r.outcome == "scaled")
        assert "approved by ana: launch day" in scaled.note
        assert any(r.outcome == "waiting_approval" for r in fleet.records.values())

        await env.sleep(300)  # still 7 rps on 4: holds (cooling down first)
        assert fleet.replicas == 4
        holds = [r.decision.words() for r in fleet.records.values() if r.decision.action == "hold"]
        assert any("cooling down after the scale out 2 → 4" in h for h in holds)

        await env.sleep(600)  # 1 rps from 600 s: one replica serves it with room, so 4 → 1 in one scale-in
        assert [s.replicas for s in fleet.scales] == [4, 1]
        outs_then_ins = [(r.decision.action, r.decision.inputs.at) for r in fleet.records.values()
                         if r.outcome == "scaled"]
        for (_, at), (_, later) in zip(outs_then_ins, outs_then_ins[1:], strict=False):
            assert later - at >= timedelta(seconds=POLICY.cooldown_s)  # no change within the cooldown
        assert (await status()).ticks > 7  # it continued as new along the way and kept its count

        fleet.policy = None  # the policy removed: the loop ends at its next period
        result = await handle.result()
        assert result.last_change is not None and result.last_change.replicas_to == 1


async def test_a_refused_budget_without_approval_is_held(time_skipping_env: WorkflowEnvironment):
    env = time_skipping_env
    fleet = Fleet(policy=POLICY.model_copy(update={"approval_past_budget": False}), ramp=[(0, 9.0)])
    queue = f"as-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[AutoscalerWorkflow], activities=fleet.activities(),
                      workflow_runner=WORKFLOW_RUNNER):
        handle = await env.client.start_workflow(
            contract.WORKFLOW, AutoscalerInput(workload_id="wl2", period_seconds=SLOT),
            id=autoscaler_workflow_id("wl2"), task_queue=queue, result_type=AutoscalerStatus)
        await env.sleep(100)
        held = [r for r in fleet.records.values() if r.outcome == "held_budget"]
        assert held and held[0].decision.replicas_to == 5 and fleet.scales == []
        assert (await handle.query(contract.QUERY_STATUS, result_type=AutoscalerStatus)).waiting is None
        fleet.policy = None
        await handle.result()


async def test_a_tick_whose_reading_fails_is_skipped_and_the_loop_goes_on(time_skipping_env: WorkflowEnvironment):
    """A reading that fails past its retries (here at once: a non-retryable error) costs one period, not the
    workload's autoscaling."""
    from temporalio.exceptions import ApplicationError

    env, fleet, failures = time_skipping_env, Fleet(ramp=[(0, 3.0)]), [1]
    activities = fleet.activities()
    real_decide = activities[0]

    @activity.defn(name=contract.ACTIVITY_DECIDE)
    async def flaky_decide(params: DecideInput) -> DecideResult:
        if failures:
            failures.pop()
            raise ApplicationError("the registry answered nonsense", non_retryable=True)
        return await real_decide(params)

    queue = f"as-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[AutoscalerWorkflow],
                      activities=[flaky_decide, *activities[1:]], workflow_runner=WORKFLOW_RUNNER):
        handle = await env.client.start_workflow(
            contract.WORKFLOW, AutoscalerInput(workload_id="wl3", period_seconds=SLOT),
            id=autoscaler_workflow_id("wl3"), task_queue=queue, result_type=AutoscalerStatus)
        await env.sleep(3 * SLOT)
        assert failures == [] and [r.decision.action for r in fleet.records.values()][:1] == ["hold"]
        fleet.policy = None
        await handle.result()


async def test_a_loop_started_again_keeps_its_own_records_and_updates(time_skipping_env: WorkflowEnvironment):
    """A policy removed and set again starts a new loop under the same id, counting ticks from 1: its decisions
    and scale updates are its own, not taken for the first loop's."""
    env, fleet = time_skipping_env, Fleet(ramp=[(0, 3.0)])
    queue = f"as-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[AutoscalerWorkflow], activities=fleet.activities(),
                      workflow_runner=WORKFLOW_RUNNER):
        for run in (1, 2):
            fleet.policy = POLICY
            handle = await env.client.start_workflow(
                contract.WORKFLOW, AutoscalerInput(workload_id="wl4", period_seconds=SLOT),
                id=autoscaler_workflow_id("wl4"), task_queue=queue, result_type=AutoscalerStatus)
            await env.sleep(2 * SLOT)
            fleet.policy = None
            await handle.result()
            assert len({r.step.rsplit(":", 1)[0] for r in fleet.records.values()}) == run
        assert all(r.step.endswith((":1", ":2", ":3")) for r in fleet.records.values())
