"""What placement reads and what it decides.

An inventory describes a cluster's GPU nodes as *pools*: nodes that look alike to placement (same
card, same GPU count, same number of free GPUs) are one pool with a node count. Placement never
needs to tell two such nodes apart, and counting them instead of listing them keeps it fast on
clusters with thousands of nodes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass

from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.text import MAX_LIST, CommentText, LabelText, NameText


# A pydantic dataclass with slots rather than a model (the same fields, validation and JSON schema):
# placement reads every pool of a fleet, and a slot is read from the pool object itself, where a
# model's field is read through the model's own `__dict__`, two more objects in memory. A fleet's pools
# lie far apart in memory, so each object visited costs cache misses: with slots, reading the pools
# of 10,000 clusters costs about half as much (and validating them less too). No docstring: it would
# become the schema's description.
@dataclass(frozen=True, slots=True, kw_only=True)
class NodePool:
    hardware_id: NameText | None = Field(
        description="plane hardware id (h100, h200, b200, ...); None when the GPU product is not one "
                    "the plane knows")
    product: NameText = Field(default="", description="the nodes' `nvidia.com/gpu.product` label, as read")
    gpus_per_node: int = Field(ge=1, le=1024, description="allocatable nvidia.com/gpu per node")
    free_gpus: int = Field(ge=0, description="GPUs per node not requested by any running pod")
    nodes: int = Field(ge=1, description="how many nodes look exactly like this")

    @model_validator(mode="after")
    def _free_fits(self) -> NodePool:
        if self.free_gpus > self.gpus_per_node:
            raise ValueError(f"free_gpus ({self.free_gpus}) exceeds gpus_per_node ({self.gpus_per_node})")
        return self


class ClusterInventory(BaseModel):
    cluster: NameText = Field(min_length=1)
    source: Literal["live", "manual"] = "live"
    read_at: datetime | None = None
    pools: list[NodePool] = Field(default_factory=list)
    # Counted so an empty-looking cluster can say why (not placed on: no label, cordoned node...).
    unlabelled_gpu_nodes: int = Field(default=0, ge=0,
                                      description="nodes with GPUs but no nvidia.com/gpu.product label")
    unschedulable_gpu_nodes: int = Field(default=0, ge=0,
                                         description="GPU nodes cordoned or not Ready, left out of pools")
    wingsmith_gpus: int = Field(default=0, ge=0,
                                description="GPUs held by pods labelled app.kubernetes.io/managed-by=wingsmith")
    error: CommentText | None = Field(default=None, description="why the inventory could not be read, if it could not")


class ClusterInfo(BaseModel, frozen=True):
    """What placement needs to know about a registered cluster besides its nodes."""
    name: str = Field(min_length=1)
    region: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    cordoned: bool = False
    unplaceable: str | None = Field(
        default=None, description="why the cluster takes no replicas though registered: its last preflight check "
                                  "failed (wingsmith/domain/member_clusters.py); None: it may")


class PlacementConstraints(BaseModel, frozen=True):
    regions: list[LabelText] = Field(default_factory=list, max_length=MAX_LIST,
                                     description="allowed regions; empty: any")
    allowed_clusters: list[NameText] = Field(default_factory=list, max_length=MAX_LIST,
                                             description="only these clusters; empty: any")
    denied_clusters: list[NameText] = Field(default_factory=list, max_length=MAX_LIST)
    required_labels: dict[NameText, LabelText] = Field(default_factory=dict, max_length=MAX_LIST,
                                                       description="cluster labels a cluster must carry")
    preferred_labels: dict[NameText, LabelText] = Field(default_factory=dict, max_length=MAX_LIST,
                                                        description="cluster labels that raise a cluster's score")
    max_replicas_per_cluster: int | None = Field(default=None, ge=1)
    spread: Literal["spread", "pack"] = Field(
        default="spread",
        description="spread: replicas go round-robin over the best clusters (survives losing a cluster); "
                    "pack: fill the best cluster before using the next (fewer deployments)")


class PlacementPlan(BaseModel, frozen=True):
    hardware: NameText = Field(description="hardware id, e.g. h200, b200, gb200")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs one replica uses on each of its nodes")
    nodes_per_replica: int = Field(default=1, ge=1, le=1024)
    replicas: int = Field(ge=1, le=100_000)
    constraints: PlacementConstraints = Field(default_factory=PlacementConstraints)

    @field_validator("hardware")
    @classmethod
    def _known_hardware(cls, value: str) -> str:
        return get_hardware(value).id  # raises, naming the known ids

    @property
    def gpus_per_replica(self) -> int:
        return self.gpus_per_node * self.nodes_per_replica


class FilterResult(BaseModel, frozen=True):
    name: str
    passed: bool
    reason: str


class ScoreTerm(BaseModel):
    name: str
    value: float
    weight: float
    detail: str


class NodeUse(BaseModel):
    """`nodes` nodes of `gpus_per_node` GPUs, each with `free_before` free GPUs, give `gpus_taken`
    GPUs each to the replicas placed on this cluster."""
    hardware_id: str
    gpus_per_node: int
    free_before: int
    nodes: int
    gpus_taken: int


class ClusterVerdict(BaseModel):
    cluster: str
    eligible: bool
    filters: list[FilterResult]
    scores: list[ScoreTerm]
    score: float = Field(description="weighted sum of the score terms except spread")
    fits: int = Field(description="replicas of this shape its free nodes could hold now")
    replicas: int
    node_use: list[NodeUse]
    unplaced_reason: str | None = Field(
        default=None, description="when replicas were left unplaced: why this cluster took no more")


class RuledOut(BaseModel):
    """Clusters left out of a decision for one reason (as the Kubernetes scheduler says "5000 node(s)
    had untolerated taint"), so a decision over thousands of clusters stays small."""
    filter: str = Field(description="the first filter they fail")
    reason: str = Field(description="that filter's reason, the same for all of them")
    clusters: list[str] = Field(description="by name")


class PlacementDecision(BaseModel):
    plan: PlacementPlan
    replicas: dict[str, int] = Field(description="cluster → replicas placed there (only clusters with some)")
    placed: int
    unplaced: int
    summary: str
    clusters: list[ClusterVerdict] = Field(
        description="by name, each with every filter and score term: the clusters that receive replicas, and the "
                    "clusters the caller asked to have explained (`POST /v1/placements/dry-run` explains every "
                    "cluster on fleets up to 1,000 clusters, and the clusters named in `explain` on any fleet)")
    ruled_out: list[RuledOut] = Field(
        default_factory=list,
        description="the other clusters that fail a filter, grouped by the first filter they fail and its reason "
                    "(clusters without the plan's card are one group, whatever they have instead)")
    passed_over: list[str] = Field(
        default_factory=list,
        description="the other clusters, by name: they pass every filter but took no replica, because every "
                    "replica went to a cluster that scored higher (ties: by name)")

    @property
    def complete(self) -> bool:
        return self.unplaced == 0
