"""`python -m worker --queue <name>`: one worker Deployment per task queue, each scaling on its own.
A worker started for one queue polls that queue only; started without, it polls all of them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from tests.conftest import unique_queue
from tests.deploy.render import ROOT
from wingsmith.domain.config import Settings
from worker.main import build_workers, task_queues
from worker.registry import WorkerDeps


async def _polled(client, settings: Settings, only: list[str] | None) -> list[str]:
    workers = build_workers(client, WorkerDeps(settings=settings), task_queue=settings.task_queue,
                            kube_task_queue=settings.kube_task_queue, only=only)
    runs = [asyncio.create_task(w.run()) for w in workers]
    try:
        return [w.task_queue for w in workers]
    finally:
        await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
        await asyncio.gather(*runs, return_exceptions=True)


async def test_a_worker_for_one_queue_polls_only_that_queue(temporal_client):
    queue = unique_queue()
    settings = Settings(task_queue=queue, kube_task_queue=queue + "-kube")
    queues = task_queues(settings)
    assert len(set(queues)) == len(queues) == 3
    for q in queues:
        assert await _polled(temporal_client, settings, [q]) == [q]
    assert sorted(await _polled(temporal_client, settings, None)) == sorted(queues)


def test_an_unknown_queue_is_refused_naming_the_known_ones(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    env["WINGSMITH_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "worker", "--queue", "wingsmith-kubee"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert all(q in done.stderr for q in task_queues(Settings())), done.stderr
    assert "Traceback" not in done.stderr
