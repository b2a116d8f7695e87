"""`up` as a good citizen (issue 52): "up" means every part answers, the workers' pollers included; a
killed `up` takes its parts with it, so the next `up` starts; Ctrl-C stops within seconds even while
the perf worker searches; and a port in use is named in one line with what holds it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import httpx
import psutil
import pytest
from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from tests.foundation.test_up import Up
from wingsmith.adapters.perf.aiconfigurator import installed as perf_installed

pytestmark = pytest.mark.slow

GONE_WITHIN = 5.0  # seconds for every part of a SIGKILLed `up` to end
STOPPED_WITHIN = 5.0  # seconds from Ctrl-C to `up`'s exit, a perf search running
# The perf worker's queue too where the `perf` extra is installed (then Ctrl-C comes during a search).
QUEUES = ["wingsmith", "wingsmith-kube", "wingsmith-kube-observe", *(["wingsmith-perf"] if perf_installed() else [])]


def _said_up(up: Up, timeout: float = 240) -> None:
    """Until `up` prints that it is up: the moment a person starts using the plane."""
    deadline = time.monotonic() + timeout
    while "Wingsmith is up." not in up.out.read_text():
        assert up.proc is not None and up.proc.poll() is None, up.out.read_text()
        assert time.monotonic() < deadline, up.out.read_text()
        time.sleep(0.05)


async def _client(up: Up):
    from wingsmith.adapters.temporal import connect
    from wingsmith.domain.config import Settings
    return await connect(Settings(), address=f"127.0.0.1:{up.ports['temporal']}")


async def _idle_queues(up: Up) -> list[str]:
    client = await _client(up)
    idle = []
    for queue in QUEUES:
        polled = False
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind))
            polled = polled or bool(described.pollers)
        if not polled:
            idle.append(queue)
    return idle


def _alive(processes: list[psutil.Process]) -> list[str]:
    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
        except psutil.NoSuchProcess:
            continue
    return alive


def _left_after(processes: list[psutil.Process], seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(processes)


async def _start_a_search(up: Up) -> str:
    """A traffic plan on the perf queue, once the perf worker runs its search (a fresh home: no cache)."""
    from contracts.perf import ACTIVITY_PLAN_TARGET, TargetInput
    from contracts.traffic_plan import TrafficPlanInput
    from wingsmith.domain.perf.traffic import TrafficTarget
    from workflows.perf import TrafficPlanWorkflow
    client = await _client(up)
    wid = f"citizen-{uuid.uuid4()}"
    ask = TargetInput(model="Qwen/Qwen3-32B", cards=["h200"], target=TrafficTarget(
        requests_per_second=20, isl=4000, osl=1000, ttft_ms=1000, tpot_ms=40))
    handle = await client.start_workflow(TrafficPlanWorkflow.run, TrafficPlanInput(
        ask=ask, perf_task_queue="wingsmith-perf"), id=wid, task_queue="wingsmith")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = (await handle.describe()).raw_description.pending_activities
        started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        if any(a.activity_type.name == ACTIVITY_PLAN_TARGET and a.state == started for a in pending):
            return wid
        await asyncio.sleep(0.2)
    raise AssertionError(f"the perf worker did not take the search:\n{up.out.read_text()}")


async def test_up_is_ready_when_every_worker_polls_dies_with_its_parts_and_stops_a_search_at_once(tmp_path):
    up = Up(tmp_path / "home").start()
    again: Up | None = None
    parts: list[psutil.Process] = []
    try:
        # "Ready" means every part answers: a dry run right after the line finds every worker polling.
        await asyncio.to_thread(_said_up, up)
        assert await _idle_queues(up) == [], up.out.read_text()
        ready = (await asyncio.to_thread(httpx.get, f"{up.api}/readyz", timeout=5)).json()
        assert ready["checks"]["workers"] == "ok", ready
        headers = {"Authorization": f"Bearer {up.token()}"}
        clusters = (await asyncio.to_thread(httpx.get, f"{up.api}/v1/clusters", headers=headers,
                                            timeout=5)).json()["clusters"]
        # Registered once the worker polled, so each simulated cluster's preflight ran in it.
        assert clusters and all(c["preflight"] is not None for c in clusters), clusters

        # Killed outright, `up` takes every part with it (Postgres, the Temporal CLI, and the API's own children
        # that checked the simulated clusters' kubeconfig included).
        parts = up.descendants()
        assert len(parts) >= 8, [p.cmdline() for p in parts]
        os.kill(up.proc.pid, signal.SIGKILL)
        up.proc.wait(10)
        left = await asyncio.to_thread(_left_after, parts, GONE_WITHIN)
        assert left == [], f"still running {GONE_WITHIN:g} s after up was killed: {left}"

        # The next `up` on the same home and ports starts.
        again = Up(up.home)
        again.ports, again.env, again.out = up.ports, up.env, up.home / "up-again.out"
        again.start("--no-simulated-clusters")  # enough to show it starts, and quicker
        await asyncio.to_thread(again.wait_ready, 240)

        # Ctrl-C while the perf worker searches: its search is cancelled, not waited for.
        if perf_installed():
            await _start_a_search(again)
        asked = time.monotonic()
        again.proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(again.proc.wait, 60)
        took = time.monotonic() - asked
        print(f"\nCtrl-C during a perf search: up stopped in {took:.1f} s")
        assert code == 0 and took < STOPPED_WITHIN, (took, again.out.read_text())
        if perf_installed():
            assert '"searches_cancelled": 1' in (up.home / "logs" / "perf-worker.log").read_text()
    finally:  # whatever a failed run left behind, of this test's planes only
        for plane in (up, again):
            if plane is not None and plane.proc is not None and plane.proc.poll() is None:
                parts += plane.descendants()
                plane.proc.kill()
                plane.proc.wait()
        for p in parts:
            try:
                p.kill()
            except psutil.Error:
                continue


def _holding(port: int, where) -> subprocess.Popen:
    """Another program listening on `port` (as a part of an earlier plane would)."""
    script = where / "port_holder.py"
    script.write_text("import socket, sys, time\nsock = socket.socket()\n"
                      "sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                      "sock.bind(('127.0.0.1', int(sys.argv[1])))\nsock.listen()\nprint('listening', flush=True)\n"
                      "time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "listening"
    return holder


def test_a_port_in_use_is_named_in_one_line_with_what_holds_it(tmp_path):
    up = Up(tmp_path / "home")
    holder = _holding(up.ports["temporal"], tmp_path)
    try:
        done = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "up"], env=up.env, capture_output=True,
                              text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said and "Errno" not in said, said
    lines = [line for line in said.splitlines() if f"port {up.ports['temporal']}" in line]
    assert len(lines) == 1, said
    assert f"(Temporal) is in use by pid {holder.pid} (" in lines[0] and "port_holder.py" in lines[0], lines[0]
    assert "WINGSMITH_TEMPORAL_PORT" in lines[0]
    assert not (up.home / "postgres").exists()  # nothing was started


def test_a_part_whose_supervisor_died_before_its_start_is_not_started(tmp_path):
    """The launcher's answer to the race between fork and the kernel request: another parent, no start."""
    from wingsmith.local import launcher
    marker = tmp_path / "started"
    done = subprocess.run([sys.executable, "-I", "-S", launcher.__file__, "--parent", "1", "--signal", "SIGTERM", "--",
                           sys.executable, "-c", f"open({str(marker)!r}, 'w')"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 1 and "not starting it" in done.stderr, done.stderr
    assert not marker.exists()

