"""EndpointWorkflow with a real WorkloadWorkflow on the time-skipping server (fake activities under
the real names): the drain protocol between them, for a scale-down and for a delete."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from contracts.conditions import condition
from contracts.endpoint import EndpointStatus, EndpointWorkflowInput, SetWorkloads
from contracts.workload import DeleteRequest, ScaleRequest
from tests.support import wait_until
from tests.workflows.fakes import World, fake_worker, workload_input
from workflows.endpoint import EndpointWorkflow
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


async def test_set_workloads_is_checked_and_drains_the_one_that_leaves(time_skipping_env: WorkflowEnvironment):
    """The update refuses what the registry refuses (nothing changes), refuses an empty list and a
    workload still draining in its validator, and drains a leaving workload before it leaves the routes."""
    world = World(capacity={"sim-a": 1}, unknown_workloads={"ghost"})
    client = time_skipping_env.client
    async with fake_worker(client, world) as queue:
        workload = await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, replicas=1),
                                               id="workload/wl", task_queue=queue)
        endpoint = await client.start_workflow(
            EndpointWorkflow.run, EndpointWorkflowInput(name="qwen", workloads=["wl"]), id="endpoint/qwen",
            task_queue=queue)

        async def routed() -> bool:
            return world.log[-1:] == ["routes sim-a/wl=1"]
        await wait_until(routed, what="the workload routed")

        for request, kind in ((SetWorkloads(workloads=["wl", "ghost"]), "InvalidWorkloads"),
                              (SetWorkloads(workloads=[]), "InvalidWorkloads")):
            with pytest.raises(WorkflowUpdateFailedError) as failed:
                await endpoint.execute_update(EndpointWorkflow.set_workloads, request)
            assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == kind
        assert (await endpoint.query(EndpointWorkflow.status)).workloads == ["wl"]

        # wl leaves for wl2 (which serves nothing here): weight 0, drained, then gone from the routes.
        status = await endpoint.execute_update(EndpointWorkflow.set_workloads,
                                               SetWorkloads(workloads=["wl2"], requested_by="t"))
        assert status.workloads == ["wl", "wl2"] and status.draining == ["wl"]

        # The status drops wl as soon as the drain ends; the routes without it are written in the next pass.
        async def left() -> bool:
            return ((await endpoint.query(EndpointWorkflow.status)).workloads == ["wl2"]
                    and "drained sim-a/wl" in world.log and world.log[-1] != "drained sim-a/wl")
        await wait_until(left, what="wl to leave the endpoint and the routes")
        log = world.log
        assert log.index("routes sim-a/wl=0 sim-a/wl2=1") < log.index("drained sim-a/wl") < len(log) - 1
        # wl was not deleted: leaving an endpoint is not a delete.
        assert (await workload.query(WorkloadWorkflow.status)).stage == "serving" and world.dgds == {"sim-a": 1}

        await endpoint.start_update(EndpointWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        await endpoint.result()
        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await workload.result()).stage == "deleted"


async def test_a_change_overtaken_by_a_delete_is_refused_not_acknowledged(time_skipping_env: WorkflowEnvironment):
    """A PATCH racing a DELETE: the delete lands while the change is being recorded. The change never
    takes effect (the teardown drains everything), so the update fails with EndpointDeleting instead of
    answering as if it had."""
    world = World(capacity={"sim-a": 1}, held_changes=asyncio.Event())
    client = time_skipping_env.client
    async with fake_worker(client, world) as queue:
        workload = await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, replicas=1),
                                               id="workload/wl", task_queue=queue)
        endpoint = await client.start_workflow(
            EndpointWorkflow.run, EndpointWorkflowInput(name="qwen", workloads=["wl"], drain_grace_seconds=1),
            id="endpoint/qwen", task_queue=queue)
        async def routed() -> bool:
            return world.log[-1:] == ["routes sim-a/wl=1"]

        async def recording() -> bool:
            return world.changes_waiting == 1
        await wait_until(routed, what="the workload routed")

        change = await endpoint.start_update(EndpointWorkflow.set_workloads,
                                             SetWorkloads(workloads=["wl", "wl2"], requested_by="t"),
                                             wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        await wait_until(recording, what="the change being recorded")
        await endpoint.start_update(EndpointWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        world.held_changes.set()
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await change.result()
        assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "EndpointDeleting"
        assert "being deleted" in failed.value.cause.message
        assert (await endpoint.result()).stage == "deleted"
        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        assert (await workload.result()).stage == "deleted"


def _said(status: EndpointStatus, type: str) -> tuple[str, str]:
    held = condition(status.conditions, type)
    assert held is not None, status.conditions
    return held.status, held.reason


async def test_an_endpoint_says_by_its_conditions_whether_it_routes(time_skipping_env: WorkflowEnvironment):
    """Available is RoutesPublished while a deployment takes the name's requests and NoRoutes when none does;
    Progressing says when it drains or deletes; each transition keeps its own time."""
    world = World(capacity={"sim-a": 1})
    client = time_skipping_env.client
    async with fake_worker(client, world) as queue:
        # Started before its workload, which therefore never hears of it: its passes (every second) find it.
        endpoint = await client.start_workflow(
            EndpointWorkflow.run,
            EndpointWorkflowInput(name="qwen", workloads=["wl"], drain_grace_seconds=5, resync_seconds=1),
            id="endpoint/qwen", task_queue=queue)

        async def said(type: str, wanted: tuple[str, str]) -> EndpointStatus | None:
            status = await endpoint.query(EndpointWorkflow.status)
            return status if condition(status.conditions, type) and _said(status, type) == wanted else None

        waiting = await wait_until(lambda: said("Available", ("False", "NoRoutes")), what="no route yet")
        assert "wl" in str(condition(waiting.conditions, "Available"))
        assert _said(waiting, "Progressing") == ("False", "Settled")

        workload = await client.start_workflow(WorkloadWorkflow.run, workload_input(queue, replicas=1),
                                               id="workload/wl", task_queue=queue)
        routed = await wait_until(lambda: said("Available", ("True", "RoutesPublished")), what="routes published")
        available, before = condition(routed.conditions, "Available"), condition(waiting.conditions, "Available")
        assert available is not None and before is not None and "sim-a" in available.message
        assert available.last_transition_time >= before.last_transition_time
        # Progressing stayed False: its transition time is still the first one.
        first, now = (condition(s.conditions, "Progressing") for s in (waiting, routed))
        assert first is not None and now is not None and now.last_transition_time == first.last_transition_time

        await workload.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="t"),
                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        await workload.result()
        gone = await wait_until(lambda: said("Available", ("False", "NoRoutes")), what="no route after the delete")
        assert _said(gone, "Progressing") == ("False", "Settled")

        await endpoint.start_update(EndpointWorkflow.delete, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        ended = await endpoint.result()
        assert _said(ended, "Available") == ("False", "Deleted")
        assert _said(ended, "Progressing") == ("False", "Deleted")
