"""Each injectable fault, as the rollout's wait-ready and retry logic will meet it."""

from __future__ import annotations

import time

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.kube import LABEL_COMPONENT, LABEL_DGD
from tests.sim_kube.kit import GROUP, PLURAL, VERSION, apply, dgd, get, ready_for, wait_for


def _worker_status(core: client.CoreV1Api, namespace: str, name: str):
    pods = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}={name},{LABEL_COMPONENT}=VllmWorker").items
    return pods[0].status if pods and pods[0].status.container_statuses else None


def _waiting_reason(status) -> str | None:
    state = status.container_statuses[0].state if status else None
    return state.waiting.reason if state and state.waiting else None


def test_crash_loop(sim, core, custom, namespace):
    sim.faults("sim-east").crash_loop = True
    apply(custom, namespace, dgd("crash"))
    status = wait_for(lambda: (s := _worker_status(core, namespace, "crash"))
                      and _waiting_reason(s) == "CrashLoopBackOff" and s, what="CrashLoopBackOff")
    assert status.container_statuses[0].last_state.terminated.exit_code == 1
    first = status.container_statuses[0].restart_count
    wait_for(lambda: _worker_status(core, namespace, "crash").container_statuses[0].restart_count > first,
             what="restarts to grow")
    obj = get(custom, namespace, "crash")
    assert obj["status"]["state"] in ("initializing", "pending") and not ready_for(obj, 1)


def test_image_pull_back_off(sim, core, custom, namespace):
    sim.faults("sim-east").image_pull = True
    apply(custom, namespace, dgd("pull"))
    status = wait_for(lambda: (s := _worker_status(core, namespace, "pull"))
                      and _waiting_reason(s) == "ImagePullBackOff" and s, what="ImagePullBackOff")
    assert status.phase == "Pending"
    assert "vllm-runtime:1.3.0" in status.container_statuses[0].state.waiting.message


def test_repeated_oom_killed(sim, core, custom, namespace):
    sim.faults("sim-east").oom_killed = True
    apply(custom, namespace, dgd("oom"))
    status = wait_for(lambda: (s := _worker_status(core, namespace, "oom")) and s.container_statuses[0].last_state
                      and s.container_statuses[0].last_state.terminated and s.container_statuses[0].restart_count >= 2
                      and s, what="repeated OOMKilled")
    assert status.container_statuses[0].last_state.terminated.reason == "OOMKilled"
    assert status.container_statuses[0].last_state.terminated.exit_code == 137


def test_never_ready(sim, core, custom, namespace):
    sim.faults("sim-east").never_ready = True
    apply(custom, namespace, dgd("slow"))
    time.sleep(1.0)  # well past the 0.3 s operator delay
    status = _worker_status(core, namespace, "slow")
    assert status.phase == "Running" and status.container_statuses[0].state.running
    assert not status.container_statuses[0].ready
    obj = get(custom, namespace, "slow")
    assert obj["status"]["state"] == "pending" and not ready_for(obj, 1)
    url = sim.cluster("sim-east").frontend_url(namespace, "slow")
    assert httpx.get(f"{url}/v1/models").json()["data"] == []  # frontend up, no model registered
    sim.faults("sim-east").never_ready = False
    wait_for(lambda: ready_for(get(custom, namespace, "slow"), 1), what="ready once the fault clears")


def test_operator_failed(sim, custom, namespace):
    sim.faults("sim-east").operator_failed = True
    apply(custom, namespace, dgd("broken"))
    obj = wait_for(lambda: (o := get(custom, namespace, "broken")).get("status", {}).get("state") == "failed" and o,
                   what="state failed")
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReconcileFailed"


def test_every_call_answered_500(sim, custom, namespace):
    sim.faults("sim-east").api_error_rate = 1.0
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert err.value.status == 500 and '"reason":"InternalError"' in err.value.body


def test_a_fraction_of_calls_answered_500(sim, custom, namespace):
    faults = sim.faults("sim-east")
    faults.update({"api_error_rate": 0.3, "seed": 7})
    failures = 0
    for _ in range(200):
        try:
            custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        except ApiException as exc:
            assert exc.status == 500
            failures += 1
    assert 30 <= failures <= 90


def test_conflicts_on_writes_only(sim, custom, namespace):
    sim.faults("sim-east").conflict_rate = 1.0
    with pytest.raises(ApiException) as err:
        apply(custom, namespace, dgd("busy"))
    assert err.value.status == 409
    custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)  # reads unaffected


def test_latency(sim, custom, namespace):
    sim.faults("sim-east").latency = 0.2
    started = time.monotonic()
    custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert time.monotonic() - started >= 0.2


def test_faults_are_per_cluster(sim, namespace):
    sim.faults("sim-west").api_error_rate = 1.0
    east = client.CoreV1Api(sim.api_client("sim-east"))
    west = client.CoreV1Api(sim.api_client("sim-west"))
    east.list_node()
    with pytest.raises(ApiException):
        west.list_node()


def test_admin_route_sets_and_resets_faults(sim):
    cluster = sim.cluster("sim-west")
    url = f"{sim.base_url}/admin/clusters/sim-west/faults"
    auth = {"Authorization": f"Bearer {cluster.token}"}
    assert httpx.patch(url, json={"crash_loop": True}).status_code == 401
    response = httpx.patch(url, json={"crash_loop": True, "latency": 0.05}, headers=auth)
    assert response.status_code == 200 and response.json()["crash_loop"] is True
    assert cluster.faults.crash_loop and cluster.faults.latency == 0.05
    bad = httpx.patch(url, json={"api_error_rate": 2}, headers=auth)
    assert bad.status_code == 422 and "api_error_rate" in bad.text
    assert cluster.faults.api_error_rate == 0
    assert httpx.patch(url, json={"no_such_fault": True}, headers=auth).status_code == 422
    assert httpx.delete(url, headers=auth).json()["crash_loop"] is False
    listing = httpx.get(f"{sim.base_url}/admin/clusters").json()
    assert set(listing) == {"sim-east", "sim-west", "sim-nvl"}


def test_an_unreachable_cluster_answers_503_and_keeps_running_inside(sim, custom, namespace):
    apply(custom, namespace, dgd("partitioned"))
    wait_for(lambda: ready_for(get(custom, namespace, "partitioned"), 1), what="partitioned ready")
    url = sim.cluster("sim-east").frontend_url(namespace, "partitioned")
    sim.faults("sim-east").unreachable = True
    with pytest.raises(ApiException) as err:
        get(custom, namespace, "partitioned")
    assert err.value.status == 503
    assert httpx.get(f"{url}/v1/models").status_code == 503
    assert ready_for(sim.cluster("sim-east").dgd(namespace, "partitioned"), 1)  # nothing changed inside
    sim.faults("sim-east").unreachable = False
    assert ready_for(get(custom, namespace, "partitioned"), 1)
    assert httpx.get(f"{url}/v1/models").json()["data"]


def test_injected_errors_and_latency_per_deployment(sim, custom, namespace):
    """A bad version to try an upgrade with: one DGD's frontend fails and slows its completions, the
    one beside it (the old version) answers as before; set over the admin route, reset with the rest."""
    for name in ("good", "bad"):
        apply(custom, namespace, dgd(name))
    for name in ("good", "bad"):
        wait_for(lambda n=name: ready_for(get(custom, namespace, n), 1), what=f"{name} ready")
    cluster = sim.cluster("sim-east")
    admin = {"Authorization": f"Bearer {cluster.token}"}
    r = httpx.patch(f"{sim.base_url}/admin/clusters/sim-east/faults", headers=admin,
                    json={"frontends": {"bad": {"error_rate": 1.0, "latency": 0.3}}})
    assert r.status_code == 200 and r.json()["frontends"] == {"bad": {"error_rate": 1.0, "latency": 0.3}}, r.text
    body = {"model": "acme/Tiny-1B", "messages": [{"role": "user", "content": "hi"}]}

    def call(name: str) -> tuple[int, float]:
        started = time.monotonic()
        r = httpx.post(f"{cluster.frontend_url(namespace, name)}/v1/chat/completions", json=body, timeout=10)
        return r.status_code, time.monotonic() - started
    code, took = call("bad")
    assert code == 500 and took >= 0.3
    code, took = call("good")
    assert code == 200 and took < 0.3
    assert sim.faults("sim-east").injected["frontend_error"] >= 1

    sim.faults("sim-east").update({"frontends": {"bad": {"error_rate": 0.0, "latency": 0.0}}})
    assert call("bad")[0] == 200
    r = httpx.patch(f"{sim.base_url}/admin/clusters/sim-east/faults", headers=admin,
                    json={"frontends": {"bad": {"error_rate": 2}}})
    assert r.status_code == 422
    sim.faults("sim-east").reset()
    assert sim.faults("sim-east").frontends == {}
