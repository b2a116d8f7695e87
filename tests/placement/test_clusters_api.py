"""The cluster registry and dry-run placement, through the store functions and the HTTP API on a real
Postgres (a fresh database for this module)."""

from __future__ import annotations

import json

import httpx
import pytest
import pytest_asyncio
from pydantic import ValidationError

from api.app import create_app
from api.auth import TokenTable
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterExists, ClusterInUse, ClusterSpec
from wingsmith.domain.config import Settings

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]},
          "tok-op": {"name": "otto", "roles": ["operator"]},
          "tok-view": {"name": "vic", "roles": ["viewer"]}}
ADMIN, OPERATOR, VIEWER = ({"Authorization": f"Bearer {t}"} for t in ("tok-admin", "tok-op", "tok-view"))


def spec(name: str, **extra) -> ClusterSpec:
    return ClusterSpec(name=name, kubeconfig="/etc/wingsmith/kubeconfig", kube_context=name, **extra)


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, tmp_path):
    await pg_pool.execute("delete from clusters")
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


# --- store ----------------------------------------------------------------------------------------------

async def test_store_create_get_list_cordon_delete(pg_pool):
    await pg_pool.execute("delete from clusters")
    manual = {"pools": [{"hardware": "h200", "nodes": 4}, {"hardware": "gb200", "nodes": 16, "free_gpus": 2}]}
    record, created = await store.create_cluster(pg_pool, spec("west", region="us-west", labels={"tier": "gold"},
                                                               manual_inventory=manual))
    assert created and record.region == "us-west" and record.manual_inventory.pools[1].free_gpus == 2
    again, created = await store.create_cluster(pg_pool, spec("west", region="us-west", labels={"tier": "gold"},
                                                              manual_inventory=manual))
    assert not created and again == record
    with pytest.raises(ClusterExists, match="'west' is already registered with different settings"):
        await store.create_cluster(pg_pool, spec("west", region="eu-west"))
    await store.create_cluster(pg_pool, spec("east"))
    assert [c.name for c in await store.list_clusters(pg_pool)] == ["east", "west"]
    cordoned = await store.set_cordoned(pg_pool, "east", True)
    assert cordoned.cordoned and cordoned.updated_at >= cordoned.created_at
    assert (await store.get_cluster(pg_pool, "east")).info().cordoned
    assert await store.set_cordoned(pg_pool, "nowhere", True) is None
    assert await store.delete_cluster(pg_pool, "east") is True
    assert await store.delete_cluster(pg_pool, "east") is False
    assert await store.get_cluster(pg_pool, "east") is None
    inventory = record.manual_inventory.to_inventory("west")
    assert inventory.source == "manual"
    assert [(p.hardware_id, p.gpus_per_node, p.free_gpus, p.nodes) for p in inventory.pools] == [
        ("h200", 8, 8, 4), ("gb200", 4, 2, 16)]


async def test_store_refuses_to_delete_a_cluster_with_deployments(pg_pool):
    await store.create_cluster(pg_pool, spec("busy"))
    await pg_pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by)"
                          " values ('o/m@s', 'o/m', 'main', 's', 'approved', 'artifact/o/m@s', 'ada')")
    await pg_pool.execute("insert into workloads (id, artifact_id, spec, state, workflow_id, requested_by)"
                          " values ('wl-1', 'o/m@s', '{}', 'serving', 'workload/wl-1', 'otto')")
    await pg_pool.execute("insert into deployments (workload_id, cluster, dgd_name, namespace, replicas, state)"
                          " values ('wl-1', 'busy', 'd', 'ns', 1, 'ready')")
    with pytest.raises(ClusterInUse, match="'busy' still has deployments of workload.s. wl-1"):
        await store.delete_cluster(pg_pool, "busy")
    assert await store.get_cluster(pg_pool, "busy") is not None
    await pg_pool.execute("delete from deployments")
    assert await store.delete_cluster(pg_pool, "busy")


@pytest.mark.parametrize("field, value, message", [
    ("name", "Bad_Name", "must be a DNS-1123 label"),
    ("name", "x" * 64, "must be a DNS-1123 label"),
    ("kubeconfig", "apiVersion: v1\nclusters: []\nusers:\n- user: {token: s3cr3t}", "not its contents"),
    ("labels", {"tier": "has space"}, "not a valid Kubernetes-style label"),
    ("frontend_base_url", "ftp://x", "must be an http.s. URL"),
    ("manual_inventory", {"pools": [{"hardware": "h999", "nodes": 1}]}, "unknown hardware 'h999'"),
    ("manual_inventory", {"pools": [{"hardware": "h200", "nodes": 1, "free_gpus": 9}]}, "exceeds gpus_per_node"),
])
def test_spec_rejects_bad_fields_clearly(field, value, message):
    with pytest.raises(ValidationError, match=message) as info:
        ClusterSpec(**{"name": "ok", "kubeconfig": "/k", field: value})
    assert "s3cr3t" not in str(info.value.errors(include_input=False))


# --- HTTP -----------------------------------------------------------------------------------------------

async def test_register_list_show_cordon_remove_over_http(api):
    body = {"name": "eu-1", "region": "eu-west", "kubeconfig": "env:KUBECONFIG_EU", "kube_context": "eu-1",
            "labels": {"tier": "gold"}, "frontend_base_url": "http://eu-1.example:8080/"}
    r = await api.post("/v1/clusters", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert r.json()["frontend_base_url"] == "http://eu-1.example:8080"
    assert (await api.post("/v1/clusters", json=body, headers=ADMIN)).status_code == 200
    r = await api.post("/v1/clusters", json={**body, "region": "us"}, headers=ADMIN)
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"

    r = await api.get("/v1/clusters", headers=VIEWER)
    assert [c["name"] for c in r.json()["clusters"]] == ["eu-1"]
    assert (await api.get("/v1/clusters/eu-1", headers=VIEWER)).json()["kube_context"] == "eu-1"
    r = await api.get("/v1/clusters/nope", headers=VIEWER)
    assert r.status_code == 404 and "'nope' is not registered" in r.json()["error"]["message"]

    assert (await api.post("/v1/clusters/eu-1/cordon", headers=ADMIN)).json()["cordoned"] is True
    assert (await api.post("/v1/clusters/eu-1/uncordon", headers=ADMIN)).json()["cordoned"] is False
    assert (await api.delete("/v1/clusters/eu-1", headers=ADMIN)).status_code == 204
    assert (await api.delete("/v1/clusters/eu-1", headers=ADMIN)).status_code == 404


@pytest.mark.parametrize("method, path", [("POST", "/v1/clusters"), ("DELETE", "/v1/clusters/x"),
                                          ("POST", "/v1/clusters/x/cordon"), ("POST", "/v1/clusters/x/uncordon")])
async def test_only_admins_change_the_registry(api, method, path):
    body = {"name": "x", "kubeconfig": "/k"} if method == "POST" else None
    for headers in (OPERATOR, VIEWER):
        r = await api.request(method, path, json=body, headers=headers)
        assert r.status_code == 403 and "lacks the admin role" in r.json()["error"]["message"]
    assert (await api.request(method, path, json=body)).status_code == 401


async def test_bad_registration_names_the_field(api):
    r = await api.post("/v1/clusters", json={"name": "x", "kubeconfig": "clusters:\n- token: hunter2"},
                       headers=ADMIN)
    assert r.status_code == 422
    assert "kubeconfig" in r.json()["error"]["message"] and "hunter2" not in r.text


async def _register_fleet(api):
    fleet = [
        {"name": "a", "region": "eu", "manual_inventory": {"pools": [{"hardware": "h200", "nodes": 2}]}},
        {"name": "b", "region": "us", "manual_inventory": {"pools": [{"hardware": "h200", "nodes": 1}]}},
        {"name": "c", "region": "eu", "cordoned": True,
         "manual_inventory": {"pools": [{"hardware": "h200", "nodes": 8}]}},
        {"name": "d", "region": "eu"},   # live inventory only
    ]
    for c in fleet:
        r = await api.post("/v1/clusters", json={"kubeconfig": "env:KUBECONFIG_NOWHERE", **c}, headers=ADMIN)
        assert r.status_code == 201, r.text


async def test_dry_run_places_on_manual_inventories_and_writes_nothing(api, pg_pool):
    await _register_fleet(api)
    before = await pg_pool.fetchval("select (select count(*) from placements) + (select count(*) from events)")
    clusters_before = await pg_pool.fetch("select * from clusters order by name")
    plan = {"hardware": "h200", "gpus_per_node": 8, "replicas": 4}
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "live": False}, headers=VIEWER)
    assert r.status_code == 200, r.text
    decision = r.json()["decision"]
    assert decision["replicas"] == {"a": 2, "b": 1}
    assert decision["unplaced"] == 1
    reasons = {v["cluster"]: v["unplaced_reason"] for v in decision["clusters"]}
    assert reasons["c"].startswith("filtered out by cordon")
    assert "no inventory" in reasons["d"]
    assert await pg_pool.fetchval(
        "select (select count(*) from placements) + (select count(*) from events)") == before
    assert await pg_pool.fetch("select * from clusters order by name") == clusters_before


async def test_dry_run_reads_live_inventory_and_explains_an_unreadable_cluster(api):
    await _register_fleet(api)
    plan = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "clusters": ["d"]}, headers=OPERATOR)
    assert r.status_code == 200, r.text
    [verdict] = r.json()["decision"]["clusters"]
    # This app has no Temporal: live reads run in the worker (tests/workloads/test_live_inventory.py),
    # so the API explains the cluster instead of loading its kubeconfig itself.
    assert "live inventories are read by the worker" in verdict["unplaced_reason"]
    assert "Temporal is not reachable" in r.json()["inventories"][0]["error"]


async def test_dry_run_what_if_inventory_and_constraints(api):
    await _register_fleet(api)
    what_if = [{"cluster": "d", "pools": [{"hardware_id": "h200", "gpus_per_node": 8, "free_gpus": 8, "nodes": 4}]}]
    plan = {"hardware": "h200", "gpus_per_node": 8, "nodes_per_replica": 2, "replicas": 2,
            "constraints": {"regions": ["eu"], "spread": "pack"}}
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "inventories": what_if}, headers=VIEWER)
    assert r.status_code == 200, r.text
    decision = r.json()["decision"]
    assert decision["replicas"] == {"d": 2}   # pack: the roomier cluster first, and it holds both
    assert decision["unplaced"] == 0
    failed_b = [f for v in decision["clusters"] if v["cluster"] == "b" for f in v["filters"] if not f["passed"]]
    assert [f["name"] for f in failed_b] == ["region", "capacity"]   # us, and a single node


async def test_dry_run_explains_the_clusters_asked_for_and_groups_the_others(api):
    await _register_fleet(api)
    plan = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "live": False}, headers=VIEWER)
    every = r.json()["decision"]
    assert [v["cluster"] for v in every["clusters"]] == ["a", "b", "c", "d"]  # a small fleet: all, by default
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "live": False, "explain": ["c"]},
                       headers=VIEWER)
    assert r.status_code == 200, r.text
    decision = r.json()["decision"]
    assert decision["replicas"] == every["replicas"] == {"a": 1}
    assert [v["cluster"] for v in decision["clusters"]] == ["a", "c"]  # who takes replicas, and who was asked for
    assert decision["clusters"][1] == every["clusters"][2]
    assert decision["ruled_out"] == [{"filter": "inventory", "reason": "no inventory has been read for this cluster",
                                      "clusters": ["d"]}]
    assert decision["passed_over"] == ["b"]
    r = await api.post("/v1/placements/dry-run", json={"plan": plan, "live": False, "explain": ["a", "zz"]},
                       headers=VIEWER)
    assert r.status_code == 404 and "zz" in r.json()["error"]["message"]


async def test_dry_run_rejects_bad_requests_by_name(api):
    await _register_fleet(api)
    r = await api.post("/v1/placements/dry-run", json={"plan": {"hardware": "h900", "gpus_per_node": 8,
                                                                "replicas": 1}}, headers=VIEWER)
    assert r.status_code == 422 and "plan.hardware" in r.json()["error"]["message"]
    r = await api.post("/v1/placements/dry-run", json={"plan": {"hardware": "h200", "gpus_per_node": 8,
                                                                "replicas": 1}, "clusters": ["zz"]},
                       headers=VIEWER)
    assert r.status_code == 404 and "zz" in r.json()["error"]["message"]
    dup = [{"cluster": "d"}, {"cluster": "d"}]
    r = await api.post("/v1/placements/dry-run", json={"plan": {"hardware": "h200", "gpus_per_node": 8,
                                                                "replicas": 1}, "inventories": dup},
                       headers=VIEWER)
    assert r.status_code == 422 and "appears more than once" in r.json()["error"]["message"]
    assert (await api.post("/v1/placements/dry-run", json={})).status_code == 401
