"""An oracle for placement: the rules stated as directly as they can be, to hold wingsmith/domain/placement to.
Not product code, and nothing here is meant to be fast; it shares nothing with the product but its
models and its weights.

It decides what a placement decides: for every cluster, the filters it fails (by name, in order), the
replicas its free nodes hold, its score, the replicas it gets and the nodes they take. It words
nothing: the product's words are pinned by the tables of test_place.py. Where the product works out
with whole pools at once which nodes replicas take, the oracle lands replicas one at a time, each on
the node that fits it best at that moment, and lets that node's free GPUs go down.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field

from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, PlacementPlan
from wingsmith.domain.placement.scoring import SPREAD_WEIGHT, WEIGHTS

STATIC = ("registered", "inventory", "cordon", "preflight", "allowed_clusters", "denied_clusters", "region",
          "required_labels")
NODE = ("hardware", "node_shape", "capacity")

# A cluster's nodes of the plan's card: (GPUs per node, free GPUs before the decision, free GPUs now) -> nodes.
# (Nodes alike are counted, not listed: a fleet of 10,000 clusters has millions of nodes.)
Nodes = Counter


@dataclass
class Outcome:
    """What the oracle decides of one cluster."""
    failed: list[str]  # the filters it fails, in order
    fits: int
    score: float | None = None  # None: it fails a filter
    replicas: int = 0
    # (GPUs per node, free GPUs before, GPUs its replicas take) -> nodes, of the nodes its replicas take
    taken: Counter = field(default_factory=Counter)


def nodes_of(inventory: ClusterInventory | None, card: str) -> Nodes:
    nodes: Nodes = Counter()
    for p in inventory.pools if inventory is not None and not inventory.error else ():
        if p.hardware_id == card:
            nodes[(p.gpus_per_node, p.free_gpus, p.free_gpus)] += p.nodes
    return nodes


def fits(nodes: Nodes, plan: PlacementPlan) -> int:
    """Replicas the free nodes hold: as many per node as its free GPUs hold, or, for replicas of
    several nodes, one per that many entirely free nodes."""
    g, n = plan.gpus_per_node, plan.nodes_per_replica
    if n == 1:
        return sum(count * (free // g) for (_gpus, _before, free), count in nodes.items())
    return sum(count for (gpus, _before, free), count in nodes.items() if free == gpus >= g) // n


def failed_filters(name: str, info: ClusterInfo | None, inventory: ClusterInventory | None, nodes: Nodes,
                   plan: PlacementPlan) -> list[str]:
    c = plan.constraints
    fails = {
        "registered": info is None,
        "inventory": inventory is None or bool(inventory.error),
        "cordon": info is not None and info.cordoned,
        "preflight": info is not None and bool(info.unplaceable),
        "allowed_clusters": bool(c.allowed_clusters) and name not in c.allowed_clusters,
        "denied_clusters": name in c.denied_clusters,
        "region": bool(c.regions) and (info.region if info else "") not in c.regions,
        "required_labels": any((info.labels if info else {}).get(k) != v for k, v in c.required_labels.items()),
        "hardware": not nodes or not get_hardware(plan.hardware).placeable,
        "node_shape": not any(gpus >= plan.gpus_per_node for gpus, _before, _free in nodes),
        "capacity": fits(nodes, plan) == 0,
    }
    return [f for f in STATIC + NODE if fails[f]]


def land(nodes: Nodes, plan: PlacementPlan) -> list[tuple[int, int, int]] | None:
    """Land one more replica, taking its GPUs: the nodes it takes, as they were just before; None: it
    fits nowhere. A single-node replica takes the node with the fewest free GPUs that still hold it (then
    the smaller node); a replica of several nodes takes that many entirely free nodes, the smallest first."""
    g, n = plan.gpus_per_node, plan.nodes_per_replica
    chosen = []
    for _ in range(n):
        if n == 1:
            room = [(free, gpus, before) for (gpus, before, free), count in nodes.items() if count and free >= g]
        else:
            room = [(gpus, gpus, before) for (gpus, before, free), count in nodes.items()
                    if count and free == gpus >= g]
        if not room:
            break
        free, gpus, before = min(room)
        nodes[(gpus, before, free)] -= 1
        nodes[(gpus, before, free - g)] += 1
        chosen.append((gpus, before, free))
    if len(chosen) < n:  # put back what a replica of several nodes took before it ran out
        for gpus, before, free in chosen:
            nodes[(gpus, before, free - g)] -= 1
            nodes[(gpus, before, free)] += 1
        return None
    return chosen


def score(nodes: Nodes, info: ClusterInfo, plan: PlacementPlan) -> float:
    g, n, preferred = plan.gpus_per_node, plan.nodes_per_replica, plan.constraints.preferred_labels
    if n == 1:  # the fewest nodes all replicas could need, on its biggest node that holds one
        needed = math.ceil(plan.replicas / (max(gpus for gpus, _before, free in nodes if free >= g) // g))
    else:
        needed = plan.replicas * n
    whole = sum(count for (gpus, _before, free), count in nodes.items() if free == gpus >= g)
    landed = land(Counter(nodes), plan)
    assert landed is not None
    kept = whole - sum(free == gpus for gpus, _before, free in landed)
    idle = sum(free - g for _gpus, _before, free in landed)
    touched = sum(gpus for gpus, _before, _free in landed)
    labels = sum(info.labels.get(k) == v for k, v in preferred.items()) / len(preferred) if preferred else 1.0
    return round(min(1.0, kept / needed) * WEIGHTS["whole_free_nodes"] + (1.0 - idle / touched)
                 * WEIGHTS["fragmentation"] + labels * WEIGHTS["labels"], 9)


def place(plan: PlacementPlan, inventories: list[ClusterInventory],
          clusters: list[ClusterInfo]) -> tuple[dict[str, int], dict[str, Outcome]]:
    """The replicas by cluster (those with some, by name), and every cluster's outcome, by name."""
    infos = {c.name: c for c in clusters}
    invs = {i.cluster: i for i in inventories}
    outcomes: dict[str, Outcome] = {}
    nodes: dict[str, Nodes] = {}
    for name in sorted(infos.keys() | invs.keys()):
        nodes[name] = nodes_of(invs.get(name), get_hardware(plan.hardware).id)
        failed = failed_filters(name, infos.get(name), invs.get(name), nodes[name], plan)
        outcome = outcomes[name] = Outcome(failed=failed, fits=fits(nodes[name], plan))
        if not failed:
            outcome.score = score(nodes[name], infos[name], plan)
    # One replica at a time, to the cluster with room whose score, lowered (spread) or raised (pack) by
    # SPREAD_WEIGHT per replica it already has, is the highest; ties to the first by name.
    limit = plan.constraints.max_replicas_per_cluster or plan.replicas
    sign = -1.0 if plan.constraints.spread == "spread" else 1.0
    waiting = [(-o.score, name) for name, o in outcomes.items() if o.score is not None and min(o.fits, limit)]
    heapq.heapify(waiting)
    for _ in range(plan.replicas):
        if not waiting:
            break
        _key, name = heapq.heappop(waiting)
        best = outcomes[name]
        best.replicas += 1
        assert land(nodes[name], plan) is not None, name
        if best.replicas < min(best.fits, limit):
            assert best.score is not None
            heapq.heappush(waiting, (-(best.score + sign * SPREAD_WEIGHT * best.replicas), name))
    for name, o in outcomes.items():
        for (gpus, before, free), count in nodes[name].items():
            if count and free < before:
                o.taken[(gpus, before, before - free)] += count
    return {name: o.replicas for name, o in outcomes.items() if o.replicas}, outcomes
