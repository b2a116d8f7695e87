"""A cluster's nodes of the plan's card: how many replicas its free nodes hold, and which nodes a
replica takes.

- a replica uses `gpus_per_node` GPUs on each of `nodes_per_replica` nodes of the plan's card;
- a single-node replica may share a node with others if the node has that many free GPUs; it goes
  to the fullest node that still fits (best fit), so whole nodes stay whole;
- a multi-node replica takes only nodes that are entirely free: its ranks talk over the nodes'
  NICs and NVLink domain, which a co-tenant would share. So two half-free 8-GPU nodes never hold a
  replica needing two whole 8-GPU nodes (16 free GPUs are not two free nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from wingsmith.domain.placement.models import NodePool

# One pool of the plan's card, as placement computes with it: (GPUs per node, free GPUs per node, nodes).
CardPool = tuple[int, int, int]
# Nodes a replica can take: (free GPUs per node, GPUs per node, nodes); sorted, the fullest come first.
Usable = tuple[int, int, int]
# Nodes taken by replicas: (GPUs per node, free GPUs per node before, nodes, GPUs taken on each).
Taken = tuple[int, int, int, int]


def card_pools(pools: Iterable[NodePool], card_id: str) -> tuple[CardPool, ...]:
    """A cluster's pools of the card. Each pool is looked at once for its card and, if it is the card's,
    once more for its numbers: on a large fleet, visiting the pool objects is most of placement's cost
    (tests/placement/test_cost.py counts the visits). A tuple of tuples of numbers, not a list: Python's
    cycle collector stops tracking such tuples, so keeping them does not bring on a collection that
    walks every model of the fleet."""
    return tuple([(p.gpus_per_node, p.free_gpus, p.nodes) for p in pools if p.hardware_id == card_id])


class NodeCounts:
    """What the node filters and the score need to know of one cluster's nodes of the card, for
    replicas of `gpus` GPUs on each of `nodes_per_replica` nodes."""

    __slots__ = ("nodes", "shaped", "biggest", "whole", "partly", "most_free", "usable", "fits")

    def __init__(self, pools: Sequence[CardPool], gpus: int, nodes_per_replica: int):
        # Counted in local variables and stored once: this runs for thousands of clusters per decision.
        nodes = biggest = 0  # nodes of the card, GPUs of its largest node
        shaped = whole = partly = most_free = 0  # nodes with `gpus` GPUs or more: all, entirely free, partly free
        usable: list[Usable] = []
        for per_node, free, count in pools:
            nodes += count
            if per_node > biggest:
                biggest = per_node
            if per_node < gpus:
                continue
            shaped += count
            if free > most_free:
                most_free = free
            if free == per_node:
                whole += count
            elif free:
                partly += count
            if nodes_per_replica == 1 and free >= gpus:
                usable.append((free, per_node, count))
            elif nodes_per_replica > 1 and free == per_node:
                usable.append((per_node, per_node, count))
        usable.sort()
        self.nodes, self.biggest, self.shaped, self.whole, self.partly = nodes, biggest, shaped, whole, partly
        self.most_free = most_free  # the most free GPUs on one node of `gpus` GPUs or more
        self.usable = usable
        if nodes_per_replica == 1:  # a node with `free` free GPUs holds free // gpus replicas
            self.fits = sum(count * (free // gpus) for free, _per_node, count in usable)
        else:
            self.fits = whole // nodes_per_replica


def take(usable: Sequence[Usable], replicas: int, gpus: int, nodes_per_replica: int) -> tuple[list[Taken], int, int]:
    """The nodes `replicas` replicas take, the fullest first: (what they take, GPUs left idle on the nodes
    they use, GPUs of the nodes they use)."""
    taken: list[Taken] = []
    idle = touched = 0
    if nodes_per_replica == 1:
        left = replicas
        for free, per_node, count in usable:
            if not left:
                break
            each = free // gpus  # replicas one of these nodes holds
            here = min(left, count * each)
            filled, rest = divmod(here, each)  # nodes filled with `each` replicas, and one with the rest
            for nodes, on_each in ((filled, each), (1 if rest else 0, rest)):
                if nodes:
                    taken.append((per_node, free, nodes, on_each * gpus))
                    idle += nodes * (free - on_each * gpus)
                    touched += nodes * per_node
            left -= here
    else:
        needed = replicas * nodes_per_replica
        for _free, per_node, count in usable:
            if not needed:
                break
            nodes = min(needed, count)
            taken.append((per_node, per_node, nodes, gpus))
            idle += nodes * (per_node - gpus)
            touched += nodes * per_node
            needed -= nodes
    return taken, idle, touched
