"""Every workflow upserts its own search attributes when it starts, so one started from your own
code (no `search_attributes=`) is found by the same visibility queries as one the API started.
On the dev server: the time-skipping server has no visibility queries."""

from __future__ import annotations

import uuid

from temporalio.client import Client, WorkflowUpdateStage

from contracts.rollout import ClusterRolloutInput
from contracts.workload import DeleteRequest
from tests.support import wait_until
from tests.workflows.fakes import SHA, World, fake_worker, workload_input
from wingsmith.adapters.kube import KubeconfigRef
from workflows.rollout import ClusterRolloutWorkflow
from workflows.workload import WorkloadWorkflow


async def test_a_workload_started_without_search_attributes_is_found_by_model(temporal_client: Client):
    world = World(capacity={"sim-a": 1})
    workload_id = f"sa-{uuid.uuid4().hex[:8]}"
    async with fake_worker(temporal_client, world) as queue:
        handle = await temporal_client.start_workflow(  # as user code would: no search attributes
            WorkloadWorkflow.run, workload_input(queue, workload_id=workload_id, replicas=1),
            id=f"workload/{workload_id}", task_queue=queue)

        async def found(query: str) -> list[str]:
            return [w.id async for w in temporal_client.list_workflows(query)]

        async def by_model() -> list[str]:
            return await found(f'WingsmithModel = "Qwen/Qwen3-8B" and WingsmithWorkload = "{workload_id}" '
                               f'and WingsmithSha = "{SHA}" and WingsmithStage = "serving"')
        assert await wait_until(by_model, what="the workload in visibility") == [handle.id]

        await handle.start_update(WorkloadWorkflow.delete, DeleteRequest(), wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await handle.result()).stage == "deleted"


async def test_a_rollout_started_without_search_attributes_is_found_by_cluster(temporal_client: Client):
    world = World(capacity={"sim-a": 1})
    workload_id = f"sa-{uuid.uuid4().hex[:8]}"
    async with fake_worker(temporal_client, world) as queue:
        params = workload_input(queue, workload_id=workload_id, replicas=1)
        rollout = ClusterRolloutInput(mode="apply", workload_id=workload_id, cluster="sim-a",
                                      kubeconfig=KubeconfigRef(source="/fake/sim-a"), namespace="default",
                                      spec=params.plan.rollout_spec("sim-a", 1), kube_task_queue=queue)
        wid = f"workload/{workload_id}/cluster/sim-a"
        result = await temporal_client.execute_workflow(ClusterRolloutWorkflow.run, rollout, id=wid, task_queue=queue)
        assert result.state == "serving"

    async def by_cluster() -> list[str]:
        query = f'WingsmithCluster = "sim-a" and WingsmithWorkload = "{workload_id}" and WingsmithStage = "rollout"'
        return [w.id async for w in temporal_client.list_workflows(query)]
    assert await wait_until(by_cluster, what="the rollout by cluster") == [wid]
