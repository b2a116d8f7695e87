"""WorkloadWorkflow on the time-skipping server, with fake activities under the real names
(tests/workflows/fakes.py): the paths a real cluster rarely shows on demand."""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment

from contracts.workload import DeleteRequest, ScaleRequest, WorkloadStatus, WorkloadWorkflowInput
from tests.support import wait_until
from tests.workflows.fakes import World, fake_worker, workload_input
from workflows.workload import WorkloadWorkflow

Handle = WorkflowHandle[WorkloadWorkflow, WorkloadStatus]


async def start(client: Client, params: WorkloadWorkflowInput, queue: str) -> Handle:
    return await client.start_workflow(WorkloadWorkflow.run, params, id=f"workload/{params.plan.workload_id}",
                                       task_queue=queue)


async def serving(handle: Handle) -> WorkloadStatus:
    async def check() -> WorkloadStatus | None:
        status = await handle.query(WorkloadWorkflow.status)
        return status if status.stage == "serving" else None
    return await wait_until(check, what="the workload to serve")


async def delete(handle: Handle) -> WorkloadStatus:
    """Delete and wait for the result, so the test server skips the retry backoffs."""
    await handle.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by="test"),
                              wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    return await handle.result()


async def test_a_failed_canary_moves_its_replicas_before_the_rest_roll_out(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 2, "sim-b": 2, "sim-c": 2}, crash_looping={"sim-a"})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        status = await serving(handle)
        assert {c.cluster: c.replicas for c in status.clusters if c.state == "serving"} == {"sim-b": 1, "sim-c": 1}
        assert any("canary sim-a failed" in e for e in status.events), status.events
        # The canary gated the others: nothing else was applied until it failed and was removed.
        assert world.log.index("apply sim-a 1") < world.log.index("delete sim-a") < world.log.index("apply sim-b 1")
        assert "sim-a" not in world.dgds
        assert (await delete(handle)).stage == "deleted"
    assert world.dgds == {}


async def test_a_scale_that_cannot_be_placed_keeps_what_serves(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        await serving(handle)
        status = await handle.execute_update(WorkloadWorkflow.scale, ScaleRequest(replicas=4, requested_by="test"))
        assert status.stage == "serving" and status.replicas == 2
        assert any("scale to 4 incomplete: 0 of 2 placed" in e for e in status.events), status.events
        assert world.dgds == {"sim-a": 1, "sim-b": 1}
        assert (await delete(handle)).stage == "deleted"


async def test_a_first_rollout_that_cannot_be_placed_rolls_back_and_fails(time_skipping_env: WorkflowEnvironment):
    # The canary serves on sim-a; sim-b crash-loops and nothing else has room: the saga removes sim-a.
    world = World(capacity={"sim-a": 1, "sim-b": 1}, crash_looping={"sim-b"})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "WorkloadFailed"
    assert "0 of 1 placed" in failed.value.cause.message
    assert world.log.index("apply sim-a 1") < world.log.index("delete sim-a")
    assert world.dgds == {} and world.workload_states[-1] == "failed"


async def test_cancelling_the_first_rollout_rolls_back_every_cluster(time_skipping_env: WorkflowEnvironment):
    # The canary serves on sim-a, sim-b is still coming up when the workflow is cancelled.
    world = World(capacity={"sim-a": 1, "sim-b": 1}, hold_ready={"sim-b"})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)

        async def second_applied() -> bool:
            return "apply sim-b 1" in world.log
        await wait_until(second_applied, what="the second cluster's apply")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        world.hold_ready.clear()
    assert isinstance(failed.value.cause, CancelledError)
    # The compensation ran to the end although the workflow was cancelled: nothing is left behind,
    # the canary that served included.
    assert world.dgds == {} and "delete sim-a" in world.log
    assert world.workload_states[-1] == "failed"


async def test_a_delete_a_cluster_refuses_is_retried_until_nothing_is_left(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        await serving(handle)
        world.refuse_deletes["sim-b"] = 2
        status = await delete(handle)
    assert status.stage == "deleted" and world.dgds == {}
    assert [e for e in world.log if e.startswith("delete sim-b")] == ["delete sim-b refused"] * 2 + ["delete sim-b"]
    retries = [e for e in status.events if "deployments left" in e]
    assert len(retries) == 2 and "retrying in 5s" in retries[0] and "retrying in 10s" in retries[1], status.events


async def test_a_long_lived_workload_continues_as_new_with_its_state(temporal_client: Client):
    # On the dev server, not the time-skipping one: there a query right after continue-as-new was sometimes
    # held until it timed out (30 s, about 1 run in 6 under load), and one with its own deadline hung.
    world = World(capacity={"sim-a": 2, "sim-b": 2})
    client = temporal_client
    async with fake_worker(client, world) as queue:
        handle = await start(client, workload_input(queue, replicas=1, history_limit=10), queue)
        first_run = handle.result_run_id

        async def status_of_new_run(*old_runs: str | None) -> tuple[str, WorkloadStatus] | None:
            desc = await handle.describe()
            if desc.run_id in old_runs:
                return None
            status = await handle.query(WorkloadWorkflow.status)
            return (desc.run_id or "", status) if status.stage == "serving" else None

        second_run, _ = await wait_until(lambda: status_of_new_run(first_run), what="a continued run")
        status = await handle.execute_update(WorkloadWorkflow.scale, ScaleRequest(replicas=3, requested_by="test"))
        assert status.replicas == 3

        _, status = await wait_until(lambda: status_of_new_run(first_run, second_run),
                                     what="the scaled run to continue as new")
        # What the workload knows survived both hand-overs: its clusters, replicas and events.
        assert status.stage == "serving" and status.replicas == 3 and world.dgds == {"sim-a": 2, "sim-b": 1}
        assert any("placement 1" in e for e in status.events) and any("placement 2" in e for e in status.events)
        assert (await delete(handle)).stage == "deleted"
    assert world.dgds == {}
