"""How good a cluster is for the plan's next replica, and how the replicas are dealt out.

A cluster that passes every filter gets a score from three terms, each between 0 and 1:
- whole_free_nodes: entirely free nodes it keeps after one replica lands, against the nodes all the
  plan's replicas would need; whole nodes are what multi-node replicas need, so keeping them is good;
- fragmentation: how exactly one replica fills the nodes it uses (GPUs left idle on them are lost to
  replicas of this shape);
- labels: the share of the preferred labels it carries.
Replicas are then dealt one at a time to the cluster with the highest score, where the spread term
(replicas already there) outweighs the other terms together: `spread` deals round-robin over the best
clusters (the workload survives losing a cluster), `pack` fills the best cluster before the next (fewer
deployments). Ties break by cluster name, so equal inputs give equal decisions whatever their order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from wingsmith.domain.placement.models import ScoreTerm
from wingsmith.domain.placement.nodes import NodeCounts, take
from wingsmith.domain.placement.rules import Rules

WEIGHTS = {"whole_free_nodes": 1.0, "fragmentation": 1.0, "labels": 1.0}
# Larger than the other weights together, so the spread term decides before any other.
SPREAD_WEIGHT = 10.0 * (1 + sum(WEIGHTS.values()))
# A cluster as replicas are dealt: (-score, name, replicas its free nodes hold); sorted, the best first.
Ranked = tuple[float, str, int]


def preferred_carried(labels: dict[str, str], rules: Rules) -> int:
    """How many of the plan's preferred labels a cluster carries."""
    carried = 0
    for key, value in rules.preferred:
        carried += labels.get(key) == value
    return carried


class ScoreFacts:
    """The counts a cluster's score is made of (the score terms say them in words)."""

    __slots__ = ("kept", "whole", "needed", "idle", "touched", "matched")

    def __init__(self, counts: NodeCounts, matched: int, rules: Rules):
        if rules.nodes == 1:  # the fewest nodes all replicas could need: as many as its biggest node holds
            per_node = max(per_node for _free, per_node, _count in counts.usable) // rules.gpus
            self.needed = -(-rules.replicas // per_node)
        else:
            self.needed = rules.replicas * rules.nodes
        taken, self.idle, self.touched = take(counts.usable, 1, rules.gpus, rules.nodes)
        # Whole nodes *kept* after one replica lands: a cluster that can take it on a partly used node
        # keeps its whole nodes for the multi-node replicas that need them.
        self.whole = counts.whole
        self.kept = counts.whole - sum(nodes for per_node, free, nodes, _gpus in taken if free == per_node)
        self.matched = matched  # preferred labels carried

    def values(self, rules: Rules) -> tuple[float, float, float]:
        """The terms' values: whole_free_nodes, fragmentation, labels."""
        return min(1.0, self.kept / self.needed), 1.0 - self.idle / self.touched, _labels_value(self.matched, rules)


def score(facts: ScoreFacts, rules: Rules) -> float:
    return _weighted(*facts.values(rules))


def ceiling(matched: int, rules: Rules) -> float:
    """The most a cluster carrying `matched` preferred labels can score: its other terms at 1, their
    most (no weight lowers a score), summed as `score` sums them."""
    return _weighted(1.0, 1.0, _labels_value(matched, rules))


def _labels_value(matched: int, rules: Rules) -> float:
    return matched / len(rules.preferred) if rules.preferred else 1.0


def _weighted(whole: float, fragmentation: float, labels: float) -> float:
    """The terms' weighted sum, rounded so equal clusters score equal whatever the arithmetic's order."""
    return round(whole * WEIGHTS["whole_free_nodes"] + fragmentation * WEIGHTS["fragmentation"]
                 + labels * WEIGHTS["labels"], 9)


def score_terms(facts: ScoreFacts, rules: Rules) -> list[ScoreTerm]:
    whole, fragmentation, labels = facts.values(rules)
    card, preferred = rules.card.id, len(rules.preferred)
    return [
        ScoreTerm(name="whole_free_nodes", value=whole, weight=WEIGHTS["whole_free_nodes"],
                  detail=f"{facts.kept} of {facts.whole} entirely free {card} node(s) stay free after one replica "
                         f"lands; all replicas on whole nodes would take {facts.needed}"),
        ScoreTerm(name="fragmentation", value=fragmentation, weight=WEIGHTS["fragmentation"],
                  detail=f"one replica here leaves {facts.idle} of {facts.touched} GPUs idle on the node(s) it uses "
                         "(1.0: it fills them exactly)"),
        ScoreTerm(name="labels", value=labels, weight=WEIGHTS["labels"],
                  detail=f"carries {facts.matched} of {preferred} preferred label(s)" if preferred
                  else "no preferred labels"),
    ]


def spread_term(rules: Rules, replicas: int) -> ScoreTerm:
    """The term that deals the replicas, as it stood once they were dealt."""
    if rules.spread == "spread":
        weight, how = -SPREAD_WEIGHT, "lowers its score by {w:g} per replica already here, so replicas go round-robin"
    else:
        weight, how = SPREAD_WEIGHT, ("raises its score by {w:g} per replica already here, so the best cluster "
                                      "fills before the next")
    return ScoreTerm(name="spread", value=float(replicas), weight=weight,
                     detail=f"{rules.spread}: {replicas} replica(s) here; " + how.format(w=SPREAD_WEIGHT))


def deal(ranked: Sequence[Ranked], rules: Rules) -> dict[str, int]:
    """Replicas by cluster, dealt over `ranked`, best first."""
    sign = -1.0 if rules.spread == "spread" else 1.0
    scores = {name: -rank for rank, name, _fits in ranked}
    room = {name: min(fits, rules.limit) for _rank, name, fits in ranked}
    given = dict.fromkeys(scores, 0)
    heap = [(rank, name) for rank, name, _fits in ranked]  # sorted, so already a heap
    left = rules.replicas
    while left and heap:
        _rank, name = heapq.heappop(heap)
        # Packing keeps taking the same cluster until it is full: do that in one step.
        here = 1 if rules.spread == "spread" else min(left, room[name] - given[name])
        given[name] += here
        left -= here
        if given[name] < room[name]:
            heapq.heappush(heap, (-(scores[name] + sign * SPREAD_WEIGHT * given[name]), name))
    return {name: count for name, count in sorted(given.items()) if count}
