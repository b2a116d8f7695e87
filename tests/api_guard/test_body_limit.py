"""Request bodies are capped where they arrive, before the token is checked: an anonymous caller
cannot make the API hold a large body in memory (issue #31: a 300 MB unauthenticated POST took 3 s
to get its 401 and grew the process from 143 to 818 MB).

The API runs here as its own process under uvicorn, as deployed, so its memory can be read alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from api.app import create_app
from api.auth import TokenTable
from tests.api_guard.conftest import TOKENS, as_
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port

MB = 1024 * 1024
HUGE = 300 * MB
# What reading a 300 MB body costs is hundreds of MB; what answering a request costs is well under this.
RSS_GROWTH_ALLOWED = 40 * MB


@pytest.fixture(scope="module")
def api_process(tmp_path_factory) -> Iterator[tuple[str, psutil.Process]]:
    """`uvicorn api.main:app` with a token table and nothing behind it (no body reaches a store)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEMPORAL_ADDRESS")
           and not k.startswith("WINGSMITH_")}
    env.update(WINGSMITH_AUTH_TOKENS=json.dumps(TOKENS), WINGSMITH_LOG_FORMAT="json", WINGSMITH_LOG_LEVEL="WARNING",
               WINGSMITH_HOME=str(tmp_path_factory.mktemp("body-limit") / "home"))
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=env,
                            cwd=Path(__file__).resolve().parents[2])
    yield from _served(proc, port, "API")


def _served(proc: subprocess.Popen, port: int, what: str) -> Iterator[tuple[str, psutil.Process]]:
    """Once `proc` answers /healthz on `port`: its base URL and process; stopped afterwards, even when
    the test fails."""
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, f"the {what} did not start"
            time.sleep(0.1)
        yield base, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _peak_rss(proc: psutil.Process) -> int:
    """The process's high-water mark of resident memory (Linux VmHWM), in bytes."""
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


def _zeros(total: int, chunk: int = MB) -> Iterator[bytes]:
    block = b"0" * chunk
    for _ in range(total // chunk):
        yield block


def _too_large(r: httpx.Response, limit: int = MB) -> None:
    assert r.status_code == 413, r.text[:500]
    error = r.json()["error"]
    assert error["code"] == "too_large" and f"{limit} bytes" in error["message"], error


def test_a_declared_300_mb_body_is_refused_before_a_byte_of_it_is_sent(api_process):
    """The answer comes from the headers alone: the caller need not send the body to learn it."""
    base, _ = api_process
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /v1/artifacts HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {HUGE}\r\n\r\n".encode())
        started = time.monotonic()
        head = ""
        while not head.endswith("}}"):
            got = sock.recv(65536).decode("latin-1")
            assert got, head
            head += got
        assert time.monotonic() - started < 2
    assert head.startswith("HTTP/1.1 413 "), head
    assert '"code":"too_large"' in head, head


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_anonymous_300_mb_body_gets_413_and_the_api_does_not_grow(api_process, declared):
    base, proc = api_process
    headers = {"content-type": "application/json"}
    if declared:
        headers["content-length"] = str(HUGE)
    before = _peak_rss(proc)
    started = time.monotonic()
    r = httpx.post(f"{base}/v1/artifacts", content=_zeros(HUGE), headers=headers, timeout=60)
    elapsed = time.monotonic() - started
    _too_large(r)
    grown = _peak_rss(proc) - before
    assert grown < RSS_GROWTH_ALLOWED, f"the API's peak memory grew by {grown // MB} MB"
    assert elapsed < 15, f"{elapsed:.1f} s"  # the time to push 300 MB over loopback, not to parse it
    assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200


async def test_the_cap_is_a_setting_and_holds_for_signed_in_callers_too():
    settings = Settings(auth_tokens=json.dumps(TOKENS), log_format="json", max_request_bytes=8192)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        over = {"source": "hf:" + "a" * 9000}
        r = await api.post("/v1/artifacts", json=over, headers=as_("tok-olga"))
        _too_large(r, 8192)

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it is read
            yield json.dumps(over).encode()
        r = await api.post("/v1/artifacts", content=chunked(), headers={**as_("tok-olga"),
                                                                        "content-type": "application/json"})
        _too_large(r, 8192)
        # Under the cap, the request goes on to its route as before (which here finds no Temporal).
        r = await api.post("/v1/artifacts", json={"source": "hf:" + "a" * 7000}, headers=as_("tok-olga"))
        assert r.status_code == 503 and "Temporal" in r.text, r.text
        # The console's forms are read by hand, under the same cap.
        r = await api.post("/console/login", content=b"token=" + b"x" * 9000,
                           headers={"content-type": "application/x-www-form-urlencoded"})
        _too_large(r, 8192)


@pytest.fixture(scope="module")
def gateway_process(tmp_path_factory) -> Iterator[tuple[str, psutil.Process]]:
    """`python -m gateway` as deployed, with its default cap (10 MB)."""
    port = free_port()
    state = tmp_path_factory.mktemp("gateway-cap")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "--port", str(port), "--state-dir", str(state),
                             "--log-level", "WARNING"], cwd=Path(__file__).resolve().parents[2],
                            stderr=subprocess.DEVNULL)
    yield from _served(proc, port, "gateway")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_the_gateway_public_port_refuses_300_mb_without_growing(gateway_process, declared):
    base, proc = gateway_process
    headers = {"content-type": "application/json"}
    if declared:
        headers["content-length"] = str(HUGE)
    before = _peak_rss(proc)
    r = httpx.post(f"{base}/v1/chat/completions", content=_zeros(HUGE), headers=headers, timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text[:300]
    grown = _peak_rss(proc) - before
    assert grown < RSS_GROWTH_ALLOWED, f"the gateway's peak memory grew by {grown // MB} MB"
