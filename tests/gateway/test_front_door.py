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


# --- issue #31: the door fails closed, lists and metrics need a key, errors name nothing internal ------

DIGEST = hashlib.sha256(KEY.encode()).hexdigest()


def logged(caplog, capsys) -> str:
    """What the gateway logged (to the log capture or, once configured, to stderr)."""
    out = capsys.readouterr()
    return caplog.text + out.out + out.err

WRONG_SHAPES = {
    "digest-not-in-a-list": {MODEL: DIGEST},
    "object-for-a-list": {MODEL: {"key": DIGEST}},
    "number-in-the-list": {MODEL: [DIGEST, 12345]},
    "plain-key-not-a-digest": {MODEL: [KEY]},
    "wildcard-not-a-list": {"*": DIGEST, MODEL: [DIGEST]},
    "a-list-not-an-object": [DIGEST],
}


@pytest.mark.parametrize("table", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_a_keys_table_of_the_wrong_shape_lets_nothing_through(tmp_path, token_file, backends, table, caplog, capsys):
    caplog.set_level("ERROR")
    keys = tmp_path / "client-keys.json"
    keys.write_text(json.dumps(table))
    gw = RunningGateway(tmp_path / "state", token_file, client_keys_ref=f"file:{keys}")
    try:
        gw.client.set_routes(routes((backends[0], 1)))
        gw.client.set_routes(routes((backends[1], 1), model="open-model"))
        for model, headers in [(MODEL, {}), (MODEL, {"Authorization": f"Bearer {KEY}"}), ("open-model", {})]:
            r = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": model, "messages": MESSAGES},
                           headers=headers, timeout=10)
            openai_shaped(r, 503, "client_keys_unavailable")
            assert str(tmp_path) not in r.text and "client-keys.json" not in r.text
        openai_shaped(httpx.get(f"{gw.url}/v1/models", timeout=10), 503, "client_keys_unavailable")
        assert backends[0].completions == backends[1].completions == 0
        # The operator's log names the file and what is wrong with it.
        log = logged(caplog, capsys)
        assert "gateway client keys unusable" in log and str(keys) in log, log
    finally:
        gw.stop()


def test_with_client_keys_on_listing_the_models_needs_a_key(keyed_gateway):
    url = f"{keyed_gateway.url}/v1/models"
    openai_shaped(httpx.get(url, timeout=10), 401, "missing_api_key")
    openai_shaped(httpx.get(url, headers={"Authorization": "Bearer sk-guess"}, timeout=10), 401, "invalid_api_key")
    listed = httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert listed.status_code == 200, listed.text
    assert sorted(m["id"] for m in listed.json()["data"]) == sorted([MODEL, "open-model"])
    openai_shaped(httpx.get(f"{url}/{MODEL}", timeout=10), 401, "missing_api_key")
    assert httpx.get(f"{url}/{MODEL}", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).status_code == 200
    assert httpx.get(f"{url}/open-model", timeout=10).status_code == 200


def test_with_client_keys_on_metrics_need_the_admin_token(keyed_gateway):
    url = f"{keyed_gateway.url}/metrics"
    assert httpx.get(url, timeout=10).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10).status_code == 401
    scraped = httpx.get(url, headers={"Authorization": f"Bearer {keyed_gateway.token}"}, timeout=10)
    assert scraped.status_code == 200 and "wingsmith_gateway" in scraped.text, scraped.text[:300]


def test_errors_name_no_internal_path_or_address(tmp_path, token_file, caplog):
    caplog.set_level("WARNING")
    hidden = tmp_path / "secret-place"
    gw = RunningGateway(tmp_path / "state", token_file, client_keys_ref=f"file:{hidden / 'keys.json'}")
    try:
        r = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES}, timeout=10)
        openai_shaped(r, 503, "client_keys_unavailable")
        assert "secret-place" not in r.text and "keys.json" not in r.text, r.text
    finally:
        gw.stop()
    missing_token = RunningGateway(tmp_path / "state2", token_file)
    token_file.rename(hidden.parent / "moved-token")
    try:
        r = httpx.get(f"{missing_token.url}/admin/routes", headers={"Authorization": "Bearer x"}, timeout=10)
        openai_shaped(r, 503, "admin_token_unavailable")
        assert str(tmp_path) not in r.text and "gateway-token" not in r.text, r.text
    finally:
        missing_token.stop()
        (hidden.parent / "moved-token").rename(token_file)


def test_a_failed_backend_is_not_named_to_the_client(gateway, caplog, capsys):
    caplog.set_level("WARNING")
    gateway.client.set_routes(routes(("http://127.0.0.1:9", 1), ("http://127.0.0.1:9/other", 1)))
    r = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES}, timeout=10)
    openai_shaped(r, 502, "backend_failed")
    for internal in ("127.0.0.1", "sim-b0", "sim-b1", "ConnectError"):
        assert internal not in r.text, r.text
    assert "sim-b0/kimi-k3: ConnectError" in logged(caplog, capsys)  # the operator still learns which and why


def test_the_cap_covers_every_route_before_anything_reads_it(gateway):
    """The admin API reads its body only after the token; even then it reads no more than the cap."""
    big = b"{" + b" " * (11 * 1024 * 1024) + b"}"
    r = httpx.put(f"{gateway.url}/admin/routes/{MODEL}", content=big, timeout=60,
                  headers={"Authorization": f"Bearer {gateway.token}", "content-type": "application/json"})
    openai_shaped(r, 413, "request_too_large")

    def chunked() -> Iterator[bytes]:
        yield big
    r = httpx.put(f"{gateway.url}/admin/routes/{MODEL}", content=chunked(), timeout=60,
                  headers={"Authorization": f"Bearer {gateway.token}", "content-type": "application/json"})
    openai_shaped(r, 413, "request_too_large")
