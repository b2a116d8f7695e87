"""A priced fleet sizes a traffic target on its cheapest feasible card, through a real plane (API, worker,
Temporal, Postgres, the perf worker as its own process): the same dry-run asked twice, first with clusters
that carry no price (the fewest GPUs win), then, once the registry prices the other card below it (the
plans' own GPU counts set the prices, nothing is hard-coded), it answers with the cheaper card, its cost
per hour, and why the dearer one lost. The second answer comes from the perf worker's cache. (The API's
PATCH /v1/clusters/{name} writes the price as the store does here: tests/cli/test_cluster_cost.py.)

One small model, Qwen3-8B (the offline Hub's Qwen3; AIConfigurator ships its config), on two cards."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from tests.perf.conftest import perf_worker_running, planned
from tests.perf.test_workload_target import _approved
from tests.workloads.conftest import (  # noqa: F401  (the workload test bed's fixtures)
    api,
    as_,
    deps,
    hub,
    settings,
    sims,
)
from wingsmith.adapters.inventory import ManualInventory, ManualPool
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster, set_cost

QWEN = "Qwen/Qwen3-8B"
CARDS = {"fleet-h200": "h200", "fleet-b200": "b200"}
TARGET = {"requests_per_second": 2, "isl": 4000, "osl": 1000, "ttft_ms": 2000, "tpot_ms": 50}


@pytest.mark.slow
async def test_a_priced_fleet_takes_the_cheapest_feasible_card_and_says_why_the_dearer_lost(
        api, deps, temporal_client, temporal_server, pg_pool, sims, perf_home: Path,  # noqa: F811
        tmp_path: Path):
    artifact = await _approved(api, deps, temporal_client, QWEN)
    for name, card in CARDS.items():  # declared by hand: the cards a target is planned on, with their prices
        await create_cluster(pg_pool, ClusterSpec(
            name=name, kubeconfig=str(sims.kubeconfig_path), kube_context=sims.context("sim-east"),
            manual_inventory=ManualInventory(pools=[ManualPool(hardware=card, nodes=2)])))
    body = {"artifact_id": artifact, "hardware": "h200", "target": TARGET, "dry_run": True, "name": "qwen-priced"}
    async with perf_worker_running(temporal_server, temporal_client, deps, perf_home, tmp_path / "perf-worker.log"):
        unpriced = await planned(api, await api.post("/v1/workloads", json=body, headers=as_("tok-olga")),
                                 as_("tok-olga"))
        # The dry-run's answer: at once (202), or from its status URL (200) when the search took longer.
        assert unpriced.status_code in (200, 202) and "target_plan" in unpriced.json(), unpriced.text
        first = unpriced.json()["target_plan"]
        # Each card's cheapest plan by GPUs (of either mode): a loose target, so both cards have one.
        best: dict[str, dict] = {}
        for c in first["candidates"]:
            plan = c["plan"]
            if plan["meets_target"] and (plan["card"] not in best or plan["gpus"] < best[plan["card"]]["gpus"]):
                best[plan["card"]] = plan
        assert set(best) == set(CARDS.values()), first
        fewest = first["chosen"]
        assert fewest["gpus"] == min(p["gpus"] for p in best.values())
        assert all(c["cost_per_hour"] is None for c in first["candidates"])

        # Price the other card so that every plan on the first one costs more per hour than its best, from
        # the plans' own GPU counts.
        other = next(p for card, p in best.items() if card != fewest["card"])
        prices = {other["card"]: 1.0, fewest["card"]: 2.0 * other["gpus"] / fewest["gpus"]}
        for name, card in CARDS.items():
            record = await set_cost(pg_pool, name, prices[card])
            assert record is not None and record.cost_per_gpu_hour == prices[card]
        priced = await planned(api, await api.post("/v1/workloads", json=body, headers=as_("tok-olga")),
                               as_("tok-olga"))
    assert priced.status_code in (200, 202) and "target_plan" in priced.json(), priced.text
    answer = priced.json()
    chosen, candidates = answer["target_plan"]["chosen"], answer["target_plan"]["candidates"]
    assert chosen["card"] == other["card"] and chosen["gpus"] == other["gpus"]
    chosen_cost = chosen["gpus"] * prices[chosen["card"]]
    for c in candidates:
        if c["plan"]["gpus"]:
            assert c["cost_per_hour"] == pytest.approx(c["plan"]["gpus"] * prices[c["plan"]["card"]]), c
    lost = next(c for c in candidates if c["plan"]["card"] == fewest["card"]
                and c["plan"]["configuration"] == fewest["configuration"])
    assert lost["why_not"].startswith(f"dearer: {lost['cost_per_hour']:.2f} per hour against {chosen_cost:.2f} on "
                                      f"{other['card']}"), lost
    # The plan and the placement follow the cheaper card, onto the cluster that has it.
    assert answer["plan"]["hardware"] == other["card"]
    placed = {name for name, n in answer["placement"]["replicas"].items() if n}
    assert placed == {name for name, card in CARDS.items() if card == other["card"]}, answer["placement"]
