"""Upgrading the plane over running workflows (docs/production.md, "Upgrading the plane"): Worker
Versioning, every workflow type auto-upgrade, a change to a workflow's commands under
`workflow.patched`. The real dev server, the real workflows, the fake activities of tests/workflows
(so a watched workload costs a few workflow tasks a minute and 50 fit on 2 shared cores), and the
workers' own versioning code (worker/versioning.py): each version takes over by itself.

PLANE_UPGRADE_WORKLOADS sets how many watched workloads run through the upgrade (default 50).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker

from contracts.endpoint import EndpointWorkflowInput
from contracts.upgrade import UpgradeControl, UpgradeRequest
from contracts.workload import WatchSettings, WorkloadStatus
from tests.deploy.render import OVERLAYS, KubectlMissing, processes, render
from tests.production.next_plane import MEMO_KEY, NEXT, PATCH, NextWorkloadWorkflow, UnguardedWorkloadWorkflow
from tests.support import wait_until
from tests.workflows.fakes import workload_input
from tests.workflows.upgrade_world import NEW_ARTIFACT, UpgradeWorld
from wingsmith.domain.config import Settings, observe_task_queue
from wingsmith.domain.upgrade import UpgradeThresholds
from worker.registry import workflows
from worker.sandbox import WORKFLOW_RUNNER
from worker.versioning import deployment_config, take_over
from workflows.endpoint import EndpointWorkflow
from workflows.workload import WorkloadWorkflow

# How long a wait may take beside the rest of the suite: a module is dealt whole and early, beside the
# planning tests' AIConfigurator searches, where a workflow task waited over 5 s for a core (TMPRL1104) and
# every workflow's move to N+1 took more than a minute; what is judged is that they move, not how fast.
LOADED = 180

WATCHED = int(os.environ.get("PLANE_UPGRADE_WORKLOADS", "50"))
# Quiet looks answer every few seconds and a run continues as new after a few answers, so every
# workload acts and continues as new within the test; the shipped defaults are minutes and hundreds.
WATCH = WatchSettings(status_seconds=1, probe_seconds=1, report_seconds=4, looks_per_run=5)


def next_workflows(workload: type = NextWorkloadWorkflow) -> list[type]:
    return [workload if w is WorkloadWorkflow else w for w in workflows(versioned=True)]


@asynccontextmanager
async def plane(client: Client, world: UpgradeWorld, queue: str, version: WorkerDeploymentVersion,
                workflow_types: list[type]) -> AsyncIterator[None]:
    """One version of the plane's workers (workflows and activities, and the looks' queue), current
    once it has taken over."""
    versioned = deployment_config(version)
    async with Worker(client, task_queue=queue, workflows=workflow_types, activities=world.activities(),
                      workflow_runner=WORKFLOW_RUNNER, deployment_config=versioned), \
            Worker(client, task_queue=observe_task_queue(queue), activities=[world.look], deployment_config=versioned):
        assert await asyncio.wait_for(take_over(client, version, every=0.5), 60)
        yield


async def build_id(client: Client, workflow_id: str) -> str:
    """The version whose workers run the workflow's current run ('' before its first task)."""
    info = (await client.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
    assert info.versioning_info.behavior in (VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
                                             VersioningBehavior.VERSIONING_BEHAVIOR_UNSPECIFIED), info.versioning_info
    return info.versioning_info.deployment_version.build_id


async def task_failures(client: Client, workflow_id: str) -> list[str]:
    """Workflow task failures (a non-determinism error is one, retried for ever) in every run."""
    failures: list[str] = []
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        failures += [e.workflow_task_failed_event_attributes.failure.message for e in history.events
                     if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    return failures


async def each(ids: list[str], call):  # noqa: ANN001, ANN201 - a small gather helper
    limit = asyncio.Semaphore(20)

    async def one(wid: str):  # noqa: ANN202
        async with limit:
            return await call(wid)
    return await asyncio.gather(*(one(w) for w in ids))


async def start_watched(client: Client, queue: str, count: int, prefix: str = "watched") -> list[WorkflowHandle]:
    handles = [await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, f"{prefix}-{i:03d}", replicas=1,
                                                                                watch=WATCH),
                                           id=f"workload/{prefix}-{i:03d}", task_queue=queue) for i in range(count)]

    async def serving() -> bool:
        stages = await each([h.id for h in handles], lambda wid: _stage(client, wid))
        return all(s == "serving" for s in stages)
    await wait_until(serving, timeout=LOADED + count, interval=1, what=f"{count} workloads to serve")
    return handles


async def _stage(client: Client, workflow_id: str) -> str:
    handle = client.get_workflow_handle_for(WorkloadWorkflow.run, workflow_id)
    return (await handle.query(WorkloadWorkflow.status)).stage


async def test_a_new_plane_version_takes_over_running_workflows_and_its_change_takes_effect(temporal_client, started):
    client = temporal_client
    deployment = "wingsmith-" + uuid.uuid4().hex[:6]  # Worker Deployment names are namespace-wide
    old, new = WorkerDeploymentVersion(deployment, "n"), WorkerDeploymentVersion(deployment, NEXT)
    queue = "plane-" + uuid.uuid4().hex[:6]
    world = UpgradeWorld(capacity={"sim-a": WATCHED + 4, "sim-b": WATCHED + 4})
    t0 = time.monotonic()
    async with AsyncExitStack() as version_n:
        await version_n.enter_async_context(plane(client, world, queue, old, workflows(versioned=True)))
        # On version N: the watched workloads, and one workload behind an endpoint whose progressive
        # upgrade (to another artifact) is in flight, paused after its first step.
        watched = await start_watched(client, queue, WATCHED)
        upgrading = await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, "wl", replicas=2,
                                                drain_grace_seconds=2, watch=WATCH), id="workload/wl", task_queue=queue)
        endpoint = await client.start_workflow(EndpointWorkflow.run, EndpointWorkflowInput(
            name="qwen", workloads=["wl"], drain_grace_seconds=2, resync_seconds=3), id="endpoint/qwen",
            task_queue=queue)
        await wait_until(lambda: _serving_and_routed(client, world), timeout=LOADED, what="the endpoint to route wl")
        await upgrading.execute_update(WorkloadWorkflow.upgrade, UpgradeRequest(
            artifact_id=NEW_ARTIFACT, requested_by="ana", steps=[50, 100], dwell_seconds=1,
            thresholds=UpgradeThresholds(min_requests=5)))
        await upgrading.execute_update(WorkloadWorkflow.pause_upgrade, UpgradeControl(requested_by="ana"))
        every = [h.id for h in watched] + [upgrading.id, endpoint.id]
        started += every
        assert set(await each(every, lambda wid: build_id(client, wid))) == {"n"}
        print(f"\n{WATCHED} watched workloads, an endpoint and a paused upgrade on version N "
              f"after {time.monotonic() - t0:.1f} s")

        # Version N+1 starts beside N, with the changed workflow, and takes over.
        t1 = time.monotonic()
        async with plane(client, world, queue, new, next_workflows()):
            print(f"version N+1 current {time.monotonic() - t1:.1f} s after its workers started")

            where: dict[str, str] = {}

            async def moved() -> bool:  # every running workflow's next task ran on N+1
                where.update(zip(every, await each(every, lambda wid: build_id(client, wid)), strict=True))
                return set(where.values()) == {NEXT}
            try:
                await wait_until(moved, timeout=LOADED, interval=1, what="every workflow to move to version N+1")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; where each runs: {where}") from None
            # Version N drains: nothing is pinned to it, so its workers stop here.
            await version_n.aclose()
            print(f"every workflow on N+1 and N stopped {time.monotonic() - t1:.1f} s after N+1 started")

            # The upgrade that was in flight carries on under N+1 and finishes.
            await upgrading.execute_update(WorkloadWorkflow.resume_upgrade, UpgradeControl(requested_by="ana"))

            async def upgraded() -> str | None:
                up = (await upgrading.query(WorkloadWorkflow.status)).upgrade
                return up.state if up is not None and not up.running and up.finished_at is not None else None
            assert await wait_until(upgraded, timeout=90, interval=0.5, what="the upgrade to end") == "succeeded"

            # A run that reached the patch while N+1 replayed its history keeps the old branch (the
            # patch's answer holds for the whole run); each watched workload continues as new on N+1,
            # and the new run makes the change from its start.
            firsts = {h.id: (await h.describe()).run_id for h in watched}

            async def continued() -> bool:
                runs = await each(list(firsts), lambda wid: _run_id(client, wid))
                return all(run != firsts[wid] for wid, run in zip(firsts, runs, strict=True))
            await wait_until(continued, timeout=90, interval=1, what="every workload to continue as new")

            memos: dict[str, object] = {}

            async def changed() -> bool:  # each new run records the version at its first answered look
                memos.update(zip(firsts, await each(list(firsts), lambda wid: _memo(client, wid)), strict=True))
                return set(memos.values()) == {NEXT}
            try:
                await wait_until(changed, timeout=LOADED, interval=1, what="the change to take effect in every new run")
            except AssertionError as exc:
                lacking = [wid for wid, m in memos.items() if m != NEXT]
                raise AssertionError(f"{exc}: not in {lacking}, e.g. {await _history(client, lacking[0])}") from None
            assert set(await each([h.id for h in watched], lambda wid: _stage(client, wid))) == {"serving"}
            assert set(await each(every, lambda wid: build_id(client, wid))) == {NEXT}
            failures = [f for fs in await each(every, lambda wid: task_failures(client, wid)) for f in fs]
            assert failures == []
            assert [n for n in world.deployments if n.startswith("wl-")] and all(
                n.endswith("-r1") for n in world.deployments if n.startswith("wl-"))  # only the new version left
            print(f"upgrade finished and every workload continued as new {time.monotonic() - t1:.1f} s "
                  f"after N+1 started; 0 workflow task failures")


async def test_the_same_change_without_its_patch_fails_the_moved_workflows(temporal_client, started):
    """What the patch prevents: version N+1 with the change unguarded fails a running workflow's tasks
    (non-determinism), and the workflow stops making progress until N+1 is fixed."""
    client = temporal_client
    deployment = "wingsmith-" + uuid.uuid4().hex[:6]
    queue = "plane-" + uuid.uuid4().hex[:6]
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4})
    async with AsyncExitStack() as version_n:
        await version_n.enter_async_context(plane(client, world, queue, WorkerDeploymentVersion(deployment, "n"),
                                                  workflows(versioned=True)))
        [watched] = await start_watched(client, queue, 1, prefix="unguarded")
        started.append(watched.id)
        # A few answered looks on N, so moving to N+1 replays past points where N+1 adds a command.
        await wait_until(lambda: _answered_looks(watched), timeout=30, what="looks answered on N")
        async with plane(client, world, queue, WorkerDeploymentVersion(deployment, "broken"),
                         next_workflows(UnguardedWorkloadWorkflow)):
            await version_n.aclose()

            async def failed() -> list[str]:
                return await task_failures(client, watched.id)
            failures = await wait_until(failed, timeout=LOADED, interval=1, what="the moved workflow's task to fail")
            assert any("nondetermin" in f.lower() for f in failures), failures
    assert PATCH  # the guarded change (NextWorkloadWorkflow) is the one the first test rolls out


async def _answered_looks(handle: WorkflowHandle) -> bool:
    status: WorkloadStatus = await handle.query(WorkloadWorkflow.status)
    return status.stage == "serving" and (await handle.describe()).history_length > 40


async def _serving_and_routed(client: Client, world: UpgradeWorld) -> bool:
    deployed = [n for n in world.deployments if n.startswith("wl-")]
    return await _stage(client, "workload/wl") == "serving" and world.routes is not None and len(
        world.routes.backends) == len(deployed) > 0


async def _memo(client: Client, workflow_id: str) -> object:
    return (await (await client.get_workflow_handle(workflow_id).describe()).memo()).get(MEMO_KEY)


async def _history(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in history.events][-25:]


async def _run_id(client: Client, workflow_id: str) -> str | None:
    return (await client.get_workflow_handle(workflow_id).describe()).run_id


class AnySecret(dict):
    """Every Secret's value, as far as where a process's settings come from matters here."""

    def __missing__(self, key: tuple[str, str]) -> str:
        return "a-secret"

    def __contains__(self, key: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_every_worker_that_runs_workflows_or_their_activities_is_the_version_of_its_image(overlay):
    try:
        rendered = processes(render(overlay), secrets=AnySecret())
    except KubectlMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    for name, process in rendered.items():
        versioned = "TEMPORAL_WORKER_BUILD_ID" in process.env
        # Every queue a plane version polls moves at once; the perf worker (0 replicas by default) stays
        # unversioned, or a version without it could never take over from one with it.
        assert versioned == (process.command[:3] == ["python", "-m", "worker"]), name
        if versioned:
            assert process.env["TEMPORAL_DEPLOYMENT_NAME"] == "wingsmith"
            assert process.env["TEMPORAL_WORKER_BUILD_ID"] == process.image.rsplit(":", 1)[1], name
            Settings(**{k: v for k, v in process.env.items() if k.startswith("TEMPORAL_D") or "BUILD_ID" in k})


@activity.defn(name="noop")
async def _noop() -> None:
    pass


async def test_a_version_takes_over_only_with_every_queue_and_an_old_one_never_takes_back(temporal_client):
    client = temporal_client
    deployment, queue = "wingsmith-" + uuid.uuid4().hex[:6], "plane-" + uuid.uuid4().hex[:6]
    old, new = WorkerDeploymentVersion(deployment, "n"), WorkerDeploymentVersion(deployment, NEXT)

    async with AsyncExitStack() as stack:
        for version, queues in ((old, (queue, observe_task_queue(queue))), (new, (queue,))):
            for q in queues:
                await stack.enter_async_context(Worker(
                    client, task_queue=q, activities=[_noop], workflows=workflows(versioned=True) if q == queue else [],
                    workflow_runner=WORKFLOW_RUNNER, deployment_config=deployment_config(version)))
            if version == old:
                assert await asyncio.wait_for(take_over(client, old, every=0.5), 60)
        # N+1 polls the workflows' queue but not yet the looks' one: taking over would leave the looks
        # of every workflow that moves without a worker, so it waits.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(take_over(client, new, every=0.5), 5)
        await stack.enter_async_context(Worker(client, task_queue=observe_task_queue(queue), activities=[_noop],
                                               deployment_config=deployment_config(new)))
        assert await asyncio.wait_for(take_over(client, new, every=0.5), 60)
        # An old pod that restarts during the rollout must not take the plane back.
        assert await asyncio.wait_for(take_over(client, old, every=0.5), 60) is False
