"""The endpoint pages against a real Temporal, Postgres, the simulated clusters and the local gateway:
backends, weights and health as the API reports them, the model name and gateway URL, and a curl
that really gets a chat completion when pasted into a shell."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from html import unescape

import httpx

from console.endpoints import backend_rows, health_of
from tests.console.conftest import browser_for, csrf_of, sign_in
from tests.console.test_public_pages import commands, rows
from tests.endpoints.conftest import api, approved_kimi, clusters, deps, gateway, hub, settings, sims  # noqa: F401
from tests.support import running_worker, wait_until
from tests.workloads.conftest import as_
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.cli.workloads import endpoint_text
from wingsmith.domain.gateway import Backend, BackendStatus
from wingsmith.domain.gateway.traffic import BackendTraffic, parse_traffic

WL, MODEL = "kimi-ep-console", "kimi-k3-console"


async def test_endpoint_pages_show_backends_weights_health_and_a_working_curl(
        plane, api, deps, temporal_client, clusters, approved_kimi, gateway):  # noqa: F811
    async with browser_for(plane) as vic:
        await sign_in(vic, "tok-vic")
        empty = await vic.get("/console/endpoints")
        assert empty.status_code == 200 and 'id="no-endpoints"' in empty.text
        assert "wingsmith endpoints create &lt;model name&gt; &lt;workload id&gt;" in empty.text
        missing = await vic.get("/console/endpoints/no-such-model")
        assert missing.status_code == 404 and "endpoint no-such-model not found" in missing.text

        async with running_worker(temporal_client, deps):
            r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
                "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
                "name": WL, "served_model_name": "kimi-k3"})
            assert r.status_code == 202, r.text
            await _until_stage(api, WL, {"serving"})
            r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": MODEL, "workloads": [WL]})
            assert r.status_code == 202, r.text

            async def recorded():
                got = (await api.get(f"/v1/endpoints/{MODEL}", headers=as_("tok-vic"))).json()
                ok = got.get("state") == "serving" and len((got.get("health") or {}).get("backends", [])) == 2
                return got if ok else None
            await wait_until(recorded, timeout=30, what="both clusters behind the endpoint")

            listing = await vic.get("/console/endpoints")
            row = rows(listing.text, "endpoint")[MODEL]
            assert WL in row and "serving" in row and row.count("weight 1") == 2
            assert f'href="/console/workloads/{WL}"' in listing.text

            page = await vic.get(f"/console/endpoints/{MODEL}")
            assert page.status_code == 200, page.text
            # A pasted curl, run by a shell, gets an answer from one of the two clusters.
            (curl,) = commands(page.text)
            done = await asyncio.to_thread(subprocess.run, ["bash", "-c", curl], capture_output=True, text=True,
                                           timeout=30)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["choices"][0]["message"]["content"]

            page = await vic.get(f"/console/endpoints/{MODEL}")
            endpoint = (await api.get(f"/v1/endpoints/{MODEL}", headers=as_("tok-vic"))).json()
            html = unescape(page.text)
            # Its conditions, as the endpoint's workflow sets them: the page and `wingsmith endpoints show`
            # read the API's (the old fields stay beside them).
            conditions = {c["type"]: c for c in endpoint["conditions"]}
            available = conditions["Available"]
            assert (available["status"], available["reason"]) == ("True", "RoutesPublished"), conditions
            assert all(b["cluster"] in available["message"] for b in endpoint["routes"]), available
            assert (conditions["Progressing"]["status"], conditions["Progressing"]["reason"]) == ("False", "Settled")
            for c in conditions.values():
                assert (f'data-condition="{c["type"]}" data-status="{c["status"]}"><th>{c["type"]}</th>'
                        f'<td>{c["status"]}</td><td><code>{c["reason"]}</code>') in html
            shown_text = endpoint_text(endpoint)
            assert re.search(rf"^condition Available +True  RoutesPublished: {re.escape(available['message'])}$",
                             shown_text, flags=re.M), shown_text
            assert re.search(rf'id="model-name">{MODEL}<', html) and f'id="gateway-url">{gateway.url}/v1<' in html
            assert "/workflows/endpoint%2Fkimi-k3-console" in html
            # The workload serves its own name, which differs from the endpoint's.
            assert "serve it as kimi-k3" in re.sub(r"<[^>]+>", "", html)
            shown = rows(page.text, "backend")
            routes = {b["id"]: b for b in endpoint["health"]["routes"]["backends"]}
            assert set(shown) == set(routes) and len(shown) == 2
            assert {b["cluster"] for b in routes.values()} == {"sim-east", "sim-west"}
            # Counts and latencies are the gateway's Prometheus numbers, read the way Prometheus does.
            async with httpx.AsyncClient() as http:
                traffic = parse_traffic((await http.get(f"{gateway.url}/metrics")).text, MODEL)
            answered = 0
            for status in endpoint["health"]["backends"]:
                text, route = shown[status["id"]], routes[status["id"]]
                assert route["cluster"] in text and route["workload_id"] in text and route["url"] in text
                assert f"weight {route['weight']} (50.0% of new requests)" in text
                assert "healthy" in text and "unhealthy" not in text
                seen = traffic.get(status["id"])
                if seen is not None:
                    assert f"{seen.requests} answered" in text and "p50 " in text and "p99 " in text
                    answered += seen.requests
            assert answered >= 1, "the curl's request is counted on the page"

            # The workloads edit form: operators only; the same checked change as PATCH, its refusal in words.
            assert 'id="workloads-form"' not in page.text
            async with browser_for(plane) as olga:
                await sign_in(olga, "tok-olga")
                mine = await olga.get(f"/console/endpoints/{MODEL}")
                assert 'id="workloads-form"' in mine.text and f'<option value="{WL}" selected>' in mine.text
                refused = await olga.post(f"/console/endpoints/{MODEL}/workloads",
                                          data={"workloads": [WL, "nope"], "csrf": csrf_of(mine.text)})
                assert refused.status_code == 422 and "unknown workload(s): nope" in unescape(refused.text)
                kept = await olga.post(f"/console/endpoints/{MODEL}/workloads",
                                       data={"workloads": [WL], "csrf": csrf_of(mine.text)})
                assert kept.status_code == 303 and kept.headers["location"] == f"/console/endpoints/{MODEL}?changed=1"
                assert 'id="changed"' in (await olga.get(kept.headers["location"])).text

            await api.delete(f"/v1/workloads/{WL}", headers=as_("tok-olga"))
            await _until_stage(api, WL, {"deleted"}, timeout=60)
            drained = await vic.get(f"/console/endpoints/{MODEL}")
            assert 'id="no-backends"' in drained.text and rows(drained.text, "backend") == {}


def _backend(weight: int = 1, **extra) -> Backend:
    return Backend(id="sim-east/kimi-ep-console-sim-east", cluster="sim-east", workload_id="kimi-ep-console",
                   url="http://127.0.0.1:40001/frontends/sim-east/kimi-ep-console", weight=weight, **extra)


def _status(**kw) -> BackendStatus:
    base = dict(id="sim-east/kimi-ep-console-sim-east", weight=1, healthy=True, cooling_down=False, in_flight=0)
    return BackendStatus(**{**base, **kw})


def test_health_words_follow_what_the_gateway_reports():
    cases = [
        (_backend(), _status(), "healthy"),
        (_backend(), _status(healthy=False, cooling_down=True, last_error="502 from backend"), "cooling_down"),
        (_backend(), _status(healthy=False), "unhealthy"),
        (_backend(weight=0), _status(weight=0, in_flight=2), "draining"),
        (_backend(weight=0), _status(weight=0, healthy=False, cooling_down=True), "draining"),
        (_backend(), _status(healthy=None, in_flight=None), "not_reported"),  # the Envoy gateway
        (_backend(), None, "unknown"),
    ]
    for backend, status, expected in cases:
        assert health_of(backend, status) == expected, (backend, status)


def test_backend_rows_use_the_gateways_routes_when_it_answers_else_the_recorded_ones():
    east = _backend(weight=3).model_dump(mode="json")
    west = {**east, "id": "sim-west/kimi-ep-console-sim-west", "cluster": "sim-west", "weight": 1}
    health = {"routes": {"model_name": "kimi-k3", "backends": [east, west]},
              "backends": [_status(weight=3, requests=7).model_dump(), _status(id=west["id"]).model_dump()]}
    traffic = {east["id"]: BackendTraffic(requests=7, failures=1, p50_seconds=0.012, p99_seconds=0.2)}
    got = backend_rows([east], health, traffic)
    assert [(r.cluster, r.share, r.health, r.requests, r.p50_ms) for r in got] == [
        ("sim-east", 75.0, "healthy", 7, 12.0), ("sim-west", 25.0, "healthy", 0, None)]
    assert [r.requests for r in backend_rows([east], health)] == [None, None]  # no metrics: not reported
    fallback = backend_rows([east], None)
    assert [(r.cluster, r.share, r.health) for r in fallback] == [("sim-east", 100.0, "unknown")]
