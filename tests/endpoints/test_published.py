"""An endpoint says whether the gateway routes its name yet, and `wingsmith endpoints create --wait` returns
only once it does (issue 52: the first chat 0.1 s after `POST /v1/endpoints` answered `model_not_found`,
and nothing had said it would).

Through the real API, workflows, simulated clusters and the local gateway; the CLI's own HTTP calls reach
the same in-process API (a bridge from its thread to the test's event loop)."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.support import running_worker, wait_until
from tests.workloads.conftest import as_
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.cli.main import _run
from wingsmith.domain.config import get_settings


def _chat(gateway_url: str, model: str) -> httpx.Response:
    return httpx.post(f"{gateway_url}/v1/chat/completions", timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": "hello"}]})


def _bridge(api, loop: asyncio.AbstractEventLoop, seen: list[tuple[str, str, dict | None]]):
    """`httpx.request` for the CLI's thread: the call is made by the test's in-process API client."""
    def request(method, url, json=None, params=None, headers=None, timeout=None, verify=True):  # noqa: A002 - httpx's names; no TLS in process
        path = httpx.URL(url).raw_path.decode()
        answer = asyncio.run_coroutine_threadsafe(
            api.request(method, path, json=json, params=params, headers=headers), loop).result(timeout)
        seen.append((method, path, answer.json() if answer.content else None))
        return answer
    return request


async def test_an_endpoint_says_whether_it_is_routed_and_create_wait_returns_once_it_is(
        api, deps, temporal_client, clusters, approved_kimi, gateway, monkeypatch):  # noqa: F811
    monkeypatch.setenv("WINGSMITH_TOKEN", "tok-olga")
    get_settings.cache_clear()
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1,
            "name": "kimi-pub", "served_model_name": "kimi-k3"})
        assert r.status_code == 202, r.text
        await _until_stage(api, "kimi-pub", {"serving"})

        # Over HTTP: the answer says whether a chat sent now is routed, and it tells the truth.
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"),
                           json={"name": "kimi-pub", "workloads": ["kimi-pub"]})
        assert r.status_code == 202, r.text
        answer = r.json()
        assert isinstance(answer["published"], bool), answer
        chat = await asyncio.to_thread(_chat, gateway.url, "kimi-pub")
        if not answer["published"]:
            # Not routed when the API answered: the chat after it is refused, unless the plane published the
            # routes in between (the workflow publishes them at once once its workload serves, and beside other
            # tests the chat can come a second later); then the gateway says so now.
            if chat.status_code == 200:
                now = (await api.get("/v1/endpoints/kimi-pub", headers=as_("tok-olga"))).json()
                assert now["published"] is True, (now, chat.text)
            else:
                assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found", chat.text

        async def published():
            got = (await api.get("/v1/endpoints/kimi-pub", headers=as_("tok-olga"))).json()
            return got if got.get("published") else None
        await wait_until(published, timeout=30, what="the endpoint to say the gateway routes it")
        chat = await asyncio.to_thread(_chat, gateway.url, "kimi-pub")
        assert chat.status_code == 200, chat.text

        # The CLI: `--wait` returns once the gateway routes the name, so the very next chat is answered.
        seen: list[tuple[str, str, dict | None]] = []
        monkeypatch.setattr(httpx, "request", _bridge(api, asyncio.get_running_loop(), seen))

        def create_then_chat() -> tuple[int, httpx.Response]:
            code = _run(["endpoints", "create", "kimi-wait", "kimi-pub", "--wait", "--api", "http://api"])
            return code, _chat(gateway.url, "kimi-wait")
        code, chat = await asyncio.to_thread(create_then_chat)
        monkeypatch.undo()
        get_settings.cache_clear()
    assert code == 0, seen
    assert chat.status_code == 200, chat.text
    assert seen[0][:2] == ("POST", "/v1/endpoints") and "published" in (seen[0][2] or {}), seen[0]
    assert seen[-1][:2] == ("GET", "/v1/endpoints/kimi-wait") and (seen[-1][2] or {}).get("published"), \
        json.dumps(seen[-1])
