"""A workload's progressive upgrade on the time-skipping server (the real WorkloadWorkflow and
EndpointWorkflow, fake activities under the real names: tests/workflows/upgrade_world.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from contracts.endpoint import EndpointWorkflowInput
from contracts.upgrade import UpgradeControl, UpgradeRequest, UpgradeStatus
from contracts.workload import DeleteRequest, WatchSettings, WorkloadStatus
from tests.support import wait_until
from tests.workflows.fakes import SHA, workload_input
from tests.workflows.upgrade_world import NEW_ARTIFACT, NEW_SHA, UpgradeWorld, upgrade_worker
from wingsmith.domain.upgrade import UpgradeThresholds
from workflows.endpoint import EndpointWorkflow
from workflows.workload import WorkloadWorkflow
from workflows.workload.upgrade import WINDOWS_TO_DECIDE

OLD_ARTIFACT = f"Qwen/Qwen3-8B@{SHA}"
FAST = UpgradeThresholds(min_requests=5)


@dataclass
class Bed:
    client: Client
    world: UpgradeWorld
    workload: WorkflowHandle[WorkloadWorkflow, WorkloadStatus]
    endpoint: WorkflowHandle[EndpointWorkflow, object] | None

    async def upgrade(self, **kw: object) -> UpgradeStatus:
        request = UpgradeRequest(**{"artifact_id": NEW_ARTIFACT, "requested_by": "ana", "steps": [50, 100],
                                    "dwell_seconds": 1, "thresholds": FAST, **kw})  # type: ignore[arg-type]
        return await self.workload.execute_update(WorkloadWorkflow.upgrade, request)

    async def ended(self) -> UpgradeStatus:
        async def check() -> UpgradeStatus | None:
            up = (await self.workload.query(WorkloadWorkflow.status)).upgrade
            return up if up is not None and not up.running and up.finished_at is not None else None
        return await wait_until(check, timeout=60, what="the upgrade to end")

    async def state(self, want: str) -> UpgradeStatus:
        async def check() -> UpgradeStatus | None:
            up = (await self.workload.query(WorkloadWorkflow.status)).upgrade
            return up if up is not None and up.state == want else None
        return await wait_until(check, timeout=30, what=f"the upgrade to be {want}")

    def route_ids(self) -> dict[str, int]:
        return {b.id: b.weight for b in (self.world.routes.backends if self.world.routes else [])}


@asynccontextmanager
async def bed(env: WorkflowEnvironment, world: UpgradeWorld, *, endpoint: bool = True,
              replicas: int = 2) -> AsyncIterator[Bed]:
    client = env.client
    async with upgrade_worker(client, world) as queue:
        params = workload_input(queue, replicas=replicas, drain_grace_seconds=5)
        workload = await client.start_workflow(WorkloadWorkflow.run, params, id="workload/wl", task_queue=queue)
        handle = None
        if endpoint:
            handle = await client.start_workflow(
                EndpointWorkflow.run, EndpointWorkflowInput(name="qwen", workloads=["wl"], drain_grace_seconds=5),
                id="endpoint/qwen", task_queue=queue)

        async def serving() -> bool:
            return (await workload.query(WorkloadWorkflow.status)).stage == "serving" and (
                not endpoint or len(world.routes.backends if world.routes else []) == len(world.deployments))
        await wait_until(serving, what="the workload to serve")
        b = Bed(client, world, workload, handle)
        yield b
        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await workload.result()).stage == "deleted"
        assert world.deployments == {}


async def test_an_upgrade_moves_every_cluster_canary_first_and_removes_the_old(
        time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4})
    async with bed(time_skipping_env, world, replicas=3) as b:
        assert b.route_ids() == {"sim-a/wl": 2, "sim-b/wl": 1}
        started = await b.upgrade()
        assert started.state == "running" and started.to_artifact_id == NEW_ARTIFACT and started.revision == 1
        assert [c.cluster for c in started.clusters] == ["sim-a", "sim-b"]  # the canary holds the most
        done = await b.ended()
        assert done.state == "succeeded", done
        assert [c.phase for c in done.clusters] == ["done", "done"]
        assert sorted(world.deployments) == ["wl-sim-a-r1", "wl-sim-b-r1"]  # exactly one DGD per cluster
        status = await b.workload.query(WorkloadWorkflow.status)
        assert {c.cluster: (c.dgd_name, c.revision, c.replicas) for c in status.clusters} == {
            "sim-a": ("wl-sim-a-r1", 1, 2), "sim-b": ("wl-sim-b-r1", 1, 1)}
        log = world.log
        # The canary went all the way before the other cluster's new version was even applied, and
        # every old DGD was removed only after every cluster served the new version at 100 %.
        assert log.index("split sim-a r1=100") < log.index("apply wl-sim-b-r1 1")
        assert log.index("split sim-b r1=100") < log.index("delete wl-sim-a")
        assert "split sim-a r1=50" in log and world.splits == {}

        async def routed_new() -> bool:
            return b.route_ids() == {"sim-a/wl/r1": 2, "sim-b/wl/r1": 1}
        await wait_until(routed_new, what="the endpoint to route the new version only")
        kinds = [e.kind for e in world.events]
        assert kinds[0] == "workload_upgrade_started" and kinds[-1] == "workload_upgrade_succeeded"
        assert kinds.count("workload_upgrade_step") == 4  # two steps on each of two clusters
        # The workload's plan is the new artifact now: a heal renders the new version.
        world.deployments.pop("wl-sim-b-r1")
        await wait_until(lambda: _has(world, "wl-sim-b-r1"), what="the watch to heal the new version's DGD")
        async def serving_again() -> bool:
            return (await b.workload.query(WorkloadWorkflow.status)).stage == "serving"
        await wait_until(serving_again, what="the workload to serve again")
        # A second upgrade to the same artifact is refused by the validator.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await b.upgrade()
        assert _type(refused.value) == "SameArtifact"


async def _has(world: UpgradeWorld, name: str) -> bool:
    return name in world.deployments


def _type(err: WorkflowUpdateFailedError) -> str | None:
    return err.cause.type if isinstance(err.cause, ApplicationError) else None


async def test_a_new_version_failing_requests_rolls_back_by_itself_with_its_figures(
        time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4}, error_rate={"sim-a/wl/r1": 0.3})
    async with bed(time_skipping_env, world) as b:
        await b.upgrade()
        done = await b.ended()
        assert done.state == "rolled_back"
        assert done.failures and "sim-a at 50 %: error rate 3" in done.failures[0], done.failures
        assert "vs 0.0% (over +1.0%" in done.failures[0]
        canary = done.cluster("sim-a")
        assert canary.verdict is not None and 0.25 < (canary.verdict.figures["new_error_rate"] or 0) < 0.35
        assert canary.phase == "rolled back" and done.cluster("sim-b").phase == "waiting"  # never touched
        assert sorted(world.deployments) == ["wl-sim-a", "wl-sim-b"] and world.splits == {}
        assert not any(line.startswith("apply wl-sim-b-r1") for line in world.log)
        rolled = [e for e in world.events if e.kind == "workload_upgrade_rolled_back"]
        assert rolled and rolled[0].detail["figures"]["sim-a"] == canary.verdict.figures
        assert rolled[0].detail["failures"] == done.failures
        status = await b.workload.query(WorkloadWorkflow.status)
        assert any("rolling back: sim-a at 50 %: error rate" in e for e in status.events), status.events
        assert {c.dgd_name for c in status.clusters} == {"wl-sim-a", "wl-sim-b"}

        async def routed_old() -> bool:
            return b.route_ids() == {"sim-a/wl": 1, "sim-b/wl": 1}
        await wait_until(routed_old, what="the old version routed alone again")


async def test_pause_holds_at_a_step_resume_goes_on_and_abort_rolls_back(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4})
    async with bed(time_skipping_env, world) as b:
        await b.upgrade(steps=[10, 50, 100], dwell_seconds=2)
        paused = await b.workload.execute_update(WorkloadWorkflow.pause_upgrade, UpgradeControl(requested_by="ana"))
        assert paused.state == "paused" and paused.paused_reason == "paused by ana"
        with pytest.raises(WorkflowUpdateFailedError) as again:
            await b.workload.execute_update(WorkloadWorkflow.pause_upgrade, UpgradeControl(requested_by="ana"))
        assert _type(again.value) == "AlreadyPaused"
        # Paused: it holds after the step it was in, whatever time passes (looks in flight hold the
        # time-skipping clock: this is waited out, for more than two dwells).
        await asyncio.sleep(5)
        held = (await b.workload.query(WorkloadWorkflow.status)).upgrade
        assert held is not None and held.state == "paused" and held.cluster("sim-a").new_weight_percent == 10
        await b.workload.execute_update(WorkloadWorkflow.resume_upgrade, UpgradeControl(requested_by="ana"))

        async def further() -> bool:
            up = (await b.workload.query(WorkloadWorkflow.status)).upgrade
            return up is not None and up.cluster("sim-a").new_weight_percent >= 50
        await wait_until(further, what="the upgrade to go on after resume")
        await b.workload.execute_update(WorkloadWorkflow.abort_upgrade,
                                        UpgradeControl(requested_by="ana", reason="wrong day"))
        done = await b.ended()
        assert done.state == "aborted" and done.failures == ["aborted by ana (wrong day)"]
        assert sorted(world.deployments) == ["wl-sim-a", "wl-sim-b"] and world.splits == {}
        with pytest.raises(WorkflowUpdateFailedError) as none:
            await b.workload.execute_update(WorkloadWorkflow.abort_upgrade, UpgradeControl(requested_by="ana"))
        assert _type(none.value) == "NoUpgrade"


async def test_an_abort_while_the_old_version_drains_is_refused_with_why(time_skipping_env: WorkflowEnvironment):
    """Once every cluster serves the new version, the old one is drained and removed: an abort (or a
    pause) then would be ignored, so it is refused (409 through the API) saying why."""
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4}, held_drains=asyncio.Event())
    async with bed(time_skipping_env, world) as b:
        await b.upgrade()

        async def draining_old() -> bool:
            up = (await b.workload.query(WorkloadWorkflow.status)).upgrade
            return up is not None and any(c.phase == "draining the old version" for c in up.clusters)
        await wait_until(draining_old, what="the old version draining")
        for update in (WorkloadWorkflow.abort_upgrade, WorkloadWorkflow.pause_upgrade):
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await b.workload.execute_update(update, UpgradeControl(requested_by="ana"))
            assert _type(refused.value) == "UpgradeFinishing"
            assert "past the point where it can be paused or aborted" in str(refused.value.cause)
        assert world.held_drains is not None
        world.held_drains.set()
        done = await b.ended()
        assert done.state == "succeeded" and done.failures == []


async def test_a_cluster_without_room_for_both_surges_one_replica_at_a_time(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 3})  # 2 old replicas + room for one more, not two
    async with bed(time_skipping_env, world) as b:
        await b.upgrade()
        done = await b.ended()
        assert done.state == "succeeded" and done.cluster("sim-a").surge
        log = [line for line in world.log if line.startswith(("apply", "delete"))]
        # New one up by one replica, old one down by one: never more than the cluster's 3 replicas.
        assert log == ["apply wl-sim-a 2", "apply wl-sim-a-r1 1", "apply wl-sim-a 1", "apply wl-sim-a-r1 2",
                       "delete wl-sim-a"], log
        assert sorted(world.deployments) == ["wl-sim-a-r1"] and world.deployments["wl-sim-a-r1"].replicas == 2
        assert [e.detail["percent"] for e in world.events if e.kind == "workload_upgrade_step"] == [50, 100]


async def test_no_room_for_even_one_more_replica_refuses_and_leaves_the_old(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 2})
    async with bed(time_skipping_env, world) as b:
        await b.upgrade()
        done = await b.ended()
        assert done.state == "failed" and "sim-a has no room for even one more replica" in done.failures[0]
        assert sorted(world.deployments) == ["wl-sim-a"]


async def test_the_update_refuses_clearly_and_is_idempotent_per_update_id(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4})
    async with bed(time_skipping_env, world, endpoint=False, replicas=1) as b:
        async def refused(kind: str, **kw: object) -> str:
            with pytest.raises(WorkflowUpdateFailedError) as err:
                await b.upgrade(**kw)
            assert _type(err.value) == kind, err.value.cause
            return str(err.value.cause)
        assert "another repository" in await refused("OtherRepository", artifact_id=f"moonshotai/Kimi-K3@{NEW_SHA}")
        assert "already runs" in await refused("SameArtifact", artifact_id=OLD_ARTIFACT.lower())
        assert "must end at 100" in await refused("InvalidSteps", steps=[10, 50])
        world.refuse_plan = "artifact Qwen/Qwen3-8B@bbbb is draft, not approved"
        assert "not approved" in await refused("ArtifactNotUpgradable")
        world.refuse_plan = None

        request = UpgradeRequest(artifact_id=NEW_ARTIFACT, requested_by="follow", reason="follow: auto",
                                 steps=[100], dwell_seconds=30, thresholds=FAST)
        first = await b.workload.execute_update(WorkloadWorkflow.upgrade, request, id=f"follow:{NEW_ARTIFACT}")
        # The same update id again (a retried send): the same upgrade, not a refusal and not a second one.
        again = await b.workload.execute_update(WorkloadWorkflow.upgrade, request, id=f"follow:{NEW_ARTIFACT}")
        assert again.upgrade_id == first.upgrade_id and first.update_id == f"follow:{NEW_ARTIFACT}"
        assert "already running" in await refused("UpgradeRunning")
        done = await b.ended()
        # No endpoint: nothing to compare, so the steps go on without a verdict, and say so.
        assert done.state == "succeeded"
        status = await b.workload.query(WorkloadWorkflow.status)
        assert any("no endpoint routes this workload" in e for e in status.events)
        assert status.upgrade is not None and status.upgrade.upgrade_id == "workload/wl/upgrade/1"


async def test_what_cannot_be_judged_pauses_for_a_person_instead_of_retrying(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4}, gateway_down=True)
    async with bed(time_skipping_env, world, replicas=1) as b:
        await b.upgrade(steps=[100])
        held = await b.state("paused")
        assert held.paused_reason and "the gateway's counters could not be read" in held.paused_reason
        world.gateway_down, world.traffic = False, 0  # the gateway answers, but nobody sends requests
        await b.workload.execute_update(WorkloadWorkflow.resume_upgrade, UpgradeControl(requested_by="ana"))

        async def starved() -> UpgradeStatus | None:
            up = (await b.workload.query(WorkloadWorkflow.status)).upgrade
            return up if up and up.paused_reason and "no request reached the new version" in up.paused_reason else None
        held = await wait_until(starved, timeout=60, what="the upgrade to hold for lack of traffic")
        assert held.state == "paused" and f"in {WINDOWS_TO_DECIDE} windows" in (held.paused_reason or "")
        await b.workload.execute_update(WorkloadWorkflow.resume_upgrade, UpgradeControl(requested_by="ana"))
        assert (await b.ended()).state == "succeeded"  # a person accepted the step
        assert [e.kind for e in world.events].count("workload_upgrade_paused") == 2


async def test_a_delete_during_an_upgrade_rolls_it_back_and_removes_both_versions(
        time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4})
    client = time_skipping_env.client
    async with upgrade_worker(client, world) as queue:
        workload = await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, replicas=1),
                                               id="workload/wl", task_queue=queue)

        async def serving() -> bool:
            return (await workload.query(WorkloadWorkflow.status)).stage == "serving"
        await wait_until(serving, what="the workload to serve")
        await workload.execute_update(WorkloadWorkflow.upgrade, UpgradeRequest(
            artifact_id=NEW_ARTIFACT, requested_by="ana", steps=[100], dwell_seconds=3600))
        await wait_until(lambda: _has(world, "wl-sim-a-r1"), what="the new version to come up")
        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        ended = await workload.result()
        assert ended.stage == "deleted" and world.deployments == {}
        assert ended.upgrade is not None and ended.upgrade.state == "aborted"
        assert ended.upgrade.failures == ["the workload is being deleted"]


async def test_continue_as_new_waits_for_the_upgrade_and_carries_its_status(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4})
    client = time_skipping_env.client
    async with upgrade_worker(client, world) as queue:
        # Looks answering every second grow the history past the limit quickly: without an upgrade it would
        # continue as new within seconds.
        params = workload_input(queue, replicas=1, history_limit=150,
                                watch=WatchSettings(status_seconds=1, probe_seconds=1, report_seconds=1))
        workload = await client.start_workflow(WorkloadWorkflow.run, params, id="workload/wl", task_queue=queue)

        async def serving() -> bool:
            return (await workload.query(WorkloadWorkflow.status)).stage == "serving"
        await wait_until(serving, what="the workload to serve")
        await client.get_workflow_handle("workload/wl").execute_update(
            WorkloadWorkflow.upgrade, UpgradeRequest(artifact_id=NEW_ARTIFACT, requested_by="ana", steps=[50, 100],
                                                     dwell_seconds=3, thresholds=FAST))
        # The run that took the update cannot continue as new before the upgrade ends.
        first_run = (await client.get_workflow_handle("workload/wl").describe()).run_id

        async def next_run() -> str | None:
            run = (await client.get_workflow_handle("workload/wl").describe()).run_id
            return run if run != first_run else None
        await wait_until(next_run, timeout=60, what="the workload to continue as new")
        status = await client.get_workflow_handle_for(WorkloadWorkflow.run, "workload/wl").query(
            WorkloadWorkflow.status)
        assert status.upgrade is not None and status.upgrade.state == "succeeded"  # not cut short by the new run
        assert status.artifact_id == NEW_ARTIFACT and [c.dgd_name for c in status.clusters] == ["wl-sim-a-r1"]
        handle = client.get_workflow_handle_for(WorkloadWorkflow.run, "workload/wl")
        await handle.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                  wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await handle.result()).stage == "deleted" and world.deployments == {}


async def test_abort_does_not_wait_for_a_new_version_that_never_gets_ready(time_skipping_env: WorkflowEnvironment):
    world = UpgradeWorld(capacity={"sim-a": 4}, hold_ready={"wl-sim-a-r1"})
    async with bed(time_skipping_env, world, replicas=1) as b:
        await b.upgrade()
        await wait_until(lambda: _has(world, "wl-sim-a-r1"), what="the new version to be applied")
        await b.workload.execute_update(WorkloadWorkflow.abort_upgrade, UpgradeControl(requested_by="ana"))
        done = await b.ended()
        assert done.state == "aborted" and done.failures == ["aborted by ana"]
        assert sorted(world.deployments) == ["wl-sim-a"]  # the half-applied new version removed
