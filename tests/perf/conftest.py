"""What the perf tests share: the case they ask about and AIConfigurator's own CLI as the reference.

Tests that need the `perf` extra import `tests.needs_perf_extra` at the top: scripts/test.sh installs it;
in CI a run without it fails at their collection rather than skipping them, so a CI that lost the extra
cannot pass by running nothing, and a developer's venv without it skips them saying how to get it. The pure
tests (test_planning.py) run without it."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from tests.support import running_worker, wait_for_pollers, wait_until
from wingsmith.domain.config import perf_task_queue
from wingsmith.domain.perf.cards import system_for

# The issue's own measured case. (gpt-oss-120b, the done-when model, takes about five times the CPU per
# search: bench/perf.py runs it.)
MODEL = "Qwen/Qwen3-32B"
CARD = "h200"
ISL, OSL, TTFT_MS, TPOT_MS = 4000, 1000, 2000.0, 50.0
ROOT = Path(__file__).resolve().parents[2]


def aiconfigurator_cli() -> str:
    found = shutil.which("aiconfigurator", path=sysconfig.get_path("scripts")) or shutil.which("aiconfigurator")
    assert found, "the aiconfigurator command is missing: install the perf extra"
    return found


def cli_default(save_dir: Path, *, model: str, system: str, gpus: int, isl: int, osl: int, ttft: float,
                tpot: float) -> subprocess.Popen:
    """AIConfigurator's own command for the same inputs, started (the caller waits for it)."""
    return subprocess.Popen(
        [aiconfigurator_cli(), "cli", "default", "--model-path", model, "--system", system, "--total-gpus", str(gpus),
         "--backend", "vllm", "--isl", str(isl), "--osl", str(osl), "--ttft", str(ttft), "--tpot", str(tpot),
         "--top-n", "1", "--save-dir", str(save_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def best_rows(save_dir: Path) -> dict[str, dict[str, str]]:
    """Rank 1 of each mode, as the CLI saved it (`<save dir>/<org>/<run>/<mode>/best_config_topn.csv`)."""
    rows = {}
    for path in save_dir.rglob("best_config_topn.csv"):
        with path.open() as f:
            first = next(csv.DictReader(f), None)
        if first is not None:
            rows[path.parent.name] = first
    return rows


def cli_recommend(save_dir: Path, *, model: str, system: str, rate: float, isl: int, osl: int, ttft: float,
                  tpot: float) -> subprocess.Popen:
    """AIConfigurator's own `recommend` (fewest GPUs for a request rate within the latency targets), started."""
    return subprocess.Popen(
        [aiconfigurator_cli(), "cli", "recommend", "--model-path", model, "--system", system, "--backend", "vllm",
         "--target-request-rate", str(rate), "--isl", str(isl), "--osl", str(osl), "--ttft", str(ttft),
         "--tpot", str(tpot), "--save-dir", str(save_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def recommending(save_dir: Path, model: str, card: str, target: dict) -> Callable[[], subprocess.Popen]:
    """`cli_recommend` for a workload's traffic target on a plane card, ready to start (`perf_worker_running`
    starts it)."""
    system = system_for(card)
    assert system is not None, f"AIConfigurator has no system for {card}"
    return partial(cli_recommend, save_dir, model=model, system=system, rate=target["requests_per_second"],
                   isl=target["isl"], osl=target["osl"], ttft=target["ttft_ms"], tpot=target["tpot_ms"])


@contextmanager
def stopped_at_the_end(cli: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """A reference run, stopped when the test ends, also when it fails."""
    try:
        yield cli
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.wait()


@pytest.fixture(scope="session")
def perf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One perf worker home for the whole run, shared by pytest-xdist's workers (the parent of a worker's
    temporary root is the run's): its estimate cache answers another test's same question in milliseconds,
    whichever worker searched it. The key holds everything the figures depend on, so sharing it cannot mix
    answers, and files are written whole (wingsmith/adapters/perf/cache.py), so workers can share it."""
    root = tmp_path_factory.getbasetemp()
    home = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "perf-home"
    home.mkdir(exist_ok=True)
    return home


# What the CLI and the console send: answered at once with where to follow a plan (without it, the API
# waits for the plan, as /v1 always did).
ASYNC = {"Prefer": "respond-async"}


async def planned(api, answer, headers: dict):
    """The final answer to a workload POST sized by traffic: the API answers 202 `state: planning` while
    AIConfigurator searches, and its status URL, read until then, answers as the dry-run does (issue 52)."""
    if answer.status_code != 202 or answer.json().get("state") != "planning":
        return answer
    url = answer.json()["status_url"]

    async def answered():
        got = await api.get(url, headers=headers)
        return None if got.status_code == 200 and got.json().get("state") == "planning" else got
    return await wait_until(answered, timeout=3600, interval=1, what="the traffic plan's answer")


async def perf_worker_polls(client, queue: str) -> bool:
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
    return bool(described.pollers)


def start_perf_worker(address: str, namespace: str, task_queue: str, home: Path, log: Path) -> subprocess.Popen:
    """The perf worker as `wingsmith up` runs it: its own process, polling `<task queue>-perf`."""
    env = {**os.environ, "WINGSMITH_TEMPORAL_ADDRESS": address, "WINGSMITH_TEMPORAL_NAMESPACE": namespace,
           "WINGSMITH_TASK_QUEUE": task_queue, "WINGSMITH_HOME": str(home), "WINGSMITH_LOG_FORMAT": "json"}
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "worker.perf"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)


@asynccontextmanager
async def perf_worker_running(temporal_server, temporal_client, deps, home: Path, log: Path, *,
                              reference: Callable[[], subprocess.Popen] | None = None,
                              ) -> AsyncIterator[subprocess.Popen | None]:
    """The plane ready to plan by load for the block: the perf worker as its own process, polling its queue,
    and the plane's worker polling both of its own. With `reference`, AIConfigurator's own CLI is started
    first thing too (its search then overlaps the wait) and yielded: read its output inside the block.
    Whatever was started is stopped when the block ends, also when it fails or the start-up does."""
    settings = deps.settings
    perf = start_perf_worker(temporal_server.address, temporal_client.namespace, settings.task_queue, home, log)
    try:
        with ExitStack() as stack:
            cli = stack.enter_context(stopped_at_the_end(reference())) if reference is not None else None
            await wait_until(lambda: perf_worker_polls(temporal_client, perf_task_queue(settings.task_queue)),
                             timeout=120, what="the perf worker to poll its queue")
            async with running_worker(temporal_client, deps):
                await wait_for_pollers(temporal_client, settings)
                yield cli
    finally:
        perf.kill()
        perf.wait()
