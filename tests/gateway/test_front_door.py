"""The gateway is a public door: request bodies are bounded (413 in OpenAI's error shape, before the
body is read when it declares its size), and an endpoint can require client API keys, configured by
reference as SHA-256 digests, never in plain text."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.gateway.conftest import MODEL, RunningGateway
from tests.gateway.test_local_gateway import MESSAGES, routes

KEY = "sk-client-key-for-kimi"


def openai_shaped(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code, error
    assert error["message"]


def test_a_30_mb_body_is_refused_with_413_and_reaches_no_backend(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    padding = "x" * (30 * 1024 * 1024)
    r = httpx.post(f"{gateway.url}/v1/chat/completions", timeout=60,
                   json={"model": MODEL, "messages": [{"role": "user", "content": padding}]})
    openai_shaped(r, 413, "request_too_large")
    assert "10485760 bytes" in r.json()["error"]["message"]
    assert backends[0].completions == 0


def test_a_body_without_a_declared_size_is_cut_off_at_the_limit(tmp_path, token_file, backends):
    gw = RunningGateway(tmp_path / "state", token_file, max_body_bytes=4096)
    try:
        gw.client.set_routes(routes((backends[0], 1)))

        def chunked() -> Iterator[bytes]:
            yield json.dumps({"model": MODEL, "messages": MESSAGES}).encode()[:-1]
            for _ in range(64):
                yield b" " * 1024
            yield b"}"
        r = httpx.post(f"{gw.url}/v1/chat/completions", content=chunked(), timeout=30,
                       headers={"content-type": "application/json"})
        openai_shaped(r, 413, "request_too_large")
        small = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES}, timeout=10)
        assert small.status_code == 200, small.text
    finally:
        gw.stop()


@pytest.fixture
def keyed_gateway(tmp_path: Path, token_file: Path, backends) -> Iterator[RunningGateway]:
    keys = tmp_path / "client-keys.json"
    keys.write_text(json.dumps({MODEL: [hashlib.sha256(KEY.encode()).hexdigest()]}))
    gw = RunningGateway(tmp_path / "state", token_file, client_keys_ref=f"file:{keys}")
    gw.client.set_routes(routes((backends[0], 1)))
    gw.client.set_routes(routes((backends[1], 1), model="open-model"))
    yield gw
    gw.stop()


def test_an_endpoint_with_client_keys_refuses_calls_without_the_key(keyed_gateway, backends):
    url = f"{keyed_gateway.url}/v1/chat/completions"
    body = {"model": MODEL, "messages": MESSAGES}
    openai_shaped(httpx.post(url, json=body, timeout=10), 401, "missing_api_key")
    wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer sk-guess"}, timeout=10)
    openai_shaped(wrong, 401, "invalid_api_key")
    assert "sk-guess" not in wrong.text and wrong.headers["www-authenticate"] == "Bearer"
    assert backends[0].completions == 0

    client = openai.OpenAI(base_url=f"{keyed_gateway.url}/v1", api_key=KEY, max_retries=0)
    answer = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert answer.choices[0].message.content and backends[0].completions == 1
    # An endpoint with no keys configured stays open.
    assert httpx.post(url, json={"model": "open-model", "messages": MESSAGES}, timeout=10).status_code == 200


def test_unreadable_client_keys_close_the_door(tmp_path, token_file, backends):
    gw = RunningGateway(tmp_path / "state", token_file, client_keys_ref=f"file:{tmp_path / 'missing.json'}")
    try:
        gw.client.set_routes(routes((backends[0], 1)))
        r = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES}, timeout=10)
        openai_shaped(r, 503, "client_keys_unavailable")
        assert backends[0].completions == 0
    finally:
        gw.stop()
