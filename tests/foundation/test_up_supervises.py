"""`up` supervises its children: the API killed under chat traffic is back within seconds while every
chat through the gateway is answered, `up` names the dead child with its last words, and a child that
keeps failing at start ends `up` with a clear reason instead of cycling forever."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time

import httpx
import psutil
import pytest

from tests.foundation.test_up import Up, _cmd
from tests.gateway.conftest import MODEL, ScriptedBackend
from wingsmith.adapters.store.db import open_pool
from wingsmith.adapters.store.gateway_routes import publish
from wingsmith.domain.gateway.routes import Backend, EndpointRoutes
from wingsmith.local.child import GIVE_UP_AFTER

pytestmark = pytest.mark.slow

BACK_WITHIN = 10.0  # seconds: issue 33's bound for a killed local API
CHATTERS = 2  # clients sending chats one after another, at the same time
PACE = 0.05  # seconds each client waits between chats: steady traffic, not a flood that starves the restart


def _api_pid(up: Up) -> int | None:
    """The serving API: the oldest `-m api` process (its warm spare, same command, started after it)."""
    found = []
    for p in up.descendants():
        try:
            if _cmd(p)[-2:] == ["-m", "api"] and p.status() != psutil.STATUS_ZOMBIE:
                found.append((p.create_time(), p.pid))
        except psutil.Error:
            continue
    return min(found)[1] if found else None


class Chats:
    """Steady chat traffic through the gateway until stopped; every answer that is not a 200 counts."""

    def __init__(self, gateway: str):
        self.gateway = gateway
        self.ok = 0
        self.failures: list[str] = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._chat, daemon=True) for _ in range(CHATTERS)]

    def __enter__(self) -> Chats:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(10)

    def _chat(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.stopping.is_set():
                try:
                    r = http.post(f"{self.gateway}/v1/chat/completions",
                                  json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
                    if r.status_code == 200:
                        self.ok += 1
                    else:
                        self.failures.append(f"HTTP {r.status_code}: {r.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failures.append(type(exc).__name__)
                self.stopping.wait(PACE)


async def test_a_killed_api_comes_back_while_the_gateway_answers_and_a_child_failing_at_start_ends_up(tmp_path):
    backend = ScriptedBackend("stub")
    up = Up(tmp_path / "home").start("--no-simulated-clusters")
    gateway = f"http://127.0.0.1:{up.ports['gateway']}"
    try:
        await asyncio.to_thread(up.wait_ready)
        # The plane publishes an endpoint's routes as the endpoint activity does; the gateway pulls them.
        pool = await open_pool(f"postgresql://postgres@127.0.0.1:{up.ports['pg']}/wingsmith", max_size=1)
        try:
            await publish(pool, EndpointRoutes(model_name=MODEL, backends=[
                Backend(id="sim/stub", cluster="sim", workload_id="w1", url=backend.url, weight=1)]))
        finally:
            await pool.close()
        deadline = time.monotonic() + 15
        while (await asyncio.to_thread(httpx.get, f"{gateway}/v1/models")).json()["data"] == []:
            assert time.monotonic() < deadline, (up.home / "logs" / "gateway.log").read_text()
            await asyncio.sleep(0.2)

        # The API's warm spare has done its imports (a kill before that waits for a cold start).
        deadline = time.monotonic() + 60
        while "ready to take over" not in (up.home / "logs" / "api.log").read_text():
            assert time.monotonic() < deadline, up.out.read_text()
            await asyncio.sleep(0.2)

        with Chats(gateway) as chats:
            await asyncio.sleep(1)
            old = _api_pid(up)
            assert old is not None
            os.kill(old, signal.SIGKILL)
            killed = time.monotonic()
            back = None
            while time.monotonic() - killed < BACK_WITHIN + 5:
                try:
                    if (await asyncio.to_thread(httpx.get, f"{up.api}/healthz", timeout=1)).status_code == 200 \
                            and _api_pid(up) not in (None, old):
                        back = time.monotonic() - killed
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)  # traffic goes on after the API is back
        print(f"\nAPI back {back if back is None else round(back, 2)} s after kill -9; chats through the "
              f"gateway meanwhile: {chats.ok} answered, {len(chats.failures)} failed")
        assert back is not None and back < BACK_WITHIN, up.out.read_text()
        assert chats.failures == [] and chats.ok > 0
        said = up.out.read_text()
        assert "api was killed by SIGKILL" in said and "its last words" in said and up.proc.poll() is None

        # A child that keeps failing at start: the token table is broken, so every new API process dies
        # at start. The warm spare (started before the break) takes over; its successors keep failing.
        (up.home / "tokens.json").write_text("{not json")
        os.kill(_api_pid(up), signal.SIGKILL)
        code = await asyncio.to_thread(up.proc.wait, 180)
        said = up.out.read_text()
        assert code == 1, said
        # The spare or the API itself, whichever fails its fifth start first.
        assert re.search(rf"api(-spare)? exited with 1 {GIVE_UP_AFTER} times in a row.*giving up", said), said
        assert "WINGSMITH_AUTH_TOKENS is not valid JSON" in said  # its last words say why
        assert "stopped." in said
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                       for p in psutil.process_iter() if str(up.home) in " ".join(_cmd(p)))
    finally:
        up.stop()
        backend.stop()
