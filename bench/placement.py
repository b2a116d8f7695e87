"""Placement latency: p50/p99 of `place()` for 10, 100, 1,000 and 10,000 clusters, beside a baseline.

Each cluster has a mix of realistic pools (H200/B200/GB200 nodes, some partly used, a few cordoned
clusters, several regions); the plan asks for 8 replicas of 8 H200 GPUs on two whole nodes, spread.
Goal on the 2-core dev machine, in any run (quiet or beside other work): p99 <= 60 ms of CPU at 10,000
clusters, <= 8 ms at 1,000.

    .venv/bin/python bench/placement.py [--runs N] [--repeat K] [--no-baseline]

`place()` builds the fleet's index and places: what the workload workflow's placement activity pays.
`index.place()` is one plan against an index built once per inventory read (what a caller placing
many plans on one fleet pays per plan). The baseline, measured in the same run on the same fleets, is
the same decision explaining every cluster (`place(..., explain=True)`): every cluster through every
filter into a full verdict, what a decision cost before it explained only the clusters that receive
replicas. The whole measure runs K times (default 3); the table shows the worst run's p99 beside the
median run's, and the machine's load averages.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable

from stats import summary  # bench/stats.py (scripts run with bench/ on the path)

from wingsmith.domain.placement import (
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


def measure(count: int, runs: int, plan: PlacementPlan = PLAN, baseline_runs: int = 0) -> dict:
    """One fleet size: `place()` from the inventories (index built per call), one plan on a built index,
    and, with `baseline_runs`, the decision explaining every cluster on the same fleet."""
    inventories, infos = make_fleet(count)
    wall, cpu, decision = _timed(lambda: place(plan, inventories, infos), runs)
    index = FleetIndex(inventories, infos)
    _wall, indexed_cpu, _ = _timed(lambda: index.place(plan), runs)
    row = {"clusters": count, "runs": runs, "wall": wall, "cpu": cpu, "indexed_cpu": indexed_cpu,
           "candidates": index.candidate_count(plan), "placed": decision.placed,
           "decision_bytes": len(decision.model_dump_json())}
    if baseline_runs:
        _wall, base_cpu, every = _timed(lambda: place(plan, inventories, infos, explain=True), baseline_runs)
        assert every.replicas == decision.replicas, "explaining every cluster changed the decision"
        row |= {"baseline_cpu": base_cpu, "baseline_decision_bytes": len(every.model_dump_json())}
    return row


def table(rows: list[dict]) -> str:
    lines = [f"{'clusters':>9} {'runs':>5} {'cand.':>6} {'wall p50':>9} {'wall p99':>9} {'cpu p50':>8} "
             f"{'cpu p99':>8} {'plan-only cpu p99':>18} {'placed':>7}"]
    for r in rows:
        lines.append(f"{r['clusters']:>9,} {r['runs']:>5} {r['candidates']:>6} {r['wall']['p50_ms']:>9.2f} "
                     f"{r['wall']['p99_ms']:>9.2f} {r['cpu']['p50_ms']:>8.2f} {r['cpu']['p99_ms']:>8.2f} "
                     f"{r['indexed_cpu']['p99_ms']:>18.2f} {r['placed']:>7}")
    return "\n".join(lines)


def compared(repeats: list[list[dict]]) -> str:
    """Per fleet size over the repeats: CPU p50 and p99 of the median and the worst run, beside the
    baseline's, and the decision's size beside the size of the one explaining every cluster."""
    lines = [f"{'clusters':>9}  {'cpu p50 (median run)':>20}  {'cpu p99 (median / worst run)':>28}  "
             f"{'baseline cpu p50 / p99 (worst)':>30}  {'decision / every cluster JSON':>29}"]
    for rows in zip(*repeats, strict=True):
        p50 = statistics.median(r["cpu"]["p50_ms"] for r in rows)
        p99 = [r["cpu"]["p99_ms"] for r in rows]
        base = [r["baseline_cpu"] for r in rows if "baseline_cpu" in r]
        base_text = (f"{max(b['p50_ms'] for b in base):.2f} / {max(b['p99_ms'] for b in base):.2f} ms"
                     if base else "-")
        sizes = (f"{rows[0]['decision_bytes'] / 1e3:,.0f} kB / {rows[0]['baseline_decision_bytes'] / 1e3:,.0f} kB"
                 if "baseline_decision_bytes" in rows[0] else f"{rows[0]['decision_bytes'] / 1e3:,.0f} kB")
        lines.append(f"{rows[0]['clusters']:>9,}  {p50:>17.2f} ms  {statistics.median(p99):>12.2f} / "
                     f"{max(p99):>7.2f} ms  {base_text:>30}  {sizes:>29}")
    return "\n".join(lines)


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs per fleet size (fewer at 10,000)")
    parser.add_argument("--repeat", type=int, default=3, help="times the whole measure runs; the worst is reported")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the decision explaining every cluster (slow at 10,000)")
    args = parser.parse_args()
    print(f"load averages (1/5/15 min) at start: {_load()}; {os.cpu_count()} CPUs", flush=True)
    repeats = []
    for i in range(args.repeat):
        rows = [measure(count, args.runs if count < 10_000 else max(20, args.runs // 10),
                        baseline_runs=0 if args.no_baseline else (10 if count < 10_000 else 5))
                for count in SIZES]
        print(f"\nrun {i + 1} of {args.repeat} (load {_load()}):\n{table(rows)}", flush=True)
        repeats.append(rows)
    print(f"\nover {args.repeat} run(s), load at the end {_load()}:\n{compared(repeats)}")


if __name__ == "__main__":
    main()
