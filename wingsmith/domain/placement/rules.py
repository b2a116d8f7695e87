"""A plan as placement applies it: the card, the replica's shape and the constraints, in the form the
filters and the score check them against each cluster (sets, where a filter asks "is it one of")."""

from __future__ import annotations

from wingsmith.domain.hardware import Hardware, get_hardware
from wingsmith.domain.placement.models import PlacementPlan


class Rules:
    __slots__ = ("plan", "card", "gpus", "nodes", "replicas", "limit", "spread", "shape", "regions", "regions_text",
                 "allowed", "denied", "required", "preferred")

    def __init__(self, plan: PlacementPlan):
        wanted = plan.constraints
        self.plan = plan
        self.card: Hardware = get_hardware(plan.hardware)
        self.gpus = plan.gpus_per_node  # on each node a replica uses
        self.nodes = plan.nodes_per_replica
        self.replicas = plan.replicas
        # The most replicas one cluster may take (never more than the plan asks for).
        self.limit = min(wanted.max_replicas_per_cluster or plan.replicas, plan.replicas)
        self.spread = wanted.spread
        self.shape = f"{self.gpus} {self.card.id} GPU(s)" + (f" × {self.nodes} nodes" if self.nodes > 1 else "")
        self.regions = frozenset(wanted.regions)
        self.regions_text = ", ".join(sorted(self.regions))
        self.allowed = frozenset(wanted.allowed_clusters)
        self.denied = frozenset(wanted.denied_clusters)
        self.required = sorted(wanted.required_labels.items())  # sorted: a reason lists what lacks in order
        self.preferred = list(wanted.preferred_labels.items())
