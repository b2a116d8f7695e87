"""A member cluster's preflight, through the real `kubernetes` client and the `check_cluster` activity,
against simulated clusters set up as a platform team might leave them: each missing piece is one failing
line naming what to do, and the same cluster set up right passes every line."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from temporalio.testing import ActivityEnvironment

from activities.cluster_check import check_cluster
from contracts.cluster_check import ClusterCheckInput
from sim.kube import ClusterSpec, NodePool, SimulatedClusters
from sim.kube.access import PolicyRule
from sim.kube.setup import ClusterSetup
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.domain.member_clusters import PLANE_PERMISSIONS, Preflight, rbac_manifests

# The plane's Role as a platform team applies it (docs/member-clusters.md), minus `patch` on DGDs.
FULL_ROLE = [PolicyRule.model_validate(rule) for doc in rbac_manifests("default", "hf-token")
             if doc["kind"] in ("Role", "ClusterRole") for rule in doc["rules"]]
NO_PATCH = [r.model_copy(update={"verbs": [v for v in r.verbs if v != "patch"]}) if r.resources == [
    "dynamographdeployments"] else r for r in FULL_ROLE]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    specs = [ClusterSpec(name="ready", region="eu", node_pools=[NodePool.of("h200", 2)]),
             ClusterSpec(name="no-crds", region="eu", node_pools=[NodePool.of("h200", 1)],
                         setup=ClusterSetup(dynamo_crds="none")),
             ClusterSpec(name="old-crds", region="eu", node_pools=[NodePool.of("h200", 1)],
                         setup=ClusterSetup(dynamo_crds="old")),
             ClusterSpec(name="no-patch", region="eu", node_pools=[NodePool.of("h200", 1)],
                         setup=ClusterSetup(role=NO_PATCH)),
             ClusterSpec(name="no-secret", region="eu", node_pools=[NodePool.of("gb200", 2, arch="arm64")],
                         hf_token_secret=None)]
    with SimulatedClusters(specs, home=tmp_path_factory.mktemp("sim"), operator_delay=0.05) as clusters:
        yield clusters


def check(sim, name: str, namespace: str = "default") -> Preflight:
    return ActivityEnvironment().run(check_cluster, ClusterCheckInput(
        cluster=name, kubeconfig=KubeconfigRef(source=str(sim.kubeconfig_path), context=name),
        namespace=namespace, hf_token_secret="hf-token", kube_task_queue="unused"))


def by_check(preflight: Preflight) -> dict[str, tuple[str, str, str]]:
    return {line.check: (line.status, line.detail, line.fix) for line in preflight.lines}


def test_a_cluster_set_up_as_the_guide_says_passes_every_check(sim):
    sim.setup("ready").role = FULL_ROLE  # exactly the Role the docs print: nothing more is needed
    lines = by_check(check(sim, "ready"))
    assert {k: v[0] for k, v in lines.items()} == {
        "api_server": "pass", "dynamo_crds": "pass", "dynamo_operator": "pass", "permissions": "pass",
        "namespace": "pass", "hub_token_secret": "pass", "gpu_nodes": "pass"}, lines
    assert "v1.33.0-wingsmith-sim" in lines["api_server"][1]
    assert lines["dynamo_crds"][1].startswith("DynamoGraphDeployment serves v1beta1")
    asked = sum(len(p.verbs) for p in PLANE_PERMISSIONS)
    assert f"all {asked} verb(s)" in lines["permissions"][1]
    assert lines["gpu_nodes"][1] == "2 node(s) of NVIDIA-H200 (h200): 16 GPUs allocatable, 16 free"
    assert "its value is not read" in lines["hub_token_secret"][1]


def test_each_missing_piece_is_a_failing_line_with_its_fix(sim):
    no_crds = by_check(check(sim, "no-crds"))
    assert no_crds["dynamo_crds"][:2] == ("fail", "DynamoGraphDeployment (dynamographdeployments.nvidia.com) "
                                                  "is not installed")
    assert "dynamo-crds" in no_crds["dynamo_crds"][2] and "1.3.0" in no_crds["dynamo_crds"][2]

    old = by_check(check(sim, "old-crds"))
    assert old["dynamo_crds"][:2] == ("fail", "DynamoGraphDeployment serves v1alpha1; the plane renders v1beta1")
    assert old["dynamo_crds"][2].startswith("upgrade: install the Dynamo platform")

    no_patch = check(sim, "no-patch")
    lines = by_check(no_patch)
    status, detail, fix = lines["permission:dynamographdeployments.nvidia.com"]
    assert status == "fail" and detail.startswith("the plane's user may not patch dynamographdeployments.nvidia.com "
                                                  "in namespace default"), detail
    assert "wingsmith clusters role --namespace default" in fix
    assert [line.check for line in no_patch.failed] == ["permission:dynamographdeployments.nvidia.com"]

    no_secret = by_check(check(sim, "no-secret"))
    assert no_secret["hub_token_secret"] == (
        "fail", "Secret hf-token (the Hugging Face token the deployments read) is not in namespace default",
        "kubectl -n default create secret generic hf-token --from-literal=HF_TOKEN=<token>")
    assert no_secret["gpu_nodes"][1] == "2 node(s) of NVIDIA-GB200 (gb200): 8 GPUs allocatable, 8 free"

    missing_ns = by_check(check(sim, "ready", namespace="serving"))
    assert missing_ns["namespace"] == ("fail", "namespace serving does not exist", "kubectl create namespace serving")


def test_fixing_the_cluster_makes_the_check_pass(sim):
    core = k8s.CoreV1Api(sim.api_client("no-secret"))
    core.create_namespaced_secret("default", {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "x"}})
    sim.setup("no-patch").role = FULL_ROLE
    sim.setup("old-crds").dynamo_crds = "current"
    for name in ("no-secret", "no-patch", "old-crds"):
        assert check(sim, name).passed, (name, check(sim, name).failed)


def test_an_unreachable_cluster_is_one_failing_line(sim):
    sim.faults("no-crds").unreachable = True
    try:
        preflight = check(sim, "no-crds")
    finally:
        sim.faults("no-crds").reset()
    assert [(line.check, line.status) for line in preflight.lines] == [("api_server", "fail")]
    assert "503" in preflight.lines[0].detail and "kubectl" in preflight.lines[0].fix
