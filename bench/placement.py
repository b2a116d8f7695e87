"""Placement latency: p50/p99 of `place()` for 10, 100, 1,000 and 10,000 clusters.

Each cluster has a mix of realistic pools (H200/B200/GB200 nodes, some partly used, a few cordoned
clusters, several regions); the plan asks for 8 replicas of 8 H200 GPUs on two whole nodes, spread.
Goal on the 2-core dev machine: p99 <= 60 ms of CPU at 10,000 clusters, <= 8 ms at 1,000.

    .venv/bin/python bench/placement.py [--runs N]

`place()` builds the fleet's index and places; `index.place()` is one plan against an index built
once per inventory read (what a caller placing many plans on one fleet pays per plan).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from stats import summary  # bench/stats.py (scripts run with bench/ on the path)

from wingsmith.placement import (
    ClusterInfo,
    ClusterInventory,
    FleetIndex,
    NodePool,
    PlacementConstraints,
    PlacementDecision,
    PlacementPlan,
    place,
)

REGIONS = ["us-east", "us-west", "eu-west", "ap-south"]
CARDS = [("h200", 8), ("b200", 8), ("gb200", 4), ("h100", 8)]
SIZES = (10, 100, 1_000, 10_000)
PLAN = PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=8,
                     constraints=PlacementConstraints(regions=["us-east", "eu-west"], preferred_labels={"tier": "gold"},
                                                      max_replicas_per_cluster=2))


def make_fleet(count: int, seed: int = 7) -> tuple[list[ClusterInventory], list[ClusterInfo]]:
    rng = random.Random(seed)
    inventories, infos = [], []
    for i in range(count):
        name = f"cluster-{i:05d}"
        pools = []
        for hw, cap in rng.sample(CARDS, k=rng.randint(1, 3)):
            for free in sorted({cap, 0, rng.randint(0, cap), rng.randint(0, cap)}):
                pools.append(NodePool(hardware_id=hw, product=f"NVIDIA-{hw.upper()}", gpus_per_node=cap,
                                      free_gpus=free, nodes=rng.randint(1, 64)))
        inventories.append(ClusterInventory(cluster=name, pools=pools))
        infos.append(ClusterInfo(name=name, region=rng.choice(REGIONS), cordoned=rng.random() < 0.05,
                                 labels={"tier": rng.choice(["gold", "silver"])}))
    return inventories, infos


def _timed(call: Callable[[], PlacementDecision], runs: int) -> tuple[dict, dict, PlacementDecision]:
    # Wall time is what a caller waits; CPU time (this thread only) is the same work without the waits
    # other processes on a shared machine add, so the two together tell contention from cost.
    decision = call()  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.thread_time()
        decision = call()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    return summary(wall), summary(cpu), decision


def measure(count: int, runs: int, plan: PlacementPlan = PLAN) -> dict:
    """One fleet size: `place()` from the inventories (index built per call) and one plan on a built index."""
    inventories, infos = make_fleet(count)
    wall, cpu, decision = _timed(lambda: place(plan, inventories, infos), runs)
    index = FleetIndex(inventories, infos)
    _wall, indexed_cpu, _ = _timed(lambda: index.place(plan), runs)
    return {"clusters": count, "runs": runs, "wall": wall, "cpu": cpu, "indexed_cpu": indexed_cpu,
            "candidates": index.candidate_count(plan), "placed": decision.placed}


def table(rows: list[dict]) -> str:
    lines = [f"{'clusters':>9} {'runs':>5} {'cand.':>6} {'wall p50':>9} {'wall p99':>9} {'cpu p50':>8} "
             f"{'cpu p99':>8} {'plan-only cpu p99':>18} {'placed':>7}"]
    for r in rows:
        lines.append(f"{r['clusters']:>9,} {r['runs']:>5} {r['candidates']:>6} {r['wall']['p50_ms']:>9.2f} "
                     f"{r['wall']['p99_ms']:>9.2f} {r['cpu']['p50_ms']:>8.2f} {r['cpu']['p99_ms']:>8.2f} "
                     f"{r['indexed_cpu']['p99_ms']:>18.2f} {r['placed']:>7}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs per fleet size (fewer at 10,000)")
    args = parser.parse_args()
    rows = [measure(count, args.runs if count < 10_000 else max(20, args.runs // 10)) for count in SIZES]
    print(table(rows))


if __name__ == "__main__":
    main()
