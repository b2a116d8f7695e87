"""The one pinned workflow type beside the auto-upgrade ones, across a plane upgrade (docs/production.md,
"Upgrading the plane"): a member cluster's preflight (ClusterCheckWorkflow) that a new plane version
overtakes ends on the version it started on, while a watched workload beside it moves to the new
version at its next task. The real dev server, the real workflows and the workers' own versioning code;
the check's activity is a stand-in that holds until the test lets it answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker

from contracts import cluster_check as contract
from contracts.cluster_check import ClusterCheckInput
from tests.production.next_plane import NEXT
from tests.production.test_plane_upgrade import build_id, next_workflows, plane, start_watched
from tests.support import wait_until
from tests.workflows.upgrade_world import UpgradeWorld
from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.member_clusters import CheckLine, Preflight
from worker.registry import workflows
from worker.versioning import deployment_config


def check_activity(build: str, ran_on: list[str], answer: asyncio.Event) -> Callable[..., Any]:
    """The check as version `build`'s kube worker runs it: it says which version ran it, once let."""

    @activity.defn(name=contract.ACTIVITY_CHECK_CLUSTER)
    async def check(params: ClusterCheckInput) -> Preflight:
        ran_on.append(build)
        await answer.wait()
        return Preflight(checked_at=datetime.now(UTC), lines=[
            CheckLine(check="api_server", status="pass", detail=f"checked by plane version {build}")])
    return check


async def versioning(client: Client, workflow_id: str) -> tuple[int, str]:
    info = (await client.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
    return info.versioning_info.behavior, info.versioning_info.deployment_version.build_id


async def task_versions(client: Client, workflow_id: str) -> list[str]:
    """The version of every workflow task the run completed, in order."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [e.workflow_task_completed_event_attributes.deployment_version.build_id for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]


async def test_a_pinned_check_ends_on_its_version_while_a_workload_beside_it_moves(temporal_client, started):
    client = temporal_client
    deployment = "wingsmith-" + uuid.uuid4().hex[:6]
    old, new = WorkerDeploymentVersion(deployment, "n"), WorkerDeploymentVersion(deployment, NEXT)
    queue = "plane-" + uuid.uuid4().hex[:6]
    kube_queue = queue + "-kube"
    world = UpgradeWorld(capacity={"sim-a": 4, "sim-b": 4})
    ran_on: list[str] = []
    answer = asyncio.Event()

    def check(cluster: str) -> Any:
        params = ClusterCheckInput(cluster=cluster, kubeconfig=KubeconfigRef(source="env:KUBECONFIG_SIM_A"),
                                   namespace="wingsmith", kube_task_queue=kube_queue)
        workflow_id = contract.cluster_check_workflow_id(cluster, uuid.uuid4().hex[:12])
        started.append(workflow_id)
        return client.start_workflow(contract.WORKFLOW, params, result_type=Preflight, id=workflow_id,
                                     task_queue=queue, execution_timeout=timedelta(minutes=2))

    def kube_worker(version: WorkerDeploymentVersion) -> Worker:
        # Every queue of a version moves at once: the kube queue's worker starts before the version
        # takes over (worker/versioning.py waits for it).
        return Worker(client, task_queue=kube_queue, activities=[check_activity(version.build_id, ran_on, answer)],
                      deployment_config=deployment_config(version))

    async with AsyncExitStack() as version_n:
        await version_n.enter_async_context(kube_worker(old))
        await version_n.enter_async_context(plane(client, world, queue, old, workflows(versioned=True)))
        [workload] = await start_watched(client, queue, 1, prefix="beside-pinned")
        started.append(workload.id)
        overtaken = await check("sim-a")

        async def check_started() -> bool:
            return ran_on == ["n"]
        await wait_until(check_started, timeout=30, what="the check to start on version N")
        assert await versioning(client, overtaken.id) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "n")

        async with AsyncExitStack() as version_next:
            await version_next.enter_async_context(kube_worker(new))
            await version_next.enter_async_context(plane(client, world, queue, new, next_workflows()))

            async def workload_moved() -> bool:
                return await build_id(client, workload.id) == NEXT
            await wait_until(workload_moved, timeout=60, interval=0.5, what="the workload to move to N+1")
            # The check stays with version N, whose workers still run (they drain what is pinned to them).
            assert await versioning(client, overtaken.id) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "n")

            answer.set()
            preflight = await asyncio.wait_for(overtaken.result(), 30)
            assert [line.detail for line in preflight.lines] == ["checked by plane version n"]
            assert set(await task_versions(client, overtaken.id)) == {"n"}

            # A check asked for after the upgrade is the new version's, start to end.
            fresh = await check("sim-b")
            preflight = await asyncio.wait_for(fresh.result(), 30)
            assert [line.detail for line in preflight.lines] == [f"checked by plane version {NEXT}"]
            assert set(await task_versions(client, fresh.id)) == {NEXT}
            assert ran_on == ["n", NEXT]
