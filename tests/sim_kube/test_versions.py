"""Each DGD version is served in its own shape, converted as the CRD's conversion webhook does
(v1beta1 is the storage version and the hub): a v1beta1 object read through v1alpha1 has a
`services` map, v1alpha1 `resources.limits.gpu` and `extraPodSpec.mainContainer`; a merge patch
through v1alpha1 in v1alpha1 terms changes the stored object; and a round trip loses nothing."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from sim.kube import LABEL_COMPONENT, LABEL_DGD
from tests.sim_kube.kit import GROUP, PLURAL, apply, dgd, get, ready_for, wait_for

ALPHA = "v1alpha1"


def _alpha(custom, namespace: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, ALPHA, namespace, PLURAL, name)


def _patch_alpha(custom, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    for _ in range(50):  # the operator writes status concurrently
        try:
            return custom.patch_namespaced_custom_object(GROUP, ALPHA, namespace, PLURAL, name, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError("patch kept conflicting")


def test_a_v1beta1_object_reads_in_v1alpha1_shape(sim, custom, namespace):
    written = dgd("shapes", gpus=4, replicas=1)
    apply(custom, namespace, written)
    wait_for(lambda: ready_for(get(custom, namespace, "shapes"), 1), what="ready")

    alpha = _alpha(custom, namespace, "shapes")
    assert alpha["apiVersion"] == f"{GROUP}/{ALPHA}"
    assert "components" not in alpha["spec"] and set(alpha["spec"]["services"]) == {"Frontend", "VllmWorker"}
    beta_worker = written["spec"]["components"][1]
    beta_main = beta_worker["podTemplate"]["spec"]["containers"][0]
    worker = alpha["spec"]["services"]["VllmWorker"]
    assert worker["componentType"] == beta_worker["type"] and worker["replicas"] == beta_worker["replicas"]
    assert worker["resources"]["limits"]["gpu"] == beta_main["resources"]["limits"]["nvidia.com/gpu"]
    main = worker["extraPodSpec"]["mainContainer"]
    assert main["image"] == beta_main["image"] and main["args"] == beta_main["args"]
    assert worker["extraPodSpec"]["nodeSelector"] == beta_worker["podTemplate"]["spec"]["nodeSelector"]
    # Status in v1alpha1 terms too: per service, not per component.
    assert "components" not in alpha["status"] and alpha["status"]["services"]["VllmWorker"]["readyReplicas"] == 1
    assert alpha["status"]["state"] == "successful"
    # The v1beta1 view is untouched by the read.
    assert get(custom, namespace, "shapes")["spec"]["components"] == written["spec"]["components"]


def test_a_merge_patch_through_v1alpha1_in_its_own_fields(sim, custom, namespace):
    apply(custom, namespace, dgd("patched", replicas=1))
    wait_for(lambda: ready_for(get(custom, namespace, "patched"), 1), what="ready")
    patched = _patch_alpha(custom, namespace, "patched", {"spec": {"services": {"VllmWorker": {"replicas": 2}}}})
    assert patched["apiVersion"] == f"{GROUP}/{ALPHA}" and patched["spec"]["services"]["VllmWorker"]["replicas"] == 2
    beta = get(custom, namespace, "patched")
    assert [c["replicas"] for c in beta["spec"]["components"] if c["name"] == "VllmWorker"] == [2]
    assert beta["metadata"]["generation"] == 2
    wait_for(lambda: ready_for(get(custom, namespace, "patched"), 2), what="two replicas ready")
    workers = sim.cluster("sim-east").pods(namespace, f"{LABEL_DGD}=patched,{LABEL_COMPONENT}=VllmWorker")
    assert len(workers) == 2


def test_a_v1alpha1_object_reads_in_v1beta1_shape_and_round_trips(sim, custom, namespace):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0"
    body = {"apiVersion": f"{GROUP}/{ALPHA}", "kind": "DynamoGraphDeployment", "metadata": {"name": "legacy"},
            "spec": {"envs": [{"name": "HF_HOME", "value": "/cache"}], "services": {
                "Frontend": {"componentType": "frontend", "replicas": 1, "dynamoNamespace": "legacy",
                             "extraPodSpec": {"mainContainer": {"image": image}}},
                "decode": {"componentType": "worker", "subComponentType": "decode", "replicas": 1,
                           "resources": {"limits": {"gpu": "2"}},
                           "extraPodSpec": {"mainContainer": {
                               "image": image,
                               "args": ["python3 -m dynamo.vllm --model acme/Tiny-1B"]}}}}}}
    custom.create_namespaced_custom_object(GROUP, ALPHA, namespace, PLURAL, body)
    beta = get(custom, namespace, "legacy")
    assert "services" not in beta["spec"] and beta["spec"]["env"] == body["spec"]["envs"]
    by_name = {c["name"]: c for c in beta["spec"]["components"]}
    assert by_name["decode"]["type"] == "decode"  # worker/decode is a first-class type in v1beta1
    main = by_name["decode"]["podTemplate"]["spec"]["containers"][0]
    assert main["name"] == "main" and main["resources"]["limits"]["nvidia.com/gpu"] == "2"
    wait_for(lambda: ready_for(get(custom, namespace, "legacy"), 1), what="legacy ready")
    again = _alpha(custom, namespace, "legacy")
    for key in ("envs", "services"):
        assert again["spec"][key] == body["spec"][key], key  # v1alpha1-only fields (dynamoNamespace) kept too
