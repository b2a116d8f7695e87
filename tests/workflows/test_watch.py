"""The watch of WorkloadWorkflow with fake activities: every heal path. Its looks are always in
flight (they wait for news), which holds the time-skipping server's clock, so graces, silences and
back-offs are made short and waited out."""

from __future__ import annotations

import asyncio

from temporalio.testing import WorkflowEnvironment

from contracts.workload import ScaleRequest, WatchSettings, WorkloadStatus
from tests.support import wait_until
from tests.workflows.fakes import World, fake_worker, workload_input
from tests.workflows.test_workload import Handle, delete, serving, start
from workflows.workload import WorkloadWorkflow

FAST = WatchSettings(status_seconds=0.2, probe_seconds=0.4, report_seconds=2, grace_seconds=4, silence_seconds=3,
                     place_again_seconds=1)


async def until(handle: Handle, check, what: str) -> WorkloadStatus:
    async def look() -> WorkloadStatus | None:
        status = await handle.query(WorkloadWorkflow.status)
        return status if check(status) else None
    return await wait_until(look, what=what)


async def _more_looks(world: World, n: int) -> bool:
    return world.looks >= n


def events_with(status: WorkloadStatus, text: str) -> list[str]:
    return [e for e in status.events if text in e]


async def test_a_missing_deployment_is_applied_again(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2, watch=FAST), queue)
        await serving(handle)
        del world.dgds["sim-a"]  # kubectl delete, outside the plane
        # The heal's event is noted before the stage returns to serving (a registry write in between).
        status = await until(handle, lambda s: s.stage == "serving"
                             and events_with(s, "healed sim-a (reapply: deployment missing)"), "the heal")
        assert world.dgds == {"sim-a": 1, "sim-b": 1}
        assert events_with(status, "sim-a degraded: deployment missing")
        assert [(h.cluster, h.action, h.problem, h.cause) for h in world.heals] == [
            ("sim-a", "reapply", "DeploymentMissing", "deployment missing")]
        # Not serving was shown before the heal started, in the registry as well.
        assert world.workload_states[-2:] == ["degraded", "serving"]
        assert (await delete(handle)).stage == "deleted"
    assert world.dgds == {}


async def test_an_edit_is_put_back_or_reported_by_policy(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 2})
    async with fake_worker(time_skipping_env.client, world) as queue:
        healing = await start(time_skipping_env.client, workload_input(queue, "heals", replicas=1, watch=FAST), queue)
        await serving(healing)
        world.edit("sim-a")
        status = await until(healing, lambda s: events_with(s, "healed sim-a (reapply: spec edited outside the plane"),
                             "the edit put back")
        assert world.generations["sim-a"] == world.applied_generations["sim-a"] == 3
        assert (await delete(healing)).stage == "deleted"

        params = workload_input(queue, "reports", replicas=1, watch=FAST)
        params.plan = params.plan.model_copy(update={"drift": "report"})
        reporting = await start(time_skipping_env.client, params, queue)
        await serving(reporting)
        world.edit("sim-a")
        status = await until(reporting, lambda s: any(c.drift for c in s.clusters), "the edit reported")
        assert status.stage == "serving" and "generation 2, applied 1" in (status.clusters[0].drift or "")
        assert world.generations["sim-a"] == 2 and world.applied_generations["sim-a"] == 1  # left alone
        looks = world.looks
        await wait_until(lambda: _more_looks(world, looks + 4), what="a few more looks")
        status = await reporting.query(WorkloadWorkflow.status)
        assert len(events_with(status, "left in place: drift policy is report")) == 1  # said once, not every look
        assert not events_with(status, "the edit outside the plane is gone") and status.clusters[0].drift
        assert (await delete(reporting)).stage == "deleted"
    assert [h.action for h in world.heals] == ["reapply"]


async def test_an_unreachable_cluster_is_replaced_after_the_grace_and_cleaned_when_back(
        time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1, "sim-c": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2, watch=FAST), queue)
        status = await serving(handle)
        lost = sorted(c.cluster for c in status.clusters if c.state == "serving")[0]
        world.unreachable.add(lost)
        status = await until(handle, lambda s: s.stage == "degraded", "degraded")
        [seen] = [c for c in status.clusters if c.cluster == lost]
        assert seen.state == "degraded" and "cluster unreachable" in (seen.error or "") and seen.unhealthy_since
        assert status.replicas == 1  # only what serves is counted
        # Within the grace nothing moves.
        await asyncio.sleep(1)
        status = await handle.query(WorkloadWorkflow.status)
        assert status.stage == "degraded" and not world.heals
        status = await until(handle, lambda s: s.stage == "serving", "serving elsewhere")
        assert [(h.cluster, h.action) for h in world.heals] == [(lost, "replace")]
        assert world.heals[0].seconds >= FAST.grace_seconds
        serving_now = {c.cluster for c in status.clusters if c.state == "serving"}
        assert lost not in serving_now and len(serving_now) == 2 and status.replicas == 2
        assert lost in world.dgds  # still there: it could not be reached to remove it
        world.unreachable.clear()
        status = await until(handle, lambda s: events_with(s, f"{lost} answers again: its old deployment was removed"),
                             "the old deployment removed")
        assert lost not in world.dgds and len(world.dgds) == 2 and sum(world.dgds.values()) == 2
        assert lost not in {c.cluster for c in status.clusters}
        assert (await delete(handle)).stage == "deleted"
    assert world.dgds == {}


async def test_looks_are_bounded_per_run_and_the_watch_state_survives_continue_as_new(
        time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    watch = FAST.model_copy(update={"looks_per_run": 3})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=1, watch=watch), queue)
        status = await serving(handle)
        [cluster] = [c.cluster for c in status.clusters]
        world.unreachable.add(cluster)
        first = await until(handle, lambda s: s.stage == "degraded", "degraded")
        [since] = [c.unhealthy_since for c in first.clusters]
        runs = {handle.result_run_id}

        async def later_run() -> bool:
            runs.add((await handle.describe()).run_id)
            return len(runs) >= 3
        await wait_until(later_run, what="two more runs")
        status = await handle.query(WorkloadWorkflow.status)
        # The problem's start carried over: the grace counts from the first look, not from each run.
        assert status.stage == "degraded" and [c.unhealthy_since for c in status.clusters] == [since]
        world.unreachable.clear()
        await until(handle, lambda s: s.stage == "serving", "serving again")
        assert (await delete(handle)).stage == "deleted"
    assert world.dgds == {}


async def test_replicas_that_cannot_be_placed_again_are_retried_until_room_appears(
        time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2, watch=FAST), queue)
        await serving(handle)
        world.unreachable.add("sim-b")
        await until(handle, lambda s: s.stage == "degraded", "degraded")
        # past the grace: sim-b is given up on, and nothing has room
        status = await until(handle, lambda s: events_with(s, "replicas could not be placed"), "the failed placement")
        # Short of its target: degraded, or placing again already (the back-off here is 1 s).
        assert status.stage in ("degraded", "placing") and status.replicas == 1
        assert world.heals[0].outcome.startswith("its replicas could not be placed")
        world.capacity["sim-c"] = 1  # a cluster with room joins; placing is tried again after the back-off
        status = await until(handle, lambda s: s.stage == "serving", "serving the target again")
        assert status.replicas == 2 and world.dgds["sim-c"] == 1
        world.unreachable.clear()
        await until(handle, lambda s: events_with(s, "sim-b answers again"), "sim-b cleaned up")
        assert world.dgds == {"sim-a": 1, "sim-c": 1}
        assert (await delete(handle)).stage == "deleted"


async def test_a_look_without_an_answer_is_not_taken_for_an_unreachable_cluster(
        time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=1, watch=FAST), queue)
        await serving(handle)
        world.silent.add("sim-a")  # the plane's own worker keeps dying: its looks get no answer
        looks = world.looks
        await wait_until(lambda: _more_looks(world, looks + 3), what="looks without an answer")
        status = await handle.query(WorkloadWorkflow.status)
        assert status.stage == "serving" and not events_with(status, "degraded")
        # Nothing heard for the silence limit: serving can no longer be claimed.
        status = await until(handle, lambda s: s.stage == "degraded", "degraded after a minute without answers")
        [seen] = status.clusters
        assert "no answer to the plane's looks" in (seen.error or "") and not world.heals
        world.silent.clear()
        await until(handle, lambda s: s.stage == "serving", "serving again once looks are answered")
        assert (await delete(handle)).stage == "deleted"


async def test_a_scale_does_not_wait_for_a_look_in_flight_and_makes_it_stale(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 2})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=1, watch=FAST), queue)
        await serving(handle)
        world.held_looks = asyncio.Event()
        del world.dgds["sim-a"]  # deleted by hand; the next look sees it missing, but answers late

        async def look_in_flight() -> bool:
            return world.looks_waiting > 0
        await wait_until(look_in_flight, what="a look in flight")
        # The scale goes ahead (it applies sim-a again, with 2 replicas) while that look is still out.
        status = await asyncio.wait_for(
            handle.execute_update(WorkloadWorkflow.scale, ScaleRequest(replicas=2, requested_by="test")), 60)
        assert status.stage == "serving" and status.replicas == 2 and world.looks_waiting > 0
        assert world.dgds == {"sim-a": 2}
        held, world.held_looks = world.held_looks, None
        held.set()
        looks = world.looks
        await wait_until(lambda: _more_looks(world, looks + 3), what="more looks")
        status = await handle.query(WorkloadWorkflow.status)
        # "missing" was seen before the scale: dropped, not healed by a second apply.
        assert status.stage == "serving" and not world.heals and not events_with(status, "degraded")
        assert (await delete(handle)).stage == "deleted"
