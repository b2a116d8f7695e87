"""After the Kimi-K3 workload serves on two clusters, clients get chat completions (streaming and
not) from the gateway with model `kimi-k3`, answered by both clusters; a failing cluster loses its
traffic without a client error; deleting the workload removes its routes before its DGDs go."""

from __future__ import annotations

import os

import openai

from tests.support import history_json, running_worker, save_history, wait_until
from tests.workloads.conftest import as_, dgds
from tests.workloads.test_workload_journey import _until_stage


async def test_one_model_name_over_two_clusters(api, deps, temporal_client, clusters, approved_kimi, gateway,
                                                pg_pool):
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
            "name": "kimi-ep", "served_model_name": "kimi-k3"})
        assert r.status_code == 202, r.text
        await _until_stage(api, "kimi-ep", {"serving"})

        r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": "kimi-k3", "workloads": ["kimi-ep"]})
        assert r.status_code == 202, r.text

        async def two_backends():
            route = gateway.client.get_route("kimi-k3")
            return route if route and len(route.serving) == 2 else None
        route = await wait_until(two_backends, timeout=30, what="both clusters in the gateway's routes")
        assert {b.cluster for b in route.backends} == {"sim-east", "sim-west"}
        assert all(b.weight == 1 for b in route.backends)

        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused")
        answered_by = set()
        for _ in range(6):
            raw = client.chat.completions.with_raw_response.create(
                model="kimi-k3", messages=[{"role": "user", "content": "hello"}])
            answered_by.add(raw.headers["x-wingsmith-backend"].split("/")[0])
            assert raw.parse().choices[0].message.content
        assert answered_by == {"sim-east", "sim-west"}
        chunks = list(client.chat.completions.create(model="kimi-k3", stream=True,
                                                     messages=[{"role": "user", "content": "stream please"}]))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

        async def recorded():
            got = (await api.get("/v1/endpoints/kimi-k3", headers=as_("tok-vic"))).json()
            return got if got.get("state") == "serving" else None
        endpoint = await wait_until(recorded, what="the endpoint's registry row")
        assert len(endpoint["health"]["backends"]) == 2 and len(endpoint["routes"]) == 2

        # Scaling down to one cluster drains the leaving cluster (weight 0, in-flight requests finish)
        # before its DGD goes, and the route keeps the other one.
        r = await api.patch("/v1/workloads/kimi-ep", headers=as_("tok-olga"), json={"replicas": 1})
        assert r.status_code == 200, r.text
        events = r.json()["events"]
        drained = next(i for i, e in enumerate(events) if "endpoints drained" in e)
        leaving = events[drained].rsplit(" ", 1)[-1]
        removed = next(i for i, e in enumerate(events) if f"{leaving} removed" in e)
        assert drained < removed, events
        assert set(dgds(clusters, "kimi-ep")) == {"sim-east", "sim-west"} - {leaving}

        async def one_backend():
            route = gateway.client.get_route("kimi-k3")
            return route if route and [b.cluster for b in route.backends] == sorted(
                {"sim-east", "sim-west"} - {leaving}) and route.backends[0].weight == 1 else None
        await wait_until(one_backend, timeout=30, what="the leaving cluster gone from the routes")
        raw = client.chat.completions.with_raw_response.create(
            model="kimi-k3", messages=[{"role": "user", "content": "still there?"}])
        assert raw.headers["x-wingsmith-backend"].split("/")[0] != leaving

        # Deleting the workload drains and removes its routes before any DGD goes.
        before_delete = await pg_pool.fetchval("select coalesce(max(id), 0) from events")
        r = await api.delete("/v1/workloads/kimi-ep", headers=as_("tok-olga"))
        assert r.status_code == 202
        await _until_stage(api, "kimi-ep", {"deleted"}, timeout=60)
        assert dgds(clusters, "kimi-ep") == {}
        assert gateway.client.get_route("kimi-k3") is None
        events = await pg_pool.fetch("select kind, at from events where subject in ('kimi-ep', 'kimi-k3') and id > $1"
                                     " order by id", before_delete)
        kinds = [e["kind"] for e in events]
        routes_gone = max(i for i, k in enumerate(kinds) if k.startswith("endpoint_"))
        first_delete = min(i for i, k in enumerate(kinds) if k == "deployment_deleted")
        assert routes_gone < first_delete, kinds

        r = await api.delete("/v1/endpoints/kimi-k3", headers=as_("tok-olga"))
        assert r.status_code == 202
        handle = temporal_client.get_workflow_handle("endpoint/kimi-k3")
        await handle.result()
        assert gateway.client.get_route("kimi-k3") is None
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            save_history("endpoint_scale_down_and_delete", handle.id, await history_json(handle))
            workload = temporal_client.get_workflow_handle("workload/kimi-ep")
            save_history("workload_drained_scale_down", workload.id, await history_json(workload))
