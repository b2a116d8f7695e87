"""The proof of planning by load (issue 36, part 4), through a real plane: the Kimi-K3, DeepSeek-V3 and
gpt-oss-120b drafts of the offline Hub carry AIConfigurator's estimates for the fleet's H200 and GB200, each
equal to what AIConfigurator's own CLI prints for the same inputs in the same run (no figure is written
here), and where the tool has none the draft says why in the CLI's own words.

The drafts are made before any perf worker polls: they say why there are no figures, their asks stay queued,
and a perf worker that starts afterwards (`python -m worker.perf`, as `up` starts it) answers them.

The suite's expensive cases, all in this one module: one plane, one perf worker, and per model × card the one
search the draft itself asks first on that card, beside one CLI run of the same inputs (the two run side by
side, one core each). Measured here: the plane's six searches about 130 CPU-s in all, the CLI's six about
160 CPU-s (docs/planning-by-load.md, "The proof"). Each draft's estimates workflow is ended once its two cards are in,
so its later asks are dropped or skipped by the perf worker rather than searched.

A module of its own: a module shares one database and one Temporal namespace (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.perf.conftest import best_rows, cli_default, perf_worker_polls, start_perf_worker
from tests.perf.test_draft_performance import _draft, _register
from tests.support import record_history_if_asked, running_worker, wait_until
from wingsmith.adapters.inventory import ManualInventory, ManualPool
from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.adapters.store.clusters import ClusterSpec
from wingsmith.domain.config import perf_task_queue
from wingsmith.domain.draft_performance import NOT_INSTALLED
from wingsmith.domain.perf.cards import gpus_for_layout, system_for
from wingsmith.domain.perf.estimates import DEFAULT_TPOT_MS, DEFAULT_TTFT_MS, EstimateRequest

MODELS = ("openai/gpt-oss-120b", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K3")
CARDS = ("h200", "gb200")
MODES = ("agg", "disagg")
SEARCH_TIMEOUT = 3600  # a cold search on a machine shared with other test runs


@dataclass
class Reference:
    """One run of AIConfigurator's CLI for what a draft asked on one card."""
    request: EstimateRequest
    save_dir: Path
    returncode: int | None = None
    printed: str = ""

    @property
    def system(self) -> str:
        system = system_for(self.request.card)
        assert system is not None
        return system

    @property
    def gpus(self) -> int:
        return gpus_for_layout(self.request.layout, self.request.card)

    def failure(self, mode: str) -> str | None:
        """Why the CLI says this mode gave nothing, in its own words (None: it gave a configuration)."""
        failed = re.search(rf"Experiment {mode} failed: (.+)", self.printed)
        if failed:
            return failed.group(1).strip()
        if re.search(rf"Experiment {mode} returned no results", self.printed):
            return "no results"
        return None


@dataclass
class References:
    """The CLI runs, one at a time in a thread beside the plane (two cores: the perf worker and the CLI)."""
    cases: list[Reference]
    stopping: threading.Event = field(default_factory=threading.Event)
    running: subprocess.Popen | None = None

    def run_all(self) -> None:
        for case in self.cases:
            if self.stopping.is_set():
                return
            r = case.request
            self.running = cli_default(case.save_dir, model=r.model, system=case.system, gpus=case.gpus, isl=r.isl,
                                       osl=r.osl, ttft=DEFAULT_TTFT_MS, tpot=DEFAULT_TPOT_MS)
            case.printed, _ = self.running.communicate(timeout=SEARCH_TIMEOUT)
            case.returncode = self.running.returncode

    def stop(self) -> None:
        self.stopping.set()
        if self.running is not None and self.running.poll() is None:
            self.running.kill()
            self.running.wait()


async def _asked(client, workflow_id: str) -> DraftPerformanceInput:
    """What the draft's estimates workflow was started with (its first history event)."""
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (params,) = await pydantic_data_converter.decode(payloads, [DraftPerformanceInput])
        return params
    raise AssertionError(f"{workflow_id} has no history")


def _rows_for(draft: dict, request: EstimateRequest) -> dict[str, dict]:
    return {p["mode"]: p for p in draft["performance"] if (p["card"], p["layout"]) == (request.card, request.layout)}


def _assert_same_as_the_cli(rows: dict[str, dict], case: Reference) -> None:
    version = metadata.version("aiconfigurator")
    saved = best_rows(case.save_dir)
    assert sorted(rows) == list(MODES), rows
    for mode in MODES:
        ours, why_not = rows[mode], case.failure(mode)
        where = (case.request.model, case.request.card, mode, case.printed[-2000:])
        if why_not is not None:  # the CLI found nothing: neither does the draft, and it says why
            assert mode not in saved and ours["tokens_per_second_per_gpu"] is None, where
            assert ours["reason"] and ours["source"].startswith(f"AIConfigurator {version}, database {case.system} "
                                                                "vllm "), where
            if why_not != "no results":  # the CLI's reason, word for word (the draft shortens it)
                assert why_not[:120] in ours["reason"], (ours["reason"], why_not)
            continue
        assert case.returncode == 0 and mode in saved, where
        row, side = saved[mode], "(p)" if mode == "disagg" else ""
        assert ours["reason"] is None, ours["reason"]
        database = f"{row[side + 'system']} vllm {row[side + 'version']}"
        assert ours["source"] == f"AIConfigurator {version}, database {database}"
        for figure, theirs in (("tokens_per_second_per_gpu", "tokens/s/gpu"), ("tokens_per_second_per_user",
                                                                                "tokens/s/user"),
                               ("ttft_ms", "ttft"), ("tpot_ms", "tpot")):
            assert ours[figure] == pytest.approx(float(row[theirs]), abs=1.5e-3), (where[:3], figure)  # 3 decimals
        assert ours["gpus_per_replica"] == int(row["num_total_gpus"])
        assert ours["gpus"] == ours["gpus_per_replica"] * ours["replicas"] <= case.gpus
        assert ours["concurrency"] == int(float(row["concurrency"])) * ours["replicas"]
        assert ours["parallelism"] and ours["frontier"]


@pytest.mark.slow
async def test_the_hub_s_frontier_drafts_carry_aiconfigurator_s_figures_for_h200_and_gb200(
        api, deps, settings, temporal_client, temporal_server, pg_pool, perf_home: Path, tmp_path: Path):  # noqa: F811
    for card in CARDS:  # the fleet: one cluster per card, so every draft asks about both first
        await cluster_store.create_cluster(pg_pool, ClusterSpec(
            name=f"fleet-{card}", kubeconfig="file:/nowhere/kubeconfig",
            manual_inventory=ManualInventory(pools=[ManualPool(hardware=card, nodes=2)])))
    queue = perf_task_queue(settings.task_queue)
    perf = references = None
    try:
        async with running_worker(temporal_client, deps):
            # Before any perf worker: each draft is there at once and says why it has no figures.
            drafts = {}
            for model in MODELS:
                reg = await _register(api, f"hf:{model}")
                draft = await _draft(api, reg["id"], until=lambda d: d["performance_status"] == "unavailable")
                assert draft["performance_reason"].startswith(NOT_INSTALLED) and f"nothing polls {queue}" in \
                    draft["performance_reason"], draft["performance_reason"]
                assert draft["performance"] == []
                drafts[model] = (reg, performance_workflow_id(reg["workflow_id"], draft["version"]))

            # What each draft asks first on each card (its likeliest layout there): the one search compared.
            cases = {}
            for model, (_, workflow_id) in drafts.items():
                asked = (await _asked(temporal_client, workflow_id)).requests
                assert {r.card for r in asked[:2]} == set(CARDS), "the fleet's two cards are asked first"
                for request in asked[:2]:
                    cases[model, request.card] = Reference(request, tmp_path / "cli" / f"{model}-{request.card}")
            references = References(list(cases.values()))
            cli_runs = asyncio.create_task(asyncio.to_thread(references.run_all))

            # A perf worker that starts late answers the drafts that were waiting for one.
            perf = start_perf_worker(temporal_server.address, temporal_client.namespace, settings.task_queue,
                                     perf_home, tmp_path / "perf-worker.log")
            await wait_until(lambda: perf_worker_polls(temporal_client, queue), timeout=120,
                             what="the perf worker to poll its queue")
            answered: dict[str, dict] = {}

            async def each_draft_has_both_cards() -> bool:
                for model, (reg, workflow_id) in drafts.items():
                    draft = await _draft(api, reg["id"])
                    if model in answered or not all(len(_rows_for(draft, cases[model, card].request)) == len(MODES)
                                                    for card in CARDS):
                        continue
                    answered[model] = draft
                    if model == MODELS[0]:
                        await record_history_if_asked(temporal_client, workflow_id,
                                                      "draft_performance_queued_then_answered")
                    # Its two cards are in: its later asks are not searched here.
                    await temporal_client.get_workflow_handle(workflow_id).terminate("the test has its rows")
                return len(answered) == len(MODELS)
            await wait_until(each_draft_has_both_cards, timeout=SEARCH_TIMEOUT, interval=2,
                             what="each draft's figures for both cards")
            perf.kill()  # a search cannot be interrupted: a graceful stop would wait for the next one
            await asyncio.wait_for(cli_runs, SEARCH_TIMEOUT * len(cases))
    finally:
        if references is not None:
            references.stop()
        if perf is not None:
            perf.kill()
            perf.wait()
    for (model, _card), case in cases.items():
        draft = answered[model]
        assert draft["performance_status"] == "pending", "figures follow the waiting state"
        _assert_same_as_the_cli(_rows_for(draft, case.request), case)
    # Somewhere the tool has figures for each model: the proof is not only of refusals.
    for model in MODELS:
        assert any(_rows_for(answered[model], cases[model, card].request)["agg"]["tokens_per_second_per_gpu"]
                   for card in CARDS), model
