"""Approved Kimi-K3 → a workload on h200 multi_node_tp_dp with 2 replicas → placed, DGDs ready,
frontends answering; scale to 3; delete leaves no DGD. On a real Temporal server and Postgres, with
the emulator's three clusters, through the API."""

from __future__ import annotations

import asyncio
import os

import httpx

from tests.support import history_json, running_worker, save_history, wait_for_pollers, wait_until
from tests.workloads.conftest import as_, dgds


async def _status(api, workload_id):
    return (await api.get(f"/v1/workloads/{workload_id}", headers=as_("tok-vic"))).json()


async def _until_stage(api, workload_id, stages, timeout=60):  # noqa: ASYNC109 - a polling deadline
    async def check():
        live = (await _status(api, workload_id)).get("live") or {}
        return live if live.get("stage") in stages else None
    return await wait_until(check, timeout=timeout, interval=0.2, what=f"workload {workload_id} to be {stages}")


async def test_create_scale_delete(api, deps, temporal_client, clusters, approved_kimi, pg_pool):
    sims = clusters
    body = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
            "name": "kimi-journey", "follow": "auto"}
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        created = r.json()
        assert created["id"] == "kimi-journey" and created["plan"]["gpus_per_replica"] == 16
        assert created["plan"]["max_num_seqs"] == 5  # the vLLM recipe's tested value on h200 wins, and is named
        assert "vLLM recipe" in created["plan"]["max_num_seqs_source"]

        again = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
        assert again.status_code == 202 and again.json()["workflow_id"] == created["workflow_id"]

        live = await _until_stage(api, "kimi-journey", {"serving", "failed"})
        assert live["stage"] == "serving", live
        serving = {c["cluster"]: c for c in live["clusters"] if c["state"] == "serving"}
        assert sum(c["replicas"] for c in serving.values()) == 2
        assert set(serving) <= {"sim-east", "sim-west"} and len(serving) == 2  # spread, h200 only
        found = dgds(sims, "kimi-journey")
        assert set(found) == set(serving) and all(len(v) == 1 for v in found.values())
        for c in serving.values():
            listing = await asyncio.to_thread(httpx.get, c["frontend_url"].rstrip("/") + "/v1/models", timeout=5)
            models = listing.json()
            assert "kimi-k3" in [m["id"] for m in models["data"]]

        row = await _status(api, "kimi-journey")
        assert row["state"] == "serving" and {d["cluster"] for d in row["deployments"]} == set(serving)
        assert row["follow"] == "auto" and row["spec"]["follow"] == "auto"  # the workflow's record keeps it
        assert all(d["state"] == "serving" and d["frontend_url"] for d in row["deployments"])

        r = await api.patch("/v1/workloads/kimi-journey", json={"replicas": 3}, headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        assert r.json()["replicas"] == 3 and r.json()["stage"] == "serving"
        replicas = {name: sum(d["spec"]["components"][1].get("replicas", 1) for d in v)
                    for name, v in dgds(sims, "kimi-journey").items()}
        assert sum(replicas.values()) == 3, replicas

        r = await api.delete("/v1/workloads/kimi-journey", headers=as_("tok-olga"))
        assert r.status_code == 202
        # A scale right behind the delete is refused with the real reason, not the stage in flight.
        r = await api.patch("/v1/workloads/kimi-journey", json={"replicas": 1}, headers=as_("tok-olga"))
        assert r.status_code == 409 and "a delete of this workload is pending" in r.json()["error"]["message"], r.text
        await _until_stage(api, "kimi-journey", {"deleted"})
        assert dgds(sims, "kimi-journey") == {}
        assert await pg_pool.fetchval("select count(*) from deployments where workload_id = 'kimi-journey'") == 0
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            for wid, name in (("workload/kimi-journey", "workload_scale_delete"),
                              ("workload/kimi-journey/cluster/sim-east", "cluster_rollout")):
                save_history(name, wid, await history_json(temporal_client.get_workflow_handle(wid)))


async def test_invalid_requests_get_422_and_start_nothing(api, clusters, approved_kimi, pg_pool):
    base = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1}
    cases = [
        ({"artifact_id": "moonshotai/Kimi-K3@" + "0" * 40}, "not found"),
        ({"layout": "zigzag"}, "unknown layout"),
        ({"hardware": "mi355x"}, "NVIDIA"),
        ({"hardware": "h100", "layout": "single_node_tp"}, "at least"),
        ({"features": ["no_such_feature"]}, "no feature"),
    ]
    before = await pg_pool.fetchval("select count(*) from workloads")
    for change, says in cases:
        r = await api.post("/v1/workloads", json={**base, **change}, headers=as_("tok-olga"))
        assert r.status_code == 422, (change, r.text)
        assert says in r.json()["error"]["message"], (change, r.json())
    assert await pg_pool.fetchval("select count(*) from workloads") == before
    r = await api.post("/v1/workloads", json=base, headers=as_("tok-ana"))
    assert r.status_code == 403  # approvers do not roll out


async def test_dry_run_returns_plan_placement_and_manifests_and_writes_nothing(api, deps, clusters, approved_kimi,
                                                                              pg_pool, temporal_client):
    body = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
            "dry_run": True, "name": "kimi-dry"}
    async with running_worker(temporal_client, deps):  # live inventories are read by the worker
        await wait_for_pollers(temporal_client, deps.settings)
        r = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
    assert r.status_code == 202, r.text
    out = r.json()
    assert out["dry_run"] is True and out["placement"]["placed"] == 2
    assert set(out["manifests"]) == set(out["placement"]["replicas"])
    for manifest in out["manifests"].values():
        assert manifest["kind"] == "DynamoGraphDeployment"
    assert await pg_pool.fetchval("select count(*) from workloads where id = 'kimi-dry'") == 0
    assert dgds(clusters, "kimi-dry") == {}
