"""The simulated Dynamo operator and frontends, observed through the real `kubernetes` client and
plain HTTP, as the rollout activities and the gateway will see them."""

from __future__ import annotations

import json

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.kube import FRONTEND_URL_ANNOTATION, LABEL_COMPONENT, LABEL_DGD
from tests.sim_kube.kit import GROUP, PLURAL, VERSION, apply, dgd, get, ready_for, wait_for


def test_drives_dgd_through_states_to_successful(sim, custom, namespace):
    apply(custom, namespace, dgd("svc"))
    seen: list[str] = []

    def successful():
        obj = get(custom, namespace, "svc")
        state = (obj.get("status") or {}).get("state")
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        return ready_for(obj, 1) and obj

    obj = wait_for(successful, what="svc successful")
    assert seen[0] == "initializing" and seen[-1] == "successful" and "pending" in seen
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == 1
    assert obj["status"]["components"]["VllmWorker"]["readyReplicas"] == 1
    assert "nvidia.com/finalizer" in obj["metadata"]["finalizers"]
    # The operator's own writes (status, finalizer, annotation) leave the generation alone.
    assert obj["metadata"]["generation"] == 1


def test_spec_change_is_observed_for_the_new_generation(sim, custom, namespace):
    apply(custom, namespace, dgd("roll", gpus=2))
    wait_for(lambda: ready_for(get(custom, namespace, "roll"), 1), what="generation 1 ready")
    apply(custom, namespace, dgd("roll", gpus=4))
    obj = get(custom, namespace, "roll")
    assert obj["metadata"]["generation"] == 2
    assert not ready_for(obj, 2)
    wait_for(lambda: ready_for(get(custom, namespace, "roll"), 2), what="generation 2 ready")
    pods = sim.cluster("sim-east").pods(namespace, f"{LABEL_DGD}=roll,{LABEL_COMPONENT}=VllmWorker")
    assert [p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for p in pods] == ["4"]


def test_pods_per_component_consume_node_gpus(sim, core, custom, namespace):
    before = sum(sim.cluster("sim-east").gpus_in_use().values())
    apply(custom, namespace, dgd("multi", gpus=8, replicas=1, node_count=2))
    wait_for(lambda: ready_for(get(custom, namespace, "multi"), 1), what="multinode ready")
    pods = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}=multi").items
    workers = [p for p in pods if p.metadata.labels[LABEL_COMPONENT] == "VllmWorker"]
    assert len(workers) == 2 and len(pods) == 3
    assert all(p.status.phase == "Running" and p.status.container_statuses[0].ready for p in pods)
    assert len({p.spec.node_name for p in workers}) == 2  # 8 GPUs each: two whole nodes
    assert sum(sim.cluster("sim-east").gpus_in_use().values()) == before + 16


def test_not_enough_gpus_leaves_pods_unschedulable(sim, core, custom, namespace):
    apply(custom, namespace, dgd("huge", gpus=8, replicas=5))  # 40 GPUs on a 32-GPU cluster
    def unschedulable():
        pods = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}=huge").items
        return [p for p in pods if p.status.phase == "Pending" and p.status.conditions
                and p.status.conditions[0].reason == "Unschedulable"]
    pending = wait_for(unschedulable, what="an unschedulable pod")
    assert "Insufficient nvidia.com/gpu" in pending[0].status.conditions[0].message
    wait_for(lambda: get(custom, namespace, "huge")["status"]["state"] == "pending", what="huge pending")
    assert not ready_for(get(custom, namespace, "huge"), 1)
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "huge")
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}=huge").items,
             what="huge pods gone")


def test_node_selector_places_on_matching_cards_only(sim):
    api = sim.api_client("sim-nvl")
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    apply(custom, "default", dgd("on-h200", product="NVIDIA-H200"))
    apply(custom, "default", dgd("on-gb200", gpus=4, product="NVIDIA-GB200"))
    wait_for(lambda: ready_for(get(custom, "default", "on-gb200"), 1), what="gb200 deployment ready")
    assert get(custom, "default", "on-h200")["status"]["state"] == "pending"
    for name in ("on-h200", "on-gb200"):
        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    wait_for(lambda: not core.list_namespaced_pod("default").items, what="pods gone")


def test_frontend_serves_models_chat_and_completions(sim, custom, namespace):
    apply(custom, namespace, dgd("chat", model="acme/Tiny-1B"))
    obj = wait_for(lambda: (o := get(custom, namespace, "chat")) and ready_for(o, 1) and o, what="chat ready")
    url = obj["metadata"]["annotations"][FRONTEND_URL_ANNOTATION]
    assert url == f"{sim.cluster('sim-east').frontend_base_url}/{namespace}/chat"
    assert url == sim.cluster("sim-east").frontend_url(namespace, "chat")

    models = httpx.get(f"{url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["acme/Tiny-1B"]

    body = {"model": "acme/Tiny-1B", "messages": [{"role": "user", "content": "hello there"}]}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body).json()
    text = reply["choices"][0]["message"]["content"]
    assert "sim-east" in text and "chat" in text and namespace in text
    assert httpx.post(f"{url}/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"] == text

    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"

    completion = httpx.post(f"{url}/v1/completions", json={"model": "acme/Tiny-1B", "prompt": "hello there"}).json()
    assert "sim-east" in completion["choices"][0]["text"]
    missing = httpx.post(f"{url}/v1/chat/completions", json={**body, "model": "other/model"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_served_name_falls_back_to_the_model_argument(sim, custom, namespace):
    body = dgd("noname")
    args = body["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["args"]
    args[0] = "python3 -m dynamo.vllm --model ${MODEL_PATH} --tensor-parallel-size 2"
    apply(custom, namespace, body)
    wait_for(lambda: ready_for(get(custom, namespace, "noname"), 1), what="noname ready")
    url = sim.cluster("sim-east").frontend_url(namespace, "noname")
    assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]] == ["/models/tiny"]


def test_delete_stops_frontend_removes_pods_and_object(sim, core, custom, namespace):
    apply(custom, namespace, dgd("bye"))
    wait_for(lambda: ready_for(get(custom, namespace, "bye"), 1), what="bye ready")
    url = sim.cluster("sim-east").frontend_url(namespace, "bye")
    assert httpx.get(f"{url}/v1/models").status_code == 200
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "bye")

    def gone():
        try:
            get(custom, namespace, "bye")
            return False
        except ApiException as exc:
            return exc.status == 404
    wait_for(gone, what="bye deleted")
    assert core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}=bye").items == []
    assert httpx.get(f"{url}/v1/models").status_code == 404
    with pytest.raises(ApiException) as err:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "bye")
    assert err.value.status == 404


def test_zero_delay_is_allowed(tmp_path):
    from sim.kube import ClusterSpec, NodePool, SimulatedClusters
    spec = ClusterSpec(name="tiny", region="lab", node_pools=[NodePool.of("h100", 1)])
    with SimulatedClusters([spec], home=tmp_path, operator_delay=0, tick=0.01) as sim:
        custom = client.CustomObjectsApi(sim.api_client("tiny"))
        apply(custom, "default", dgd("now", product="NVIDIA-H100"))
        wait_for(lambda: ready_for(get(custom, "default", "now"), 1), timeout=2, what="instant readiness")
