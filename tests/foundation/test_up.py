"""`wingsmith up` as a user runs it: a subprocess with its own WINGSMITH_HOME and ports. It must come
up ready, run a workflow through its worker, survive the worker being killed, refuse a second `up`,
stop cleanly on SIGTERM, and keep its data and workflows across a restart."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from wingsmith.local.ports import free_port

pytestmark = pytest.mark.slow


class Up:
    def __init__(self, home: Path, perf_home: Path | None = None):
        """`perf_home`: the session's perf worker home (tests/perf/conftest.py). Its estimate cache becomes this
        plane's, so a search another plane of the run already made (the demo's Kimi-K3 draft on the fleet's
        cards, asked by every plane that runs the demo) is answered from it instead of being made again."""
        self.home = home
        if perf_home is not None:
            home.mkdir(parents=True, exist_ok=True)
            (perf_home / "perf-cache").mkdir(exist_ok=True)
            (home / "perf-cache").symlink_to(perf_home / "perf-cache")
        self.ports = {k: free_port() for k in ("api", "temporal", "ui", "pg", "hub", "sim", "gateway", "metrics")}
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "TEMPORAL_ADDRESS", "WINGSMITH_AUTH_TOKENS",
                                 "WINGSMITH_KUBECONFIG_DIR")}
        self.env.update(WINGSMITH_HOME=str(home), WINGSMITH_API_PORT=str(self.ports["api"]),
                        WINGSMITH_TEMPORAL_PORT=str(self.ports["temporal"]),
                        WINGSMITH_TEMPORAL_UI_PORT=str(self.ports["ui"]),
                        WINGSMITH_POSTGRES_PORT=str(self.ports["pg"]), WINGSMITH_LOG_FORMAT="json",
                        WINGSMITH_OFFLINE_HUB_PORT=str(self.ports["hub"]),
                        WINGSMITH_SIMULATED_CLUSTERS_PORT=str(self.ports["sim"]),
                        WINGSMITH_GATEWAY_PORT=str(self.ports["gateway"]),
                        WINGSMITH_WORKER_METRICS_PORT=str(self.ports["metrics"]),
                        WINGSMITH_API_URL=f"http://127.0.0.1:{self.ports['api']}",
                        WINGSMITH_GATEWAY_URL=f"http://127.0.0.1:{self.ports['gateway']}")
        self.proc: subprocess.Popen | None = None
        self.out = home / "up.out"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    def start(self, *args: str) -> Up:
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "wingsmith.cli.main", "up", *args], env=self.env,
                                     stdout=open(self.out, "ab"), stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float = 60) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            assert self.proc.poll() is None, self.out.read_text()
            try:
                if httpx.get(f"{self.api}/readyz", timeout=2).status_code == 200 and "is up" in self.out.read_text():
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"not ready in {timeout}s:\n{self.out.read_text()}")

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(30)
        return self.proc.returncode if self.proc else 0

    def token(self) -> str:
        return next(iter(json.loads((self.home / "tokens.json").read_text())))

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)


def _worker_pid(up: Up) -> int:
    for p in up.descendants():
        if _cmd(p)[-2:] == ["-m", "worker"] and p.status() != psutil.STATUS_ZOMBIE:
            return p.pid
    raise AssertionError("no worker process")


async def _ping(up: Up) -> str:
    from contracts.ping import PingWorkflowInput
    from wingsmith.adapters.temporal import connect
    from wingsmith.domain.config import Settings
    from workflows.ping import PingWorkflow
    client = await connect(Settings(), address=f"127.0.0.1:{up.ports['temporal']}")
    wid = f"smoke-{uuid.uuid4()}"
    result = await client.execute_workflow(PingWorkflow.run, PingWorkflowInput(message="smoke"), id=wid,
                                           task_queue="wingsmith")
    assert result.message == "pong: smoke"
    return wid


async def test_up_serves_survives_a_worker_kill_and_restarts_with_its_state(tmp_path):
    up = Up(tmp_path / "home").start()
    try:
        up.wait_ready()
        ui = await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{up.ports['ui']}/", timeout=5)
        assert ui.status_code == 200  # Temporal UI
        assert (await asyncio.to_thread(httpx.get, f"{up.api}/healthz")).json() == {"status": "ok"}
        headers = {"Authorization": f"Bearer {up.token()}"}
        assert up.token() in up.out.read_text()  # printed for the person who ran `up`

        wid = await _ping(up)

        # A second `up` on the same home refuses and says why.
        second = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "wingsmith.cli.main", "up"],
                                         env=up.env, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1 and "already running" in second.stdout

        # Killing the worker leaves the API up; the supervisor brings a new worker.
        old = _worker_pid(up)
        os.kill(old, signal.SIGKILL)
        assert (await asyncio.to_thread(httpx.get, f"{up.api}/readyz", timeout=5)).status_code == 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if _worker_pid(up) != old:
                    break
            except (AssertionError, psutil.Error):
                pass
            await asyncio.sleep(0.3)
        await _ping(up)

        # Write something to the registry so the restart can prove it survived.
        from wingsmith.adapters.store.db import open_pool
        pool = await open_pool(f"postgresql://postgres@127.0.0.1:{up.ports['pg']}/wingsmith", max_size=1)
        await pool.execute("insert into events (source, step, subject, kind) values ('test', 'x', 's', 'k')")
        await pool.close()
        del headers
    finally:
        code = up.stop()
    assert code == 0, up.out.read_text()
    assert "stopped." in up.out.read_text()
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                   for p in psutil.process_iter() if str(up.home) in " ".join(_cmd(p)))

    again = Up(up.home)
    again.ports = up.ports
    again.env = up.env
    again.start()
    try:
        again.wait_ready()
        from wingsmith.adapters.temporal import connect
        from wingsmith.domain.config import Settings
        client = await connect(Settings(), address=f"127.0.0.1:{up.ports['temporal']}")
        desc = await client.get_workflow_handle(wid).describe()
        assert desc.status.name == "COMPLETED"  # the workflow from before the restart is still there
        from wingsmith.adapters.store.db import open_pool
        pool = await open_pool(f"postgresql://postgres@127.0.0.1:{up.ports['pg']}/wingsmith", max_size=1)
        assert await pool.fetchval("select count(*) from events where source = 'test'") == 1
        await pool.close()
    finally:
        assert again.stop() == 0


def _cmd(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
