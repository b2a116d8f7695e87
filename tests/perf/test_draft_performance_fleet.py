"""The draft's figures for the fleet's H200, through a real plane with the perf worker as its own process
(`python -m worker.perf`, as `up` starts it), compared with AIConfigurator's own CLI on the same inputs.

A module of its own: a module shares one database and one Temporal namespace (tests/conftest.py), and an
artifact's workflow id is its identity, so a draft registered by another test of the same module (before the
cluster existed) would be the one this test reads."""

from __future__ import annotations

import asyncio
from importlib import metadata
from pathlib import Path

import aiconfigurator  # noqa: F401  (the perf extra: missing, this module fails at collection, never skips)
import pytest

from contracts.draft_performance import performance_workflow_id
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.perf.conftest import best_rows, cli_default, perf_worker_polls, start_perf_worker, stopped_at_the_end
from tests.perf.test_draft_performance import CARD, GPT_OSS, _draft, _register
from tests.support import running_worker, wait_until
from wingsmith.config import perf_task_queue
from wingsmith.draft_performance import PENDING
from wingsmith.inventory import ManualInventory, ManualPool
from wingsmith.perf.cards import gpus_for_layout, system_for
from wingsmith.perf.estimates import DEFAULT_ISL, DEFAULT_OSL, DEFAULT_TPOT_MS, DEFAULT_TTFT_MS
from wingsmith.store import clusters as cluster_store
from wingsmith.store.clusters import ClusterSpec


@pytest.mark.slow
async def test_gpt_oss_draft_carries_aiconfigurator_s_figures_for_the_fleet_s_h200(
        api, deps, settings, temporal_client, temporal_server, pg_pool, perf_home: Path, tmp_path: Path):  # noqa: F811
    # The fleet: one cluster of H200 nodes, so the draft sizes (and estimates first) on H200.
    await cluster_store.create_cluster(pg_pool, ClusterSpec(
        name="east-h200", kubeconfig="file:/nowhere/kubeconfig",
        manual_inventory=ManualInventory(pools=[ManualPool(hardware=CARD, nodes=1)])))
    system = system_for(CARD)
    assert system is not None
    gpus = gpus_for_layout("single_node_tp", CARD)
    perf = start_perf_worker(temporal_server.address, temporal_client.namespace, settings.task_queue, perf_home,
                              tmp_path / "perf-worker.log")
    reference = cli_default(tmp_path / "cli", model=GPT_OSS, system=system, gpus=gpus, isl=DEFAULT_ISL,
                            osl=DEFAULT_OSL, ttft=DEFAULT_TTFT_MS, tpot=DEFAULT_TPOT_MS)
    try:
        with stopped_at_the_end(reference) as cli:
            await wait_until(lambda: perf_worker_polls(temporal_client, perf_task_queue(settings.task_queue)),
                             timeout=120, what="the perf worker to poll its queue")
            async with running_worker(temporal_client, deps):
                reg = await _register(api, f"hf:{GPT_OSS}")
                first = await _draft(api, reg["id"])  # the draft is there before any figure
                assert first["sizing"]["target"]["hardware"] == CARD, first["sizing"]["target"]
                assert "registered clusters have" in first["sizing"]["target"]["reason"]

                def on_h200(draft: dict) -> bool:
                    return sum(1 for p in draft["performance"] if p["card"] == CARD
                               and p["layout"] == "single_node_tp") == 2
                draft = await _draft(api, reg["id"], until=on_h200, timeout=1800)
                await temporal_client.get_workflow_handle(
                    performance_workflow_id(reg["workflow_id"], draft["version"])).terminate("the test has its rows")
            printed, _ = await asyncio.to_thread(cli.communicate, timeout=1800)
    finally:
        perf.kill()  # a search cannot be interrupted: a graceful stop would wait for the next one
        perf.wait()
    if not first["performance"]:
        assert first["performance_status"] == "pending" and first["performance_reason"] == PENDING
    assert cli.returncode == 0, printed[-3000:]
    rows = best_rows(tmp_path / "cli")
    ours = {p["mode"]: p for p in draft["performance"] if p["card"] == CARD and p["layout"] == "single_node_tp"}
    assert sorted(rows) == sorted(ours) == ["agg", "disagg"], printed[-3000:]
    for mode, row in rows.items():
        entry = ours[mode]
        assert entry["reason"] is None, entry["reason"]
        side = "(p)" if mode == "disagg" else ""
        assert entry["source"] == (f"AIConfigurator {metadata.version('aiconfigurator')}, database "
                                   f"{row[side + 'system']} vllm {row[side + 'version']}")
        for field, theirs in (("tokens_per_second_per_gpu", "tokens/s/gpu"), ("tokens_per_second_per_user",
                                                                                "tokens/s/user"),
                              ("ttft_ms", "ttft"), ("tpot_ms", "tpot")):
            assert entry[field] == pytest.approx(float(row[theirs]), abs=1.5e-3), (mode, field)
        assert entry["gpus_per_replica"] == int(row["num_total_gpus"])
        assert entry["gpus"] == entry["gpus_per_replica"] * entry["replicas"] <= gpus
        assert entry["concurrency"] == int(float(row["concurrency"])) * entry["replicas"]
        assert entry["parallelism"] and entry["frontier"]
