"""Inventory from nodes and pods as the API serves them (built with the kubernetes client's own models, then
serialised as the API would answer), and manual inventories."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from pydantic import ValidationError

from wingsmith.adapters.inventory import ManualInventory, node_facts, pod_facts, summarize
from wingsmith.domain.placement import PlacementPlan, place
from wingsmith.domain.placement.models import ClusterInfo


def node(name, gpus=None, product=None, *, unschedulable=None, ready="True"):
    labels = {"kubernetes.io/hostname": name}
    if product:
        labels["nvidia.com/gpu.product"] = product
    allocatable = {"cpu": "128", "memory": "2Ti"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return _json(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=name, labels=labels),
                            spec=k8s.V1NodeSpec(unschedulable=unschedulable),
                            status=k8s.V1NodeStatus(allocatable=allocatable,
                                                    conditions=[k8s.V1NodeCondition(type="Ready", status=ready)])))


def pod(name, node_name, gpus, *, labels=None, phase="Running", init_gpus=None, limits_only=False):
    res = {"nvidia.com/gpu": str(gpus)}
    resources = k8s.V1ResourceRequirements(limits=res) if limits_only else k8s.V1ResourceRequirements(
        requests=res, limits=res)
    init = None
    if init_gpus:
        init = [k8s.V1Container(name="init", resources=k8s.V1ResourceRequirements(
            requests={"nvidia.com/gpu": str(init_gpus)}))]
    return _json(k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name, namespace="ns", labels=labels or {}),
                           spec=k8s.V1PodSpec(node_name=node_name,
                                              containers=[k8s.V1Container(name="c", resources=resources)],
                                              init_containers=init),
                           status=k8s.V1PodStatus(phase=phase)))


def _json(obj):
    """The object as the API's JSON (camelCase keys, no nulls), which the inventory reads."""
    return k8s.ApiClient().sanitize_for_serialization(obj)


WINGSMITH = {"app.kubernetes.io/managed-by": "wingsmith"}


def test_live_inventory_pools_free_gpus_and_wingsmith_share():
    nodes = [node("h-1", 8, "NVIDIA-H200"), node("h-2", 8, "NVIDIA-H200"), node("h-3", 8, "NVIDIA-H200"),
             node("h-4", 8, "NVIDIA-H200"), node("gb-1", 4, "NVIDIA-GB200"), node("gb-2", 4, "NVIDIA-GB200"),
             node("t4", 1, "Tesla-T4"), node("cpu", None), node("cordoned", 8, "NVIDIA-H200", unschedulable=True),
             node("sick", 8, "NVIDIA-H200", ready="False"), node("bare", 8)]
    pods = [pod("w1", "h-1", 4, labels=WINGSMITH), pod("w2", "h-1", 2, labels={"wingsmith.dev/workload": "wl"}),
            pod("other", "h-2", 8), pod("done", "h-3", 8, phase="Succeeded"), pod("pending", None, 8, labels=WINGSMITH),
            pod("init", "gb-1", 1, init_gpus=3), pod("limit", "gb-2", 4, limits_only=True)]
    facts = [f for f in map(pod_facts, pods) if f is not None]
    inv = summarize("c1", [node_facts(n) for n in nodes], facts)
    got = sorted((p.hardware_id, p.product, p.gpus_per_node, p.free_gpus, p.nodes) for p in inv.pools
                 if p.hardware_id)
    assert got == [("gb200", "NVIDIA-GB200", 4, 0, 1), ("gb200", "NVIDIA-GB200", 4, 1, 1),
                   ("h200", "NVIDIA-H200", 8, 0, 1), ("h200", "NVIDIA-H200", 8, 2, 1), ("h200", "NVIDIA-H200", 8, 8, 2)]
    assert [(p.product, p.hardware_id) for p in inv.pools if not p.hardware_id] == [("Tesla-T4", None)]
    assert (inv.unlabelled_gpu_nodes, inv.unschedulable_gpu_nodes, inv.wingsmith_gpus) == (1, 2, 6)


def test_live_inventory_feeds_placement_without_over_committing():
    nodes = [node("h-1", 8, "NVIDIA-H200"), node("h-2", 8, "NVIDIA-H200")]
    inv = summarize("c1", [node_facts(n) for n in nodes], [pod_facts(pod("w", "h-1", 4, labels=WINGSMITH))])
    decision = place(PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=1), [inv],
                     [ClusterInfo(name="c1")], explain=True)
    assert decision.placed == 0 and "1 are entirely free" in decision.clusters[0].unplaced_reason


def test_manual_inventory_defaults_to_the_cards_node_size_and_all_free():
    manual = ManualInventory(pools=[{"hardware": "GB300", "nodes": 18},
                                    {"hardware": "b200", "nodes": 2, "gpus_per_node": 8, "free_gpus": 3}])
    inv = manual.to_inventory("x")
    assert [(p.hardware_id, p.gpus_per_node, p.free_gpus, p.nodes) for p in inv.pools] == [
        ("gb300", 4, 4, 18), ("b200", 8, 3, 2)]
    assert inv.source == "manual"


def test_manual_inventory_needs_pools():
    with pytest.raises(ValidationError, match="pools"):
        ManualInventory(pools=[])


class _Answer:
    def __init__(self, data: bytes) -> None:
        self.data, self.released = data, False

    def release_conn(self) -> None:
        self.released = True


@pytest.mark.parametrize("data", [b"not json", b"[]", b'{"items": {}}', b'{"kind": "PodList"}', b"[" * 100_000])
def test_a_list_answer_that_is_not_a_list_is_a_clear_error_not_a_crash(data):
    from wingsmith.adapters.inventory import _items
    from wingsmith.adapters.kube import KubeError

    answer = _Answer(data)
    with pytest.raises(KubeError) as err:
        _items(answer)
    assert err.value.type == "InvalidAnswer" and not err.value.retryable and answer.released
