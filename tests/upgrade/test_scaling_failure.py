"""The overlap of issue 34 with one more fault: one cluster's DGD is edited and deleted while the plane
re-applies it, so its replica moves to the other cluster, which scales up, and that scaling fails too
(another tenant took the GPUs the new replica was placed on: its pod finds no node, the rollout's ready
deadline passes). The cluster that scales is the endpoint's last serving backend: it must stay serving,
and routed, at its old count (an event says the scaling failed, and why), its deployment put back to
that count, and the plane places the replica again later. Under steady chat load through the gateway:
0 failed client requests. Real Temporal, real Postgres, the offline Hub, the simulated clusters and the
local gateway."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts.ids import cluster_rollout_workflow_id, workload_workflow_id
from sim.kube.store import WriteOptions
from tests.support import record_history_if_asked, running_worker, wait_until
from tests.upgrade.test_overlapping_faults import (
    assert_only_ever_serving_after_serving,
    delete_all,
    delete_during_reapply,
    edit_by_hand,
    sample_routes,
    served_on_two_and_routed,
)
from tests.upgrade.test_upgrade_journey import client_loops
from tests.workloads.conftest import as_
from wingsmith.domain.dynamo import dgd_name

WORKLOAD = "gpt-scale-fails"


@pytest.fixture
def settings(settings):  # noqa: F811 - the endpoint test bed, watching fast so the edit is seen before the delete
    return settings.model_copy(update={"watch_status_seconds": 0.5, "watch_probe_seconds": 1.0,
                                       "drift_grace_seconds": 4.0})


def _take_free_gpus(sims, cluster: str) -> list[str]:
    """Another tenant's pods, bound to every node of `cluster` that has GPUs free, taking them all."""
    sim = sims.cluster(cluster)
    pods = sim.store.type_of("", "pods")
    used = sim.gpus_in_use()
    taken = []
    for node in sim.nodes():
        name = node["metadata"]["name"]
        free = int(node["status"]["allocatable"].get("nvidia.com/gpu", "0")) - used.get(name, 0)
        if free <= 0:
            continue
        gpus = {"nvidia.com/gpu": str(free)}
        sim.store.create(pods, "v1", "default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"tenant-{name}"},
            "spec": {"nodeName": name, "containers": [{"name": "main", "image": "tenant:1",
                                                       "resources": {"limits": gpus, "requests": gpus}}]},
            "status": {"phase": "Running"}}, WriteOptions(manager="tenant"))
        taken.append(f"tenant-{name}")
    return taken


def _give_back(sims, cluster: str, taken: list[str]) -> None:
    sim = sims.cluster(cluster)
    pods = sim.store.type_of("", "pods")
    for name in taken:
        sim.store.delete(pods, "v1", "default", name)


async def _live(api) -> dict[str, Any]:
    got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
    return got.get("live") or {}


async def test_a_scaling_that_fails_leaves_the_last_serving_backend_serving_and_routed(
        api, deps, temporal_client, clusters, gateway, hub, settings, pg_pool):  # noqa: F811
    sims = clusters
    async with running_worker(temporal_client, deps):
        held = await served_on_two_and_routed(api, gateway, WORKLOAD)
        assert sorted(held.items()) == [("sim-east", 1), ("sim-west", 1)], held

        victim, scaler = "sim-east", "sim-west"
        name = dgd_name(WORKLOAD, victim)
        unrouted: list[set[str]] = []  # route samples that lacked the cluster that serves throughout
        scaling = temporal_client.get_workflow_handle(cluster_rollout_workflow_id(WORKLOAD, scaler))
        first_run = (await scaling.describe()).run_id
        taken: list[str] = []
        sampling = asyncio.create_task(sample_routes(gateway, {f"{scaler}/{WORKLOAD}"}, unrouted))
        try:
            async with client_loops(gateway.url) as traffic:
                await asyncio.sleep(1.0)
                edit_by_hand(sims, victim, name)
                # The re-apply is slowed so that the delete lands while it runs; the other cluster's API is
                # slowed so that the GPUs go between the plane's placement and its scaling's apply.
                sims.faults(victim).update({"latency": 0.4})
                sims.faults(scaler).update({"latency": 1.0})
                await delete_during_reapply(sims, temporal_client, WORKLOAD, victim)

                async def scaling_started():  # the replica moved: a new rollout of the other cluster runs
                    return (await scaling.describe()).run_id != first_run
                await wait_until(scaling_started, timeout=60, interval=0.05, what=f"{scaler} to scale up")
                taken = _take_free_gpus(sims, scaler)
                sims.faults(scaler).update({"latency": 0.0})
                assert taken, "no GPU was free on the scaling cluster"

                async def scaling_failed():
                    now = await _live(api)
                    return now if any(f"{scaler}: scaling to 2 replica(s) failed" in e
                                      for e in now.get("events", [])) else None
                failed = await wait_until(scaling_failed, timeout=60, what=f"{scaler}'s scaling to fail")
                [kept] = [c for c in failed["clusters"] if c["cluster"] == scaler]
                assert kept["state"] == "serving" and kept["replicas"] == 1, kept
                # The GPUs come back: the plane places the replica again on its own, later.
                _give_back(sims, scaler, taken)
                taken = []

                async def healed():
                    now = await _live(api)
                    serving = sum(c["replicas"] for c in now.get("clusters", []) if c["state"] == "serving")
                    return now if now.get("stage") == "serving" and serving == 2 else None
                live = await wait_until(healed, timeout=120, what="the replica placed again")
                await asyncio.sleep(2.0)  # traffic goes on over whatever the heal left
        finally:
            sampling.cancel()
            sims.faults(victim).update({"latency": 0.0})
            sims.faults(scaler).update({"latency": 0.0})
            if taken:
                _give_back(sims, scaler, taken)
        assert traffic.sent > 50, traffic.sent
        assert traffic.errors == [], (traffic.sent, len(traffic.errors), traffic.errors[:5])
        assert unrouted == [], unrouted[:5]
        assert {c["cluster"]: (c["state"], c["replicas"]) for c in live["clusters"]} == {scaler: ("serving", 2)}
        events = live["events"]
        assert any(f"{victim} failed" in e for e in events), events
        [said] = [e for e in events if f"{scaler}: scaling to 2 replica(s) failed" in e]
        assert "it keeps serving 1 replica(s)" in said and "ReadyDeadlineExceeded" in said, said
        assert not any(f"{scaler} failed" in e for e in events), events
        # The cluster that kept serving was never recorded as anything but serving (a row that leaves
        # `serving` takes the endpoint's route away), though its scaling failed before it took the replica.
        await assert_only_ever_serving_after_serving(pg_pool, WORKLOAD, scaler)
        await delete_all(api, WORKLOAD)
        # The path where a scaling fails and is put back, for the replay tests.
        await record_history_if_asked(temporal_client, workload_workflow_id(WORKLOAD),
                                      "workload_scaling_failed_kept_serving")
