"""The simulated clusters speak like real ones to real tools: `kubectl` lists their DynamoGraphDeployments
over HTTPS with the kubeconfig the plane writes (the README's line), server-side apply merges lists by
their merge keys as the API server does (and keeps lists without one atomic), and access reviews and
requests are answered from the Role the cluster holds."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from sim.kube import SimulatedClusters, default_cluster_specs
from sim.kube.access import PolicyRule
from tests.sim_kube.kit import GROUP, PLURAL, VERSION, apply, dgd, get

KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    with SimulatedClusters(default_cluster_specs(), home=home / "sim", operator_delay=0.05,
                           kubeconfig_path=home / "kubeconfigs" / "simulated-clusters.yaml") as clusters:
        yield clusters


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_lists_the_dgds_of_a_simulated_cluster(sim):
    custom = k8s.CustomObjectsApi(sim.api_client("sim-east"))
    apply(custom, "default", dgd("kubectl-sees-me"))
    # The README's line, as a person types it.
    run = subprocess.run([KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), "--context", "sim-east", "get",
                          "dynamographdeployments"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[:2] == ["NAME", "AGE"] and "kubectl-sees-me" in run.stdout, run.stdout
    # HTTPS with the CA the kubeconfig carries: a client that does not trust it is refused.
    assert sim.cluster("sim-east").server_url.startswith("https://")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{sim.cluster('sim-east').server_url}/version")
    trusting = ssl.create_default_context(cafile=str(sim.ca_file))
    assert httpx.get(f"{sim.cluster('sim-east').server_url}/version", verify=trusting).status_code == 401


def _container(obj: dict, component: str = "VllmWorker") -> dict:
    comp = next(c for c in obj["spec"]["components"] if c["name"] == component)
    return comp["podTemplate"]["spec"]["containers"][0]


def test_apply_merges_lists_by_their_keys_as_the_api_server_does(sim):
    custom = k8s.CustomObjectsApi(sim.api_client("sim-west"))
    apply(custom, "default", dgd("merged"), manager="wingsmith")
    # Another manager (a person's kubectl, a sidecar injector) applies only an env var of the worker's main
    # container and a port: the DGD's schema says components, containers and env are maps keyed by name,
    # ports by containerPort and protocol.
    extra = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamoGraphDeployment", "metadata": {"name": "merged"},
             "spec": {"components": [{"name": "VllmWorker", "podTemplate": {"spec": {"containers": [
                 {"name": "main", "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                  "ports": [{"containerPort": 9090, "name": "metrics"}]}]}}}]}}
    apply(custom, "default", extra, manager="debugger", force=False)
    obj = get(custom, "default", "merged")
    main = _container(obj)
    assert [e["name"] for e in main["env"]] == ["MODEL_PATH", "NCCL_DEBUG"]  # merged, not replaced
    assert main["image"].startswith("nvcr.io/") and main["ports"] == [{"containerPort": 9090, "name": "metrics"}]
    assert [c["name"] for c in obj["spec"]["components"]] == ["Frontend", "VllmWorker"]
    managed = {m["manager"]: m["fieldsV1"] for m in obj["metadata"]["managedFields"]}
    env_owned = (managed["debugger"]["f:spec"]["f:components"]['k:{"name":"VllmWorker"}']["f:podTemplate"]
                 ["f:spec"]["f:containers"]['k:{"name":"main"}']["f:env"])
    assert list(env_owned) == ['k:{"name":"NCCL_DEBUG"}']

    # The plane applies again without that env var: what the other manager owns stays; an env var the plane
    # stops applying goes; an atomic list (args) is replaced whole.
    again = dgd("merged")
    worker = next(c for c in again["spec"]["components"] if c["name"] == "VllmWorker")
    worker["podTemplate"]["spec"]["containers"][0]["env"] = [{"name": "MODEL_PATH", "value": "/models/other"},
                                                             {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    worker["podTemplate"]["spec"]["containers"][0]["args"] = ["python3 -m dynamo.vllm --model /models/other"]
    apply(custom, "default", again, manager="wingsmith")
    main = _container(get(custom, "default", "merged"))
    assert {e["name"]: e.get("value") for e in main["env"]} == {
        "MODEL_PATH": "/models/other", "NCCL_DEBUG": "INFO", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert main["args"] == ["python3 -m dynamo.vllm --model /models/other"]
    # Another manager's differing value for an item's field conflicts, as on a real server.
    clash = {**extra, "spec": {"components": [{"name": "VllmWorker", "podTemplate": {"spec": {"containers": [
        {"name": "main", "env": [{"name": "MODEL_PATH", "value": "/elsewhere"}]}]}}}]}}
    with pytest.raises(ApiException) as conflict:
        apply(custom, "default", clash, manager="debugger", force=False)
    assert conflict.value.status == 409 and "spec.components" in conflict.value.body


def test_access_reviews_and_requests_answer_from_the_cluster_s_role(sim):
    api = sim.api_client("sim-nvl")
    authz, custom = k8s.AuthorizationV1Api(api), k8s.CustomObjectsApi(api)

    def may(verb: str, resource: str = PLURAL, group: str = GROUP) -> bool:
        review = authz.create_self_subject_access_review({"apiVersion": "authorization.k8s.io/v1",
                                                          "kind": "SelfSubjectAccessReview", "spec": {
            "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "namespace": "default"}}})
        return review.status.allowed

    assert may("patch") and may("delete")  # the default user is cluster-admin
    sim.setup("sim-nvl").role = [PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "list"])]
    try:
        assert may("get") and not may("patch") and not may("list", "pods", "")
        with pytest.raises(ApiException) as refused:
            apply(custom, "default", dgd("refused"))
        message = json.loads(refused.value.body)["message"]
        assert refused.value.status == 403 and 'cannot patch resource "dynamographdeployments"' in message, message
        assert custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)["items"] == []
    finally:
        sim.setup("sim-nvl").role = None
