"""The live inventory read, through the real `kubernetes` client and the `read_inventory` activity,
against the Kubernetes API emulator (sim/kube)."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.inventory import ReadInventoryInput, read_inventory
from sim.kube import ClusterSpec, NodePool, SimulatedClusters, default_cluster_specs
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.domain.placement import ClusterInfo, PlacementPlan, place


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    specs = [*default_cluster_specs(),
             ClusterSpec(name="sim-mixed", region="eu-west",
                         node_pools=[NodePool.of("b200", 3), NodePool(name="t4", count=2, gpus_per_node=1,
                                                                         gpu_product="Tesla-T4"),
                                     NodePool(name="cpu", count=1, gpus_per_node=0, gpu_product="")])]
    with SimulatedClusters(specs, home=tmp_path_factory.mktemp("sim"), operator_delay=0.05) as clusters:
        yield clusters


def ref(sim, name: str) -> KubeconfigRef:
    return KubeconfigRef(source=str(sim.kubeconfig_path), context=sim.context(name))


def run(sim, name: str):
    return ActivityEnvironment().run(read_inventory, ReadInventoryInput(cluster=name, kubeconfig=ref(sim, name)))


def gpu_pod(name: str, node: str, gpus: int, labels: dict[str, str]) -> k8s.V1Pod:
    res = {"nvidia.com/gpu": str(gpus)}
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name, labels=labels),
                     spec=k8s.V1PodSpec(node_name=node, containers=[k8s.V1Container(
                         name="main", image="sim", resources=k8s.V1ResourceRequirements(requests=res, limits=res))]))


def test_default_clusters_read_as_whole_free_nodes(sim):
    east = run(sim, "sim-east")
    assert east.error is None and east.source == "live" and east.read_at is not None
    assert [(p.hardware_id, p.product, p.gpus_per_node, p.free_gpus, p.nodes) for p in east.pools] == [
        ("h200", "NVIDIA-H200", 8, 8, 4)]
    nvl = run(sim, "sim-nvl")
    assert [(p.hardware_id, p.gpus_per_node, p.nodes) for p in nvl.pools] == [("gb200", 4, 8)]


def test_pods_cordons_and_unknown_products_show_in_the_inventory(sim):
    api = sim.api_client("sim-mixed")
    core = k8s.CoreV1Api(api)
    try:
        nodes = sorted(n.metadata.name for n in core.list_node().items)
        b200 = [n for n in nodes if "-b200-" in n]
        core.create_namespaced_pod("default", gpu_pod("ws-worker", b200[0], 4,
                                                       {"app.kubernetes.io/managed-by": "wingsmith"}))
        core.create_namespaced_pod("default", gpu_pod("tenant", b200[1], 8, {"team": "other"}))
        core.patch_node(b200[2], {"spec": {"unschedulable": True}})
        inv = run(sim, "sim-mixed")
    finally:
        api.close()
    assert [(p.hardware_id, p.product, p.gpus_per_node, p.free_gpus, p.nodes) for p in inv.pools] == [
        (None, "Tesla-T4", 1, 1, 2), ("b200", "NVIDIA-B200", 8, 0, 1), ("b200", "NVIDIA-B200", 8, 4, 1)]
    assert (inv.unschedulable_gpu_nodes, inv.wingsmith_gpus) == (1, 4)

    plan = PlacementPlan(hardware="b200", gpus_per_node=4, replicas=2)
    decision = place(plan, [inv], [ClusterInfo(name="sim-mixed", region="eu-west")])
    assert decision.replicas == {"sim-mixed": 1}
    assert "full" in decision.clusters[0].unplaced_reason


def test_every_default_cluster_feeds_one_placement(sim):
    inventories = [run(sim, name) for name in ("sim-east", "sim-west", "sim-nvl")]
    infos = [ClusterInfo(name=s.name, region=s.region) for s in default_cluster_specs()]
    kimi_k3 = PlacementPlan(hardware="gb200", gpus_per_node=4, nodes_per_replica=4, replicas=3)
    decision = place(kimi_k3, inventories, infos)
    assert decision.replicas == {"sim-nvl": 2}
    assert decision.unplaced == 1


def test_missing_kubeconfig_comes_back_as_an_explained_inventory(sim, tmp_path):
    out = ActivityEnvironment().run(read_inventory, ReadInventoryInput(
        cluster="gone", kubeconfig=KubeconfigRef(source=str(tmp_path / "nope"))))
    assert out.pools == [] and out.error.startswith("KubeconfigMissing")


def test_api_errors_raise_a_retryable_application_error(sim):
    faults = sim.faults("sim-west")
    faults.update({"api_error_rate": 1.0})
    try:
        with pytest.raises(ApplicationError) as info:
            run(sim, "sim-west")
    finally:
        faults.reset()
    assert info.value.type == "ServerError" and not info.value.non_retryable
    assert sim.cluster("sim-west").token not in str(info.value)
