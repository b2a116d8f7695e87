"""Core resources, auth, discovery and the kubeconfig, through the real `kubernetes` client."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sim.kube import default_cluster_specs


@pytest.mark.parametrize(("cluster", "nodes", "gpus", "product", "region"), [
    ("sim-east", 4, "8", "NVIDIA-H200", "us-east"),
    ("sim-west", 4, "8", "NVIDIA-H200", "us-west"),
    ("sim-nvl", 8, "4", "NVIDIA-GB200", "us-central"),
])
def test_default_clusters_nodes(sim, cluster, nodes, gpus, product, region):
    items = client.CoreV1Api(sim.api_client(cluster)).list_node().items
    assert len(items) == nodes
    for node in items:
        assert node.status.capacity["nvidia.com/gpu"] == gpus == node.status.allocatable["nvidia.com/gpu"]
        assert node.metadata.labels["nvidia.com/gpu.product"] == product
        assert node.metadata.labels["topology.kubernetes.io/region"] == region
    filtered = client.CoreV1Api(sim.api_client(cluster)).list_node(label_selector=f"nvidia.com/gpu.product={product}")
    assert len(filtered.items) == nodes


def test_default_specs_match_hardware_facts():
    specs = {s.name: s for s in default_cluster_specs()}
    assert [(p.count, p.gpus_per_node, p.gpu_product) for p in specs["sim-nvl"].node_pools] == [(8, 4, "NVIDIA-GB200")]
    assert specs["sim-east"].region == "us-east" and specs["sim-west"].region == "us-west"


def test_kubeconfig_has_one_context_per_cluster_with_a_token(sim):
    kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
    assert [c["name"] for c in kubeconfig["contexts"]] == ["sim-east", "sim-west", "sim-nvl"]
    assert all(u["user"]["token"] for u in kubeconfig["users"])
    assert oct(sim.kubeconfig_path.stat().st_mode & 0o777) == "0o600"
    clusters = json.loads((sim.home / "clusters.json").read_text())
    assert "token" not in json.dumps(clusters)
    assert clusters["clusters"]["sim-nvl"]["frontend_base_url"] == sim.cluster("sim-nvl").frontend_base_url


def test_wrong_or_foreign_token_is_401(sim, tmp_path):
    kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
    tokens = {u["name"]: u["user"]["token"] for u in kubeconfig["users"]}
    for user in kubeconfig["users"]:
        # sim-east's user gets a made-up token; sim-west's user gets sim-nvl's (real, but foreign) token.
        user["user"]["token"] = {"sim-east-admin": "not-a-token", "sim-west-admin": tokens["sim-nvl-admin"]}.get(
            user["name"], user["user"]["token"])
    bad = tmp_path / "kubeconfig"
    bad.write_text(yaml.safe_dump(kubeconfig))
    for context in ("sim-east", "sim-west"):
        api = config.new_client_from_config(config_file=str(bad), context=context)
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(api).list_namespace()
        assert err.value.status == 401 and json.loads(err.value.body)["reason"] == "Unauthorized"
    assert client.CoreV1Api(config.new_client_from_config(config_file=str(bad), context="sim-nvl")).list_namespace()


def test_discovery(sim, api):
    assert client.VersionApi(api).get_code().major == "1"
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["nvidia.com"].preferred_version.version == "v1beta1"
    assert {v.version for v in groups["nvidia.com"].versions} >= {"v1beta1", "v1alpha1"}
    resources = client.CustomObjectsApi(api).get_api_resources("nvidia.com", "v1beta1")
    names = {r.name for r in resources.resources}
    assert {"dynamographdeployments", "dynamographdeployments/status"} <= names
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition("dynamographdeployments.nvidia.com")
    assert crd.spec.names.kind == "DynamoGraphDeployment"


def test_namespaces_and_secrets(core, namespace):
    assert core.read_namespace(namespace).status.phase == "Active"
    core.create_namespaced_secret(namespace, {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "hf_x"}})
    secret = core.read_namespaced_secret("hf-token", namespace)
    assert base64.b64decode(secret.data["HF_TOKEN"]).decode() == "hf_x" and secret.type == "Opaque"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(namespace, {"metadata": {"name": "hf-token"}, "data": {}})
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        core.read_namespaced_secret("absent", namespace)
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(namespace, {"metadata": {"name": "Bad_Name"}})
    assert err.value.status == 422 and "metadata.name" in err.value.body


def test_clusters_are_isolated(sim, namespace):
    east = client.CoreV1Api(sim.api_client("sim-east"))
    west = client.CoreV1Api(sim.api_client("sim-west"))
    assert namespace in {n.metadata.name for n in east.list_namespace().items}
    assert namespace not in {n.metadata.name for n in west.list_namespace().items}


def test_module_entry_point_prints_the_kubeconfig(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "sim.kube", "--home", str(tmp_path), "--operator-delay", "0"],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = json.loads(process.stdout.readline())
        assert line["kubeconfig"] == str((tmp_path / "kubeconfig").resolve())
        api = config.new_client_from_config(config_file=line["kubeconfig"], context="sim-nvl")
        assert len(client.CoreV1Api(api).list_node().items) == 8
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
