"""The perf worker through a real Temporal dev server: its figures are AIConfigurator's own (its CLI, run
on the same inputs in the same test, is the reference: nothing here is a hard-coded figure), a card the
tool has no database for is said in words, a second ask is answered from the cache in milliseconds, and
a plane without the extra says why there are no figures."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from importlib import metadata
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from contracts.perf import ACTIVITY_ESTIMATE, ERROR_NOT_INSTALLED, EstimateInput, EstimateOutput
from tests.conftest import unique_queue
from tests.perf.conftest import CARD, ISL, MODEL, OSL, TPOT_MS, TTFT_MS, best_rows, cli_default, stopped_at_the_end
from wingsmith.adapters.perf.aiconfigurator import Estimator
from wingsmith.domain.config import perf_task_queue
from wingsmith.domain.perf.cards import gpus_for_layout, system_for
from wingsmith.domain.perf.estimates import NOT_INSTALLED, EstimateRequest
from worker.perf import build_perf_worker

ROOT = Path(__file__).resolve().parents[2]


@workflow.defn(sandboxed=False)
class AskForEstimates:
    """What a draft's workflow does (h1 wires the real one): ask the perf queue, never wait for ever."""

    @workflow.run
    async def run(self, params: EstimateInput) -> EstimateOutput | str:
        try:
            return await workflow.execute_activity(
                ACTIVITY_ESTIMATE, params, result_type=EstimateOutput,
                task_queue=perf_task_queue(workflow.info().task_queue),
                schedule_to_close_timeout=timedelta(minutes=30), heartbeat_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(maximum_attempts=3))
        except ActivityError as err:
            cause = err.cause
            assert isinstance(cause, ApplicationError)
            return f"{cause.type}: {cause.message}"


def _main_worker(client, queue: str) -> Worker:
    return Worker(client, task_queue=queue, workflows=[AskForEstimates], workflow_runner=UnsandboxedWorkflowRunner())


async def _ask(client, queue: str, requests: list[EstimateRequest]) -> EstimateOutput | str:
    return await client.execute_workflow(AskForEstimates.run, EstimateInput(requests=requests),
                                         id=f"perf-test-{uuid.uuid4().hex[:8]}", task_queue=queue,
                                         result_type=EstimateOutput | str)


@pytest.mark.slow
async def test_the_perf_worker_answers_with_aiconfigurator_s_own_figures(temporal_client, tmp_path: Path) -> None:
    queue, home, save = unique_queue("perf"), tmp_path / "home", tmp_path / "cli"
    system = system_for(CARD)
    assert system is not None
    gpus = gpus_for_layout("single_node_tp", CARD)
    request = EstimateRequest(model=MODEL, model_commit="b" * 40, card=CARD, isl=ISL, osl=OSL, ttft_ms=TTFT_MS,
                              tpot_ms=TPOT_MS)
    amd = request.model_copy(update={"card": "mi355x"})
    with stopped_at_the_end(cli_default(save, model=MODEL, system=system, gpus=gpus, isl=ISL, osl=OSL, ttft=TTFT_MS,
                                        tpot=TPOT_MS)) as cli:
        async with _main_worker(temporal_client, queue), build_perf_worker(temporal_client, queue, home):
            answer = await _ask(temporal_client, queue, [request, amd])
        printed, _ = await asyncio.to_thread(cli.communicate, timeout=1200)
    assert cli.returncode == 0, printed[-3000:]
    assert isinstance(answer, EstimateOutput), answer
    estimate, on_amd = answer.estimates
    rows = best_rows(save)
    assert sorted(rows) == ["agg", "disagg"], printed[-3000:]
    for mode, row in rows.items():
        entry = estimate.entry(mode)
        conf = entry.configuration
        assert conf is not None, entry.reason
        side = "(p)" if mode == "disagg" else ""
        assert entry.source is not None
        assert entry.source.version == metadata.version("aiconfigurator")
        assert entry.source.database == f"{row[side + 'system']} vllm {row[side + 'version']}"
        # The CLI writes three decimals.
        for ours, theirs in ((conf.tokens_per_second_per_gpu, "tokens/s/gpu"),
                             (conf.tokens_per_second_per_user, "tokens/s/user"), (conf.ttft_ms, "ttft"),
                             (conf.tpot_ms, "tpot"), (conf.requests_per_second_per_replica, "request_rate")):
            assert ours == pytest.approx(float(row[theirs]), abs=1.5e-3), (mode, theirs)
        per_replica = int(row["num_total_gpus"])
        assert conf.gpus_per_replica == per_replica and conf.replicas == gpus // per_replica
        assert conf.concurrency == int(float(row["concurrency"])) * conf.replicas
        assert conf.ttft_ms <= TTFT_MS and conf.tpot_ms <= TPOT_MS
        assert entry.frontier, "the trade-off to draw"
        if mode == "agg":
            (pool,) = conf.workers
            assert (pool.parallelism.tp, pool.parallelism.pp, pool.batch_size) == (
                int(row["tp"]), int(row["pp"]), int(float(row["bs"])))
        else:
            prefill, decode = conf.workers
            for pool, p in ((prefill, "(p)"), (decode, "(d)")):
                assert (pool.workers, pool.parallelism.tp, pool.batch_size) == (
                    int(row[p + "workers"]), int(row[p + "tp"]), int(float(row[p + "bs"])))
    assert [e.reason for e in on_amd.entries] == ["AIConfigurator has no performance database for MI355X (AMD)"] * 2

    # The same question again: from the cache, in milliseconds, the same figures.
    started = time.perf_counter()
    again = Estimator(home).estimate(request)
    took = time.perf_counter() - started
    assert again.cached and again.entries == estimate.entries
    assert took < 0.5, f"a cached estimate took {took:.3f} s"
    assert not estimate.cached and estimate.seconds > took


async def test_without_the_extra_the_plane_says_why_there_are_no_figures(temporal_client, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)  # what a plane without the extra finds
    queue = unique_queue("perf")
    async with _main_worker(temporal_client, queue), build_perf_worker(temporal_client, queue, tmp_path):
        answer = await asyncio.wait_for(_ask(temporal_client, queue, [EstimateRequest(model=MODEL, card=CARD)]), 60)
    # Not retried: one attempt, and the words a person reads.
    assert answer == f"{ERROR_NOT_INSTALLED}: {NOT_INSTALLED}"


def test_the_perf_worker_will_not_start_without_the_extra() -> None:
    code = ("import sys, runpy\nsys.modules['aiconfigurator'] = None\n"
            "runpy.run_module('worker.perf', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert NOT_INSTALLED in done.stderr


def test_up_starts_no_perf_worker_without_the_extra_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from wingsmith.domain.config import Settings
    from wingsmith.local.supervisor import Plane, _perf_worker
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)
    plane = Plane(settings=Settings(home=tmp_path), offline_hub=True)
    assert _perf_worker(plane, {}) is None
    assert NOT_INSTALLED in capsys.readouterr().out
