"""A traffic target whose best plan is disaggregated, through a real plane (API, worker, Temporal, Postgres,
simulated clusters, and the perf worker as its own process): the dry-run chooses what AIConfigurator's own
`recommend` CLI chooses for the same inputs in the same run, its graphs run prefill and decode workers in the
tool's counts on the GPUs placement reserved for them, and created, the workload serves on the clusters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from tests.dynamo.builders import validate_dgd
from tests.perf.conftest import best_rows, perf_worker_running, planned, recommending
from tests.perf.test_workload_target import _approved
from tests.workloads.conftest import (  # noqa: F401  (the workload test bed's fixtures)
    api,
    as_,
    clusters,
    deps,
    dgds,
    hub,
    settings,
    sims,
)
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.adapters.store.clusters import set_cordoned
from wingsmith.domain.dynamo.engine_args import flag_value

MODEL = "Qwen/Qwen3-8B"
# A long prompt, a short answer and a tight TPOT at a high rate: the case where AIConfigurator finds that
# separate prefill and decode workers need fewer GPUs (tests/perf/fixtures/qwen3-8b-h200-recommend).
TARGET = {"requests_per_second": 100, "isl": 8000, "osl": 200, "ttft_ms": 1000, "tpot_ms": 6}


@pytest.mark.slow
async def test_a_dry_run_whose_best_plan_is_disaggregated_renders_prefill_and_decode_workers(
        api, deps, temporal_client, temporal_server, clusters, pg_pool, perf_home: Path,  # noqa: F811
        tmp_path: Path):
    artifact = await _approved(api, deps, temporal_client, MODEL)
    # The reference is the tool's CLI on H200: the fleet's other card (sim-nvl's GB200) is left out of the plan.
    await set_cordoned(pg_pool, "sim-nvl", True)
    async with perf_worker_running(temporal_server, temporal_client, deps, perf_home, tmp_path / "perf-worker.log",
                                   reference=recommending(tmp_path / "cli", MODEL, "h200", TARGET)) as cli:
        assert cli is not None
        body = {"artifact_id": artifact, "hardware": "h200", "target": TARGET, "name": "qwen3-8b-disagg"}
        r = await planned(api, await api.post("/v1/workloads", json={**body, "dry_run": True}, headers=as_("tok-olga")),
                          as_("tok-olga"))
        # Then for real (the perf worker answers the same question from its cache): the clusters run it.
        created = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"), timeout=600)
        # The dry-run's plan is kept: the create gets it at once, not a plan to follow again.
        assert created.status_code == 202 and created.json().get("state") != "planning", created.text
        live = await _until_stage(api, "qwen3-8b-disagg", {"serving", "failed"}, timeout=180)
        applied = dgds(clusters, "qwen3-8b-disagg")
        gone = await api.delete("/v1/workloads/qwen3-8b-disagg", headers=as_("tok-olga"))
        assert gone.status_code == 202, gone.text
        await _until_stage(api, "qwen3-8b-disagg", {"deleted"}, timeout=180)
        printed, _ = await asyncio.to_thread(cli.communicate, timeout=3600)
    await set_cordoned(pg_pool, "sim-nvl", False)
    # The dry-run's answer: at once (202), or from its status URL (200) when the search took longer.
    assert r.status_code in (200, 202) and "target_plan" in r.json(), r.text
    assert cli.returncode == 0, printed[-3000:]
    rows = best_rows(tmp_path / "cli")
    tool_choice = min(rows, key=lambda mode: int(float(rows[mode]["total_gpus_needed"])))
    assert tool_choice == "disagg", f"AIConfigurator no longer chooses disaggregated serving here: {printed[-2000:]}"
    row = rows["disagg"]

    out = r.json()
    chosen = out["target_plan"]["chosen"]
    conf = chosen["configuration"]
    assert chosen["meets_target"] and conf["mode"] == "disagg"
    assert conf["ttft_ms"] <= TARGET["ttft_ms"] and conf["tpot_ms"] <= TARGET["tpot_ms"]
    assert (chosen["replicas"], chosen["gpus"]) == (int(float(row["replicas_needed"])),
                                                    int(float(row["total_gpus_needed"])))
    candidates = {c["mode"]: c for c in out["target_plan"]["candidates"]}
    assert candidates["disagg"]["why_not"] is None and candidates["agg"]["why_not"]
    assert candidates["agg"]["plan"]["gpus"] == int(float(rows["agg"]["total_gpus_needed"]))

    plan = out["plan"]
    assert plan["layout"] == "pd_cluster" and plan["replicas"] == chosen["replicas"]
    assert plan["gpus_per_replica"] == int(float(row["num_total_gpus"])) == conf["gpus_per_replica"]
    placement = out["placement"]
    assert placement["placed"] == chosen["replicas"] and placement["unplaced"] == 0
    assert placement["plan"]["gpus_per_node"] * placement["plan"]["nodes_per_replica"] == plan["gpus_per_replica"]

    prefill, decode = conf["workers"]
    workers = {"prefill": 0, "decode": 0}
    for cluster, manifest in out["manifests"].items():
        validate_dgd(manifest)
        share = placement["replicas"][cluster]
        components = {c["type"]: c for c in manifest["spec"]["components"]}
        for role, pool in (("prefill", prefill), ("decode", decode)):
            component = components[role]
            main = component["podTemplate"]["spec"]["containers"][0]
            assert component["replicas"] == share * pool["workers"]
            assert int(main["resources"]["limits"]["nvidia.com/gpu"]) == pool["gpus_per_worker"]
            assert flag_value(main["args"], ("--tensor-parallel-size",)) == str(pool["parallelism"]["tp"])
            assert flag_value(main["args"], ("--max-num-seqs",)) == str(pool["batch_size"])
            assert flag_value(main["args"], ("--disaggregation-mode",)) == role
            workers[role] += component["replicas"]
    # Every replica's workers, across the clusters, in the tool's own counts.
    assert workers == {"prefill": chosen["replicas"] * int(float(row["(p)workers"])),
                       "decode": chosen["replicas"] * int(float(row["(d)workers"]))}

    # Created, it serves: the clusters hold the same graphs, and the simulated operator ran their workers.
    assert created.json()["plan"] == plan
    assert live["stage"] == "serving", live
    serving = {c["cluster"]: c["replicas"] for c in live["clusters"] if c["state"] == "serving"}
    assert serving == placement["replicas"]
    assert set(applied) == set(serving)
    for cluster, (dgd,) in applied.items():
        components = {c["type"]: c["replicas"] for c in dgd["spec"]["components"]}
        assert components == {"frontend": 1, "prefill": serving[cluster] * prefill["workers"],
                              "decode": serving[cluster] * decode["workers"]}
