"""Light traffic is normal (one client at ~70 req/s): an upgrade's step adds its requests up across
windows until there are enough to judge, says in its status how long it will wait before deciding, and
finishes on its own: it never pauses for a person because each window alone was small. On the
time-skipping server (the real WorkloadWorkflow and EndpointWorkflow, fake activities:
tests/workflows/upgrade_world.py)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from contracts import conditions as c
from contracts.upgrade import UpgradeStatus
from tests.support import wait_until
from tests.workflows.test_upgrade import bed
from tests.workflows.upgrade_world import UpgradeWorld
from wingsmith.domain.upgrade import UpgradeThresholds
from workflows.workload import WorkloadWorkflow
from workflows.workload.upgrade import WINDOWS_TO_DECIDE

STEPS = [10, 100]
THRESHOLDS = UpgradeThresholds()  # the defaults a person gets


def _per_window(traffic: int, percent: int) -> int:
    """Requests to the new version per window: the fake gateway adds `traffic` per reading, shared by
    weight, and a window is two readings."""
    return 2 * (traffic * percent // 100)


async def test_light_traffic_adds_up_across_windows_and_the_upgrade_finishes_on_its_own(
        time_skipping_env: WorkflowEnvironment):
    # Too few per window to judge (the old rule paused after 3 such windows), enough within a few.
    traffic = next(t for t in range(1, 1000) if _per_window(t, STEPS[0]) >= THRESHOLDS.min_requests // 4)
    assert _per_window(traffic, STEPS[0]) < THRESHOLDS.min_requests
    world = UpgradeWorld(capacity={"sim-a": 4}, traffic=traffic)
    async with bed(time_skipping_env, world, replicas=1) as b:
        await b.upgrade(steps=STEPS, thresholds=THRESHOLDS)

        async def collecting() -> UpgradeStatus | None:
            status = await b.workload.query(WorkloadWorkflow.status)
            up = status.upgrade
            if up is None or not up.clusters or up.clusters[0].decides_by is None:
                return None
            [progress] = [cond for cond in status.conditions if cond.type == c.UPGRADE_IN_PROGRESS]
            return up if "deciding by" in progress.message else None
        seen = await wait_until(collecting, timeout=30, interval=0.05, what="the step to say when it decides")
        assert seen.started_at is not None and seen.clusters[0].decides_by is not None
        assert (seen.clusters[0].decides_by - seen.started_at).total_seconds() >= WINDOWS_TO_DECIDE * seen.dwell_seconds
        done = await b.ended()
        assert done.state == "succeeded", (done.paused_reason, done.failures)
        assert [e.kind for e in world.events].count("workload_upgrade_paused") == 0
        assert all(p.decides_by is None for p in done.clusters)
        judged = [e.detail for e in world.events if e.kind == "workload_upgrade_step"]
        first = [d for d in judged if d["percent"] == STEPS[0]]
        # Several windows at the first step, the last one judged on their sum.
        assert len(first) > 1 and first[-1]["enough_traffic"], first
        assert first[-1]["figures"]["new_requests"] >= THRESHOLDS.min_requests > first[0]["figures"]["new_requests"]


async def test_a_trickle_that_never_adds_up_is_decided_on_what_came_without_a_pause(
        time_skipping_env: WorkflowEnvironment):
    # So little that even all the windows together stay short of the minimum: the step still decides.
    traffic = 100 // STEPS[0]  # one request per reading to the new version
    per_reading = traffic * STEPS[0] // 100
    # From the step's first reading, k windows see 2k - 1 readings.
    assert 0 < per_reading * (2 * WINDOWS_TO_DECIDE - 1) < THRESHOLDS.min_requests
    world = UpgradeWorld(capacity={"sim-a": 4}, traffic=traffic)
    async with bed(time_skipping_env, world, replicas=1) as b:
        await b.upgrade(steps=STEPS, thresholds=THRESHOLDS, dwell_seconds=0.2)
        done = await b.ended()
        assert done.state == "succeeded", (done.paused_reason, done.failures)
        assert [e.kind for e in world.events].count("workload_upgrade_paused") == 0
        status = await b.workload.query(WorkloadWorkflow.status)
        decided = [e for e in status.events if "decided on" in e]
        assert decided and f"in {WINDOWS_TO_DECIDE} windows" in decided[0], status.events
