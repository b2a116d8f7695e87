"""An endpoint's workloads change through PATCH (a validated update on EndpointWorkflow): a workload
that joins is routed once it serves, a leaving one goes to weight 0 and is drained before it leaves the
routes, while clients see no error; POST on an existing name with another list answers 409."""

from __future__ import annotations

import asyncio
import os

import httpx

from tests.support import history_json, running_worker, save_history, wait_until
from tests.workloads.conftest import as_
from tests.workloads.test_workload_journey import _until_stage


async def _client_loop(url: str, stop: asyncio.Event, answers: list[tuple[int, str]]) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        while not stop.is_set():
            r = await http.post(f"{url}/v1/chat/completions", json={
                "model": "kimi-k3", "messages": [{"role": "user", "content": "hi"}]})
            answers.append((r.status_code, r.headers.get("x-wingsmith-backend", "")))
            await asyncio.sleep(0.02)


async def test_patch_moves_an_endpoint_between_workloads(api, deps, temporal_client, clusters, approved_kimi,
                                                         gateway, pg_pool):
    async with running_worker(temporal_client, deps):
        for name in ("kimi-a", "kimi-b"):
            r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
                "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1,
                "name": name, "served_model_name": "kimi-k3"})
            assert r.status_code == 202, r.text
        for name in ("kimi-a", "kimi-b"):
            await _until_stage(api, name, {"serving"})

        r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": ["kimi-a"]})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": "kimi-k3", "workloads": ["kimi-a"]})
        assert r.status_code == 202 and r.json()["started"] is True, r.text
        # The same request again is a no-op; another list is a conflict that names PATCH.
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": "kimi-k3", "workloads": ["kimi-a"]})
        assert r.status_code == 202 and r.json()["started"] is False and r.json()["workloads"] == ["kimi-a"], r.text
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": "kimi-k3", "workloads": ["kimi-b"]})
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "endpoint_exists" and "PATCH /v1/endpoints/kimi-k3" in error["message"], error
        assert error["details"]["workloads"] == ["kimi-a"]

        async def routed(*workloads: str):
            async def check():
                route = gateway.client.get_route("kimi-k3")
                got = {b.workload_id: b.weight for b in route.backends} if route else {}
                return got if got == dict.fromkeys(workloads, 1) else None
            return await wait_until(check, timeout=30, what=f"routes to exactly {workloads}")
        await routed("kimi-a")

        # Refused before anything changes: unknown workloads, an empty list, a missing body field.
        for body, status, code in (({"workloads": ["kimi-a", "nope"]}, 422, "invalid_endpoint"),
                                   ({"workloads": []}, 422, "invalid"), ({}, 422, "invalid")):
            r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json=body)
            assert r.status_code == status and r.json()["error"]["code"] == code, (body, r.text)
        assert "unknown workload(s): nope" in (await api.patch(
            "/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": ["nope"]})).json()["error"]["message"]
        r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-vic"), json={"workloads": ["kimi-b"]})
        assert r.status_code == 403

        # Join, then move: clients keep getting answers throughout.
        stop, answers = asyncio.Event(), []
        loop = asyncio.create_task(_client_loop(gateway.url, stop, answers))
        try:
            r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"),
                                json={"workloads": ["kimi-a", "kimi-b"]})
            assert r.status_code == 202 and r.json()["workloads"] == ["kimi-a", "kimi-b"], r.text
            await routed("kimi-a", "kimi-b")
            before_move = await pg_pool.fetchval("select coalesce(max(id), 0) from events")
            r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": ["kimi-b"]})
            assert r.status_code == 202, r.text
            assert r.json()["workloads"] == ["kimi-b"] and r.json()["draining"] == ["kimi-a"], r.text
            # A workload still draining cannot come straight back.
            back = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": ["kimi-a"]})
            assert back.status_code == 409 and "still draining" in back.json()["error"]["message"], back.text
            await routed("kimi-b")
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            await loop
        assert answers and all(code == 200 for code, _ in answers), [a for a in answers if a[0] != 200][:5]
        assert {b.split("/")[-1] for _, b in answers} == {"kimi-a", "kimi-b"}

        events = await pg_pool.fetch("select kind, actor, detail from events where subject = 'kimi-k3' and id > $1"
                                     " order by id", before_move)
        changed = next(e for e in events if e["kind"] == "endpoint_workloads_changed")
        assert changed["actor"] == "olga" and changed["detail"]["workloads"] == ["kimi-a", "kimi-b"]
        backends = [e["detail"]["backends"] for e in events]
        # The leaving workload stayed routed (at weight 0) until drained, and only then left.
        assert any(any(b.endswith("/kimi-a") for b in bs) for bs in backends[1:]), backends
        assert not any(b.endswith("/kimi-a") for b in backends[-1]), backends

        # The workload that left is free to go without the endpoint: its delete does not wait for it.
        row = (await api.get("/v1/endpoints/kimi-k3", headers=as_("tok-vic"))).json()
        assert row["workloads"] == ["kimi-b"], row
        handle = temporal_client.get_workflow_handle("endpoint/kimi-k3")
        r = await api.delete("/v1/endpoints/kimi-k3", headers=as_("tok-olga"))
        assert r.status_code == 202
        await handle.result()
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            save_history("endpoint_set_workloads", handle.id, await history_json(handle))
        for name in ("kimi-a", "kimi-b"):
            assert (await api.delete(f"/v1/workloads/{name}", headers=as_("tok-olga"))).status_code == 202
        for name in ("kimi-a", "kimi-b"):
            await _until_stage(api, name, {"deleted"}, timeout=60)
