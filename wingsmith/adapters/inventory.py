"""A cluster's GPU inventory, as placement needs it: read live from the Kubernetes API, or declared
by hand for clusters whose nodes carry no GPU labels.

Live read, from two list calls (nodes, then pods in every namespace):
- a GPU node is a node with allocatable `nvidia.com/gpu` > 0; its card comes from the
  `nvidia.com/gpu.product` label (written by NVIDIA GPU feature discovery), mapped to the plane's
  hardware ids by `wingsmith.domain.hardware.hardware_for_product_label`;
- a node's free GPUs are its allocatable GPUs minus the GPUs requested by every pod bound to it that
  has not finished, whoever owns the pod: other tenants' GPUs are just as taken;
- the GPUs held by Wingsmith are those of pods labelled `app.kubernetes.io/managed-by=wingsmith`.
  That label is the contract with the graph renderer (wingsmith.domain.dynamo.render): every pod of a
  Wingsmith deployment must carry it. Pods carrying the renderer's `wingsmith.dev/workload` link
  label are counted as Wingsmith's too, since the Dynamo operator propagates that one to pods;
- cordoned (unschedulable) and not-Ready GPU nodes take no new work and are left out of the pools,
  but counted, so a cluster that looks empty can say why.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from wingsmith.domain.dynamo.names import LABEL_MANAGED_BY, LABEL_WORKLOAD
from wingsmith.domain.hardware import get_hardware, hardware_for_product_label
from wingsmith.domain.placement.models import ClusterInventory, NodePool
from wingsmith.domain.text import MAX_NODES, MAX_POOLS, NameText

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
MANAGED_BY_VALUE = "wingsmith"
WINGSMITH_POD_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY_VALUE}"
_FINISHED_PHASES = {"Succeeded", "Failed"}


# --- manual inventory ---------------------------------------------------------------------------------

class ManualPool(BaseModel, frozen=True):
    hardware: NameText = Field(description="hardware id, e.g. h200")
    gpus_per_node: int | None = Field(default=None, ge=1, le=1024,
                                      description="GPUs per node; default: the card's usual count")
    nodes: int = Field(ge=1, le=MAX_NODES)
    free_gpus: int | None = Field(default=None, ge=0, le=1024, description="free GPUs per node; default: all")

    @field_validator("hardware")
    @classmethod
    def _known(cls, value: str) -> str:
        return get_hardware(value).id

    @model_validator(mode="after")
    def _free_fits(self) -> ManualPool:
        if self.free_gpus is not None and self.free_gpus > self.per_node:
            raise ValueError(f"free_gpus ({self.free_gpus}) exceeds gpus_per_node ({self.per_node})")
        return self

    @property
    def per_node(self) -> int:
        return self.gpus_per_node or get_hardware(self.hardware).gpus_per_node


class ManualInventory(BaseModel, frozen=True):
    """GPU nodes declared by an admin, for clusters whose nodes carry no `nvidia.com/gpu.product`
    label. Stored with the cluster; placement uses it instead of a live read."""
    # Bounded: the inventory travels with the cluster into every workload's placement (a Temporal payload).
    pools: list[ManualPool] = Field(min_length=1, max_length=MAX_POOLS)

    def to_inventory(self, cluster: str) -> ClusterInventory:
        pools = [NodePool(hardware_id=p.hardware, product=f"manual:{p.hardware}", gpus_per_node=p.per_node,
                          free_gpus=p.per_node if p.free_gpus is None else p.free_gpus, nodes=p.nodes)
                 for p in self.pools]
        return ClusterInventory(cluster=cluster, source="manual", pools=pools)


# --- live inventory -----------------------------------------------------------------------------------

class NodeFacts(BaseModel, frozen=True):
    name: str
    product: str | None
    gpus: int
    schedulable: bool


class PodFacts(BaseModel, frozen=True):
    node: str | None
    gpus: int
    wingsmith: bool


def summarize(cluster: str, nodes: list[NodeFacts], pods: list[PodFacts], *,
              read_at: datetime | None = None) -> ClusterInventory:
    """Pools of alike nodes from per-node and per-pod facts."""
    used: Counter[str] = Counter()
    wingsmith = 0
    for pod in pods:
        if pod.node and pod.gpus:
            used[pod.node] += pod.gpus
            wingsmith += pod.gpus if pod.wingsmith else 0
    pools: Counter[tuple[str | None, str, int, int]] = Counter()
    unlabelled = unschedulable = 0
    for node in nodes:
        if node.gpus <= 0:
            continue
        if not node.schedulable:
            unschedulable += 1
            continue
        if not node.product:
            unlabelled += 1
            continue
        card = hardware_for_product_label(node.product)
        free = max(0, node.gpus - used[node.name])
        pools[(card.id if card else None, node.product, node.gpus, free)] += 1
    return ClusterInventory(
        cluster=cluster, source="live", read_at=read_at,
        pools=[NodePool(hardware_id=hw, product=product, gpus_per_node=gpus, free_gpus=free, nodes=count)
               for (hw, product, gpus, free), count in sorted(pools.items(), key=_pool_order)],
        unlabelled_gpu_nodes=unlabelled, unschedulable_gpu_nodes=unschedulable, wingsmith_gpus=wingsmith)


def _pool_order(item):
    (hw, product, gpus, free), _count = item
    return (hw or "", product, gpus, free)


def _container_gpus(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    # Extended resources must have requests == limits; a limit alone implies the request.
    value = (resources.get("requests") or {}).get(GPU_RESOURCE) or (resources.get("limits") or {}).get(GPU_RESOURCE)
    return _quantity(value)


def _quantity(value: Any) -> int:
    if value in (None, ""):
        return 0
    from kubernetes.utils import parse_quantity
    return int(parse_quantity(value))


def read_inventory(api_client: Any, cluster: str) -> ClusterInventory:
    """The live inventory of one cluster through a `kubernetes.client.ApiClient`.

    The lists are read as the API's JSON, not the client's models: turning every pod of a busy cluster
    into `V1Pod` objects took seconds of CPU per read (at 5,000 workloads, most of a worker's time), for
    the four fields read here.

    Raises `wingsmith.adapters.kube.KubeError` (classified, retryable or not) when the API cannot be read."""
    from kubernetes import client as k8s

    from wingsmith.adapters.kube import with_retries

    core = k8s.CoreV1Api(api_client)
    nodes = with_retries(lambda: _items(core.list_node(_preload_content=False)),
                         doing=f"listing nodes of cluster {cluster}")
    pods = with_retries(lambda: _items(core.list_pod_for_all_namespaces(_preload_content=False)),
                        doing=f"listing pods of cluster {cluster}")
    facts = [f for f in (pod_facts(p) for p in pods) if f is not None]
    return summarize(cluster, [node_facts(n) for n in nodes], facts, read_at=datetime.now(UTC))


def _items(response: Any) -> list[dict[str, Any]]:
    """The items of a list answer (an undecoded `urllib3` response), as JSON objects. An answer that is
    not a list is the cluster's fault, and asking again will not change it."""
    from wingsmith.adapters.kube import KubeError

    try:
        body = json.loads(response.data)
    except (ValueError, RecursionError):
        body = None
    finally:
        response.release_conn()
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise KubeError("InvalidAnswer", "the cluster's API answered a list call with something that is not "
                        "a Kubernetes list", retryable=False)
    return [item for item in items if isinstance(item, dict)]


def node_facts(node: dict[str, Any]) -> NodeFacts:
    """Facts of a Node, as the API serves it (JSON)."""
    status, spec, meta = node.get("status") or {}, node.get("spec") or {}, node.get("metadata") or {}
    allocatable = status.get("allocatable") or {}
    ready = True
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    return NodeFacts(name=meta.get("name") or "", product=(meta.get("labels") or {}).get(GPU_PRODUCT_LABEL) or None,
                     gpus=_quantity(allocatable.get(GPU_RESOURCE)),
                     schedulable=ready and not spec.get("unschedulable"))


def pod_facts(pod: dict[str, Any]) -> PodFacts | None:
    """Facts of a Pod, as the API serves it (JSON); None for a pod that has finished and holds nothing."""
    if (pod.get("status") or {}).get("phase") in _FINISHED_PHASES:
        return None
    spec = pod.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    # The scheduler reserves the larger of the running containers' sum and any single init container.
    running = sum(_container_gpus(c) for c in spec.get("containers") or [])
    init = max((_container_gpus(c) for c in spec.get("initContainers") or []), default=0)
    return PodFacts(node=spec.get("nodeName"), gpus=max(running, init),
                    wingsmith=labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE or LABEL_WORKLOAD in labels)
