"""A workload's conditions and events with reasons (contracts/conditions.py), on the time-skipping server
with fake activities: each condition's status and reason through rollout, scale, degradation, heal,
failure and delete, and `last_transition_time` moving only when the status does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from contracts import conditions as c
from contracts.workload import ScaleRequest, WorkloadStatus
from tests.workflows.fakes import World, fake_worker, workload_input
from tests.workflows.test_watch import FAST, until
from tests.workflows.test_workload import delete, serving, start
from workflows.workload import WorkloadWorkflow


def conditions(status: WorkloadStatus) -> dict[str, tuple[str, str]]:
    return {x.type: (x.status, x.reason) for x in status.conditions}


def since(status: WorkloadStatus, type: str) -> datetime:
    found = c.condition(status.conditions, type)
    assert found is not None, status.conditions
    return found.last_transition_time


def reasons(status: WorkloadStatus) -> list[str]:
    return [e.reason for e in status.timeline]


def test_a_transition_time_moves_only_with_the_status():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    kept: list[c.Condition] = []
    c.set_condition(kept, c.DEGRADED, "False", c.AS_PLANNED, "fine", t0)
    c.set_condition(kept, c.DEGRADED, "False", c.AS_PLANNED, "still fine", t0 + timedelta(minutes=1))
    assert kept[0].last_transition_time == t0 and kept[0].message == "still fine"
    c.set_condition(kept, c.DEGRADED, "True", c.CLUSTER_DEGRADED, "sim-a: not ready", t0 + timedelta(minutes=2))
    c.set_condition(kept, c.DEGRADED, "True", c.REPLICAS_MISSING, "1 of 2 missing", t0 + timedelta(minutes=3))
    assert len(kept) == 1 and kept[0].reason == c.REPLICAS_MISSING
    assert kept[0].last_transition_time == t0 + timedelta(minutes=2)  # a new reason alone is no transition


def test_an_event_keeps_its_prose_form():
    at = datetime(2026, 1, 1, 12, 0, 5, 123456, tzinfo=UTC)
    event = c.Event(reason=c.CLUSTER_SERVING, message="sim-a serving 1 replica(s) at http://x", time=at,
                    detail={"cluster": "sim-a", "replicas": 1})
    assert event.line() == "2026-01-01T12:00:05+00:00 sim-a serving 1 replica(s) at http://x"


async def test_conditions_follow_rollout_scale_and_delete(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 2, "sim-b": 2})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        status = await serving(handle)
        assert conditions(status) == {
            c.AVAILABLE: ("True", c.REPLICAS_SERVING), c.PROGRESSING: ("False", c.SETTLED),
            c.DEGRADED: ("False", c.AS_PLANNED), c.UPGRADE_IN_PROGRESS: ("False", c.NO_UPGRADE)}
        assert c.condition(status.conditions, c.AVAILABLE).message == "2 of 2 replica(s) serve"
        assert {c.PLACED, c.CLUSTER_SERVING} <= set(reasons(status))
        # Every event also reaches the old prose list, word for word, for one release.
        assert [e.line() for e in status.timeline] == status.events[-len(status.timeline):]
        available_since = since(status, c.AVAILABLE)
        progressing_since = since(status, c.PROGRESSING)

        status = await handle.execute_update(WorkloadWorkflow.scale, ScaleRequest(replicas=3, requested_by="test"))
        assert conditions(status)[c.PROGRESSING] == ("False", c.SETTLED) and status.replicas == 3
        assert since(status, c.PROGRESSING) > progressing_since  # it went True (Scaling) and back
        assert since(status, c.AVAILABLE) == available_since  # served all along: no transition
        assert c.condition(status.conditions, c.AVAILABLE).message == "3 of 3 replica(s) serve"

        status = await delete(handle)
        assert conditions(status)[c.AVAILABLE] == ("False", c.DELETED)
        assert conditions(status)[c.PROGRESSING] == ("False", c.DELETED)
        assert c.CLUSTER_REMOVED in reasons(status)


async def test_a_degraded_cluster_shows_in_the_conditions_until_healed(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2, watch=FAST), queue)
        await serving(handle)
        world.unreachable.add("sim-a")
        status = await until(handle, lambda s: s.stage == "degraded", "degraded")
        assert conditions(status)[c.DEGRADED] == ("True", c.CLUSTER_DEGRADED)
        assert "sim-a" in c.condition(status.conditions, c.DEGRADED).message
        assert conditions(status)[c.AVAILABLE] == ("True", c.REPLICAS_SERVING)  # sim-b still serves
        assert c.CLUSTER_DEGRADED_EVENT in reasons(status)
        degraded_at = [e for e in status.timeline if e.reason == c.CLUSTER_DEGRADED_EVENT][-1]
        assert degraded_at.detail["cluster"] == "sim-a"
        world.unreachable.clear()
        status = await until(handle, lambda s: s.stage == "serving", "serving again")
        assert conditions(status)[c.DEGRADED] == ("False", c.AS_PLANNED)
        assert since(status, c.DEGRADED) >= degraded_at.time
        assert {c.RECOVERED, c.HEALED} & set(reasons(status))
        assert (await delete(handle)).stage == "deleted"


async def test_a_failed_workload_says_so_in_every_condition(time_skipping_env: WorkflowEnvironment):
    world = World(capacity={"sim-a": 1, "sim-b": 1}, crash_looping={"sim-b"})
    async with fake_worker(time_skipping_env.client, world) as queue:
        handle = await start(time_skipping_env.client, workload_input(queue, replicas=2), queue)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        status = await handle.query(WorkloadWorkflow.status)
        assert conditions(status) == {
            c.AVAILABLE: ("False", c.FAILED), c.PROGRESSING: ("False", c.FAILED), c.DEGRADED: ("True", c.FAILED),
            c.UPGRADE_IN_PROGRESS: ("False", c.NO_UPGRADE)}
        assert c.condition(status.conditions, c.DEGRADED).message == status.failure
        assert c.ROLLING_BACK in reasons(status)
