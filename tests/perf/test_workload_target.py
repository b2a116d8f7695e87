"""Workloads from a traffic target, through a real plane (API, worker, Temporal, Postgres, simulated clusters,
and the perf worker as its own process): `replicas` and `target` exclude each other; without a perf worker
the answer says why; with one, the dry-run's plan is AIConfigurator's (its `recommend` CLI, run on the same
inputs in the same test, is the reference), within the target, and the DGD carries its engine arguments."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from contracts.draft_performance import performance_workflow_id
from contracts.ids import artifact_workflow_id_of
from contracts.traffic_plan import slot_workflow_id
from tests.perf.conftest import best_rows, perf_worker_running, planned, recommending
from tests.support import record_history_if_asked, running_worker, wait_until
from tests.workloads.conftest import (  # noqa: F401  (the workload test bed's fixtures)
    api,
    approved_kimi,
    as_,
    clusters,
    deps,
    hub,
    settings,
    sims,
)
from wingsmith.adapters.store.clusters import set_cordoned
from wingsmith.domain.draft_performance import NOT_INSTALLED
from wingsmith.domain.teams import DEFAULT_TEAM

# A small model: its searches (the plane's and the CLI's reference) take about 18 CPU-s each on this machine,
# gpt-oss-120b's about 69. At this rate AIConfigurator recommends 2 aggregated replicas on one H200 each.
MODEL = "Qwen/Qwen3-8B"
TARGET = {"requests_per_second": 5, "isl": 4000, "osl": 1000, "ttft_ms": 1000, "tpot_ms": 40}


async def test_replicas_and_a_target_exclude_each_other(api, approved_kimi):  # noqa: F811
    body = {"artifact_id": approved_kimi, "hardware": "h200", "replicas": 2, "target": TARGET, "dry_run": True}
    r = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
    assert r.status_code == 422, r.text
    assert "either replicas" in r.json()["error"]["message"]


async def test_without_a_perf_worker_a_target_is_answered_with_the_reason(api, deps, temporal_client,  # noqa: F811
                                                                           approved_kimi):  # noqa: F811
    body = {"artifact_id": approved_kimi, "hardware": "h200", "target": TARGET, "dry_run": True}
    async with running_worker(temporal_client, deps):
        r = await asyncio.wait_for(planned(api, await api.post("/v1/workloads", json=body, headers=as_("tok-olga")),
                                           as_("tok-olga")), 60)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["message"] == NOT_INSTALLED
    # The replay tests' histories of the two plan workflows (the slot and its plan), when asked to record.
    slot = slot_workflow_id(DEFAULT_TEAM, 0)
    await record_history_if_asked(temporal_client, slot, "traffic_plan_slot_unavailable")
    if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
        events = (await temporal_client.get_workflow_handle(slot).fetch_history()).events
        (plan_id,) = [e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                      for e in events if e.HasField("child_workflow_execution_started_event_attributes")]
        await record_history_if_asked(temporal_client, plan_id, "traffic_plan_unavailable")


async def _approved(api, deps, temporal_client, repo: str) -> str:  # noqa: F811
    """An approved artifact of `repo` for a test that plans by traffic. Its draft's estimates workflow is ended:
    its asks would wait on the test's perf queue and be searched first (a draft's estimates, minutes of CPU that
    no test of traffic plans reads); ended, the perf worker skips them and searches only the plans."""
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": f"hf:{repo}"}, headers=as_("tok-olga"))
        artifact = r.json()["id"]

        async def draft():
            got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
            return got.get("state") in ("draft", "approved")
        await wait_until(draft, what=f"the {repo} draft")
        r = await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                           json={"decision": "approve", "draft_version": 1})
        assert r.status_code == 200, r.text
    await temporal_client.get_workflow_handle(performance_workflow_id(artifact_workflow_id_of(artifact), 1)).terminate(
        "the test plans by traffic only")
    return artifact


@pytest.mark.slow
async def test_a_dry_run_with_a_target_returns_aiconfigurator_s_plan_within_it(
        api, deps, temporal_client, temporal_server, clusters, pg_pool, perf_home: Path,  # noqa: F811
        tmp_path: Path):
    artifact = await _approved(api, deps, temporal_client, MODEL)
    # The reference is the tool's CLI on H200: the fleet's other card (sim-nvl's GB200) is left out of the plan.
    await set_cordoned(pg_pool, "sim-nvl", True)
    async with perf_worker_running(temporal_server, temporal_client, deps, perf_home, tmp_path / "perf-worker.log",
                                   reference=recommending(tmp_path / "cli", MODEL, "h200", TARGET)) as cli:
        assert cli is not None
        body = {"artifact_id": artifact, "hardware": "h200", "target": TARGET, "dry_run": True,
                "name": "qwen-target"}
        r = await planned(api, await api.post("/v1/workloads", json=body, headers=as_("tok-olga")), as_("tok-olga"))
        printed, _ = await asyncio.to_thread(cli.communicate, timeout=3600)
    await set_cordoned(pg_pool, "sim-nvl", False)
    # The dry-run's answer: at once (202), or from its status URL (200) when the search took longer.
    assert r.status_code in (200, 202) and "target_plan" in r.json(), r.text
    out = r.json()
    chosen = out["target_plan"]["chosen"]
    conf = chosen["configuration"]
    assert chosen["meets_target"] and conf["ttft_ms"] <= TARGET["ttft_ms"] and conf["tpot_ms"] <= TARGET["tpot_ms"]
    assert chosen["replicas"] * conf["requests_per_second_per_replica"] >= TARGET["requests_per_second"]
    plan = out["plan"]
    assert (plan["hardware"], plan["replicas"], plan["gpus_per_replica"]) == (
        chosen["card"], chosen["replicas"], conf["gpus_per_replica"])
    pool = conf["workers"][0]
    for manifest in out["manifests"].values():
        text = str(manifest)
        assert f"'--tensor-parallel-size', '{pool['parallelism']['tp']}'" in text
        assert f"'--max-num-seqs', '{pool['batch_size']}'" in text
    assert cli.returncode == 0, printed[-3000:]
    row = best_rows(tmp_path / "cli")[conf["mode"]]
    # The CLI ranks its rows by its own measure; the plane takes the fewest GPUs, then the lower TTFT among
    # them: the same GPUs and replicas as the CLI's best row, and no slower a first token.
    assert chosen["replicas"] == int(float(row["replicas_needed"]))
    assert chosen["gpus"] == int(float(row["total_gpus_needed"]))
    assert conf["ttft_ms"] <= float(row["ttft"]) + 1.5e-3
