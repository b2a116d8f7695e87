"""EndpointWorkflow with a real WorkloadWorkflow on the time-skipping server (fake activities under
the real names): the drain protocol between them, for a scale-down and for a delete."""

from __future__ import annotations

from temporalio.client import WorkflowUpdateStage
from temporalio.testing import WorkflowEnvironment

from tests.support import wait_until
from tests.workflows.fakes import World, fake_worker, workload_input
from wingsmith.workload_state import DeleteRequest, ScaleRequest
from workflows.endpoint import EndpointWorkflow, EndpointWorkflowInput
from workflows.workload import WorkloadWorkflow


async def test_an_endpoint_drains_a_backend_before_its_workload_removes_it(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    client = time_skipping_env.client
    async with fake_worker(client, world) as queue:
        # A short grace: a workload that stopped waiting for the endpoint would go on (and fail the test) soon.
        params = workload_input(queue, replicas=2, drain_grace_seconds=5)
        workload = await client.start_workflow(WorkloadWorkflow.run, params, id="workload/wl", task_queue=queue)
        endpoint = await client.start_workflow(
            EndpointWorkflow.run, EndpointWorkflowInput(name="qwen", workloads=["wl"], drain_grace_seconds=30),
            id="endpoint/qwen", task_queue=queue)

        async def both_routed() -> bool:
            return world.log[-1:] == ["routes sim-a/wl=1 sim-b/wl=1"]
        await wait_until(both_routed, what="both clusters routed")

        # Scale-down: sim-b leaves. Its route goes to weight 0, the endpoint waits for its in-flight
        # requests, and only then does the workload delete its deployment and tell it it is gone.
        status = await workload.execute_update(WorkloadWorkflow.scale, ScaleRequest(replicas=1, requested_by="t"))
        assert status.replicas == 1 and world.dgds == {"sim-a": 1}
        log = world.log
        assert log.index("routes sim-a/wl=1 sim-b/wl=0") < log.index("drained sim-b/wl") < log.index("delete sim-b")

        async def gone_from_routes() -> bool:
            return world.log[-1] == "routes sim-a/wl=1"
        await wait_until(gone_from_routes, what="the removed backend to leave the routes")
        assert (await endpoint.query(EndpointWorkflow.status)).stage == "serving"
        assert any("endpoints drained sim-b" in e for e in status.events), status.events

        # Delete: the whole workload drains at the endpoint before any deployment goes.
        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await workload.result()).stage == "deleted"
        log = world.log
        assert log.index("routes sim-a/wl=0") < log.index("drained sim-a/wl") < log.index("delete sim-a")
        ended = await endpoint.query(EndpointWorkflow.status)
        assert ended.workloads == [] and ended.routes is not None and not ended.routes.backends

        await endpoint.start_update(EndpointWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await endpoint.result()).stage == "deleted"
    assert world.dgds == {} and world.routes is not None and world.routes.backends == []
