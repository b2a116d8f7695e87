"""Every list the API takes is bounded, so nothing a caller sends can grow a workflow's input or an
activity's result past Temporal's payload limit. Issue #31: a cluster registered with 50,000
inventory pools (2.4 MB, accepted) then jammed every new workload on PayloadLimitViolation."""

from __future__ import annotations

import json

from tests.api_guard.conftest import as_
from wingsmith.domain.text import MAX_LIST, MAX_POOLS

POOL = {"hardware": "h200", "nodes": 1}


def _cluster(pools: int) -> dict:
    return {"name": "many-pools", "kubeconfig": "file:/nowhere/kubeconfig", "manual_inventory": {
        "pools": [{**POOL, "free_gpus": i % 9} for i in range(pools)]}}


def _refused(response, field: str, limit: int) -> None:
    assert response.status_code == 422, response.text[:500]
    message = response.json()["error"]["message"]
    assert field in message and f"at most {limit}" in message, message


async def test_a_cluster_with_50000_pools_is_refused(api):
    body = json.dumps(_cluster(50_000))
    assert len(body) > 1_000_000
    r = await api.post("/v1/clusters", content=body, headers={**as_("tok-ada"), "content-type": "application/json"})
    # Refused either by the body cap (413) or by the list bound (422): never stored.
    assert r.status_code in (413, 422), r.text[:500]
    r = await api.post("/v1/clusters", json=_cluster(MAX_POOLS + 1), headers=as_("tok-ada"))
    _refused(r, "manual_inventory.pools", MAX_POOLS)
    r = await api.post("/v1/clusters", json={**_cluster(1), "manual_inventory": {"pools": [
        {"hardware": "h200", "nodes": 10**12}]}}, headers=as_("tok-ada"))
    assert r.status_code == 422 and "nodes" in r.json()["error"]["message"], r.text


async def test_what_if_inventories_are_bounded(api):
    inventory = {"cluster": "what-if", "pools": [
        {"hardware_id": "h200", "product": "NVIDIA-H200", "gpus_per_node": 8, "free_gpus": 8, "nodes": 1}]}
    plan = {"hardware": "h200", "gpus_per_replica": 8, "replicas": 1}
    r = await api.post("/v1/placements/dry-run", headers=as_("tok-vic"), json={
        "plan": plan, "live": False, "inventories": [inventory] * (MAX_LIST + 1)})
    _refused(r, "inventories", MAX_LIST)
    r = await api.post("/v1/placements/dry-run", headers=as_("tok-vic"), json={
        "plan": plan, "live": False, "inventories": [{**inventory, "pools": inventory["pools"] * (MAX_POOLS + 1)}]})
    assert r.status_code == 422, r.text[:500]
    assert f"has {MAX_POOLS + 1} pools; at most {MAX_POOLS} per cluster" in r.json()["error"]["message"]
