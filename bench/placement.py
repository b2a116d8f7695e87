"""Placement latency: p50/p99 of `place()` for 10, 100, 1,000 and 10,000 clusters.

Each cluster has a mix of realistic pools (H200/B200/GB200 nodes, some partly used, a few cordoned
clusters, several regions); the plan asks for 8 replicas of 8 H200 GPUs on two whole nodes, spread.
Goal on the 2-core dev machine: p99 <= 5 ms at 100 clusters, <= 50 ms at 1,000.

    .venv/bin/python bench/placement.py [--runs N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from wingsmith.placement import (ClusterInfo, ClusterInventory, NodePool, PlacementConstraints, PlacementPlan,
                                 place)

REGIONS = ["us-east", "us-west", "eu-west", "ap-south"]
CARDS = [("h200", 8), ("b200", 8), ("gb200", 4), ("h100", 8)]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs per fleet size (fewer at 10,000)")
    args = parser.parse_args()
    plan = PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=8,
                         constraints=PlacementConstraints(regions=["us-east", "eu-west"],
                                                          preferred_labels={"tier": "gold"},
                                                          max_replicas_per_cluster=2))
    # Wall time is what a caller waits; CPU time (this thread only) is the same work without the waits
    # other processes on a shared machine add, so the two together tell contention from cost.
    print(f"{'clusters':>9} {'runs':>5} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} {'cpu p99':>8} {'placed':>7}")
    for count in (10, 100, 1_000, 10_000):
        inventories, infos = make_fleet(count)
        runs = args.runs if count < 10_000 else max(20, args.runs // 10)
        place(plan, inventories, infos)  # warm-up
        wall, cpu = [], []
        for _ in range(runs):
            start, start_cpu = time.perf_counter(), time.thread_time()
            decision = place(plan, inventories, infos)
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.thread_time() - start_cpu) * 1000)
        print(f"{count:>9,} {runs:>5} {_p(wall, 50):>8.2f} {_p(wall, 99):>8.2f} {_p(cpu, 50):>8.2f} "
              f"{_p(cpu, 99):>8.2f} {decision.placed:>7}")


def _p(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return statistics.median(ordered) if pct == 50 else ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


if __name__ == "__main__":
    main()
