"""Overlapping faults under steady chat load through the gateway: one cluster's DGD is edited outside
the plane and deleted 2 s later, while the plane re-applies it. The plane heals (the replica may move
to the other cluster, which then scales up) and clients see no failed request: the last serving
backend of the endpoint is never taken away or disturbed while another heals. Real Temporal, real
Postgres, the offline Hub, the simulated clusters and the local gateway."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client

from contracts import rollout as rollout_contract
from contracts.ids import cluster_rollout_workflow_id
from tests.console.conftest import sign_in
from tests.support import running_worker, wait_until
from tests.upgrade.test_upgrade_journey import MODEL, client_loops, two_cluster_workload
from tests.workloads.conftest import as_, dgds
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.cli.workloads import show_text
from wingsmith.domain.dynamo import GROUP, PLURAL, VERSION, dgd_name

WORKLOAD = "gpt-overlap"


@pytest.fixture
def settings(settings):  # noqa: F811 - the endpoint test bed, watching fast so the edit is seen before the delete
    return settings.model_copy(update={"watch_status_seconds": 0.5, "watch_probe_seconds": 1.0,
                                       "drift_grace_seconds": 4.0})


def edit_by_hand(sims, cluster: str, name: str) -> None:
    """A hand edit of the spec (what a person's `kubectl edit` does)."""
    custom = client.CustomObjectsApi(sims.api_client(cluster))
    custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name,
                                          {"spec": {"env": [{"name": "EDITED_BY", "value": "hand"}]}})


async def served_on_two_and_routed(api, gateway, workload: str) -> dict[str, int]:
    """`workload` serving one replica on each of two clusters behind the endpoint `MODEL`, every cluster
    routed: its replicas by cluster."""
    await two_cluster_workload(api, workload)
    live = await _until_stage(api, workload, {"serving"})
    held = {c["cluster"]: c["replicas"] for c in live["clusters"] if c["state"] == "serving"}
    assert sum(held.values()) == 2, held
    r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": MODEL, "workloads": [workload]})
    assert r.status_code == 202, r.text

    async def routed():
        route = gateway.client.get_route(MODEL)
        ids = {b.id for b in route.backends if b.weight > 0} if route else set()
        return ids if ids == {f"{c}/{workload}" for c in held} else None
    await wait_until(routed, timeout=30, what="every cluster routed")
    return held


async def sample_routes(gateway, must: set[str], unrouted: list[set[str]]) -> None:
    """Every 20 ms until cancelled: a route without every backend in `must` goes to `unrouted`."""
    while True:
        route = gateway.client.get_route(MODEL)
        ids = {b.id for b in route.backends if b.weight > 0} if route else set()
        if not must <= ids:
            unrouted.append(ids)
        await asyncio.sleep(0.02)


async def delete_during_reapply(sims, temporal_client, workload: str, victim: str) -> None:
    """With the victim's API slowed, wait until the plane's re-apply went through and waits for readiness,
    then delete the DGD (as the DGD vanishes under a wait for readiness), and speed the API up again."""
    rollout = temporal_client.get_workflow_handle(cluster_rollout_workflow_id(workload, victim))

    async def reapplying():
        return await rollout.query(rollout_contract.QUERY_PROGRESS) == "waiting until ready"
    await wait_until(reapplying, timeout=30, interval=0.05, what=f"the plane to re-apply {victim}")
    client.CustomObjectsApi(sims.api_client(victim)).delete_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, dgd_name(workload, victim))
    sims.faults(victim).update({"latency": 0.0})


async def assert_only_ever_serving_after_serving(pg_pool, workload: str, cluster: str) -> None:
    """The cluster's registry rows never leave `serving` once there (a row that does takes the endpoint's
    route away)."""
    rows = await pg_pool.fetch("select kind, detail from events where subject = $1 order by id", workload)
    kinds = [r["kind"] for r in rows if r["kind"].startswith("deployment_") and r["detail"]["cluster"] == cluster]
    assert "deployment_serving" in kinds, kinds
    assert set(kinds[kinds.index("deployment_serving"):]) == {"deployment_serving"}, kinds


async def delete_all(api, workload: str) -> None:
    await api.delete(f"/v1/endpoints/{MODEL}", headers=as_("tok-olga"))
    await api.delete(f"/v1/workloads/{workload}", headers=as_("tok-olga"))
    await _until_stage(api, workload, {"deleted"}, timeout=60)


async def _heals(api) -> int:
    got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
    return sum("healed" in e for e in (got.get("live") or {}).get("events", []))


async def test_an_edit_then_a_delete_of_one_cluster_heals_with_no_failed_request(
        api, deps, temporal_client, clusters, gateway, hub, settings, pg_pool):  # noqa: F811
    sims = clusters
    async with running_worker(temporal_client, deps):
        held = await served_on_two_and_routed(api, gateway, WORKLOAD)

        victim = sorted(held)[0]
        name = dgd_name(WORKLOAD, victim)
        others = sorted(set(held) - {victim})
        unrouted: list[set[str]] = []  # route samples that lacked a cluster that serves throughout
        sampling = asyncio.create_task(sample_routes(gateway, {f"{c}/{WORKLOAD}" for c in others}, unrouted))
        try:
            async with client_loops(gateway.url) as traffic:
                await asyncio.sleep(1.0)
                edit_by_hand(sims, victim, name)
                # The plane's re-apply is slowed so that the delete lands while it runs (in the report, 2 s
                # after the edit), as the DGD vanishes under a wait for readiness.
                sims.faults(victim).update({"latency": 0.4})

                await delete_during_reapply(sims, temporal_client, WORKLOAD, victim)
                heals_before = await _heals(api)

                async def healed():
                    got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
                    now = got.get("live") or {}
                    serving = sum(c["replicas"] for c in now.get("clusters", []) if c["state"] == "serving")
                    return now if now.get("stage") == "serving" and serving == 2 and await _heals(api) > heals_before \
                        else None
                await wait_until(healed, timeout=120, what="the workload healed back to 2 replicas")
                await asyncio.sleep(2.0)  # traffic goes on over whatever the heal left
        finally:
            sampling.cancel()
            sims.faults(victim).update({"latency": 0.0})
        assert traffic.sent > 50, traffic.sent
        assert traffic.errors == [], (traffic.sent, len(traffic.errors), traffic.errors[:5])
        assert unrouted == [], unrouted[:5]
        # What is shown is what runs now: a cluster whose failed deployment was removed is not listed
        # (its failure is in the events), in the status, `workloads show` and the workload page.
        got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
        listed = {c["cluster"]: c["state"] for c in got["live"]["clusters"]}
        assert set(listed.values()) == {"serving"}, listed
        running = {cluster for cluster, names in dgds(sims, WORKLOAD).items() if names}
        assert set(listed) == running, (listed, running)
        assert victim not in running  # its re-apply failed on the delete: the replica moved
        assert any(f"{victim} failed" in e for e in got["live"]["events"]), got["live"]["events"]
        assert f"cluster {victim}" not in show_text(got)
        await sign_in(api, "tok-vic")
        page = (await api.get(f"/console/workloads/{WORKLOAD}")).text
        assert f'data-cluster="{victim}"' not in page and f'data-cluster="{others[0]}"' in page
        # The clusters that kept serving were never recorded as anything but serving while the other
        # healed (a row that leaves `serving` takes the endpoint's route away), though one took the
        # moved replica.
        for other in others:
            await assert_only_ever_serving_after_serving(pg_pool, WORKLOAD, other)
        await delete_all(api, WORKLOAD)
