"""Placement: a pure function from a plan, the clusters and their GPU inventories to a decision that
explains itself cluster by cluster. See `place`."""

from wingsmith.domain.placement.models import (
    ClusterInfo,
    ClusterInventory,
    ClusterVerdict,
    FilterResult,
    NodePool,
    NodeUse,
    PlacementConstraints,
    PlacementDecision,
    PlacementPlan,
    RuledOut,
    ScoreTerm,
)
from wingsmith.domain.placement.place import EXPLAIN_EVERY_CLUSTER_UP_TO, FleetIndex, PlacementInputError, place

__all__ = ["EXPLAIN_EVERY_CLUSTER_UP_TO",
           "ClusterInfo", "ClusterInventory", "ClusterVerdict", "FilterResult", "FleetIndex", "NodePool", "NodeUse",
           "PlacementConstraints", "PlacementDecision", "PlacementPlan", "PlacementInputError", "RuledOut", "ScoreTerm",
           "place"]
