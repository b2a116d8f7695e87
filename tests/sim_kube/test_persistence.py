"""Clusters outlive whoever started them: the emulator started again on the same home finds its
deployments where it left them, serving, and out-of-band changes through the API stay possible."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.kube import FRONTEND_URL_ANNOTATION, ClusterSpec, NodePool, SimulatedClusters
from tests.sim_kube.kit import GROUP, PLURAL, VERSION, apply, dgd, get, ready_for, wait_for
from wingsmith.local.ports import free_port

SPEC = ClusterSpec(name="keep", region="lab", node_pools=[NodePool.of("h200", 1)])


def _start(home: Path, port: int = 0, **kw) -> SimulatedClusters:
    return SimulatedClusters([SPEC], home=home, operator_delay=0.2, tick=0.02, port=port, **kw).start()


def _models(url: str) -> list[str]:
    resp = httpx.get(f"{url}/v1/models", timeout=5)
    return [m["id"] for m in resp.json()["data"]] if resp.status_code == 200 else []


def test_a_restarted_cluster_keeps_its_deployments_serving(tmp_path):
    port = free_port()  # as under `wingsmith up`: the same address after a restart
    sim = _start(tmp_path, port)
    try:
        custom = client.CustomObjectsApi(sim.api_client("keep"))
        apply(custom, "default", dgd("kept", model="acme/kept"))
        apply(custom, "default", dgd("gone-later", model="acme/other"))
        before = wait_for(lambda: ready_for(get(custom, "default", "kept"), 1) and get(custom, "default", "kept"),
                          what="kept ready")
        wait_for(lambda: ready_for(get(custom, "default", "gone-later"), 1), what="gone-later ready")
        pods_before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in sim.cluster("keep").pods("default")}
        gpus_before = sim.cluster("keep").gpus_in_use()
    finally:
        sim.stop()
    state = json.loads((tmp_path / "state" / "keep.json").read_text())
    assert any(o["object"]["metadata"]["name"] == "kept" for o in state["objects"])

    again = _start(tmp_path, port)
    try:
        custom = client.CustomObjectsApi(again.api_client("keep"))
        obj = get(custom, "default", "kept")
        # The same object, not a look-alike: identity, generation and status came back as they were.
        for key in ("uid", "generation", "resourceVersion", "creationTimestamp"):
            assert obj["metadata"][key] == before["metadata"][key], key
        assert ready_for(obj, 1)
        assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in again.cluster("keep").pods("default")} \
            == pods_before
        assert again.cluster("keep").gpus_in_use() == gpus_before
        # The operator adopts the deployment: its frontend answers again without a new rollout.
        url = obj["metadata"]["annotations"][FRONTEND_URL_ANNOTATION]
        wait_for(lambda: _models(url) == ["acme/kept"], timeout=3, what="the frontend published again")
        # Field ownership survived: applying the same body again is still a no-op.
        apply(custom, "default", dgd("kept", model="acme/kept"))
        assert get(custom, "default", "kept")["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        # Out of band, as an operator with kubectl would: an edit bumps the generation, a delete deletes.
        custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "kept",
                                              {"spec": {"backendFramework": "sglang"}})
        assert get(custom, "default", "kept")["metadata"]["generation"] == 2
        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "gone-later")

        def gone() -> bool:
            try:
                get(custom, "default", "gone-later")
                return False
            except ApiException as exc:
                return exc.status == 404
        wait_for(gone, what="gone-later deleted")
    finally:
        again.stop()

    third = _start(tmp_path)
    try:
        custom = client.CustomObjectsApi(third.api_client("keep"))
        assert get(custom, "default", "kept")["metadata"]["generation"] == 2
        assert [d["metadata"]["name"] for d in third.cluster("keep").dgds()] == ["kept"]
    finally:
        third.stop()


def test_a_rollout_in_flight_finishes_after_a_restart(tmp_path):
    sim = _start(tmp_path)
    try:
        custom = client.CustomObjectsApi(sim.api_client("keep"))
        apply(custom, "default", dgd("halfway", model="acme/halfway"))
    finally:
        sim.stop()
    again = _start(tmp_path)
    try:
        custom = client.CustomObjectsApi(again.api_client("keep"))
        wait_for(lambda: ready_for(get(custom, "default", "halfway"), 1), what="halfway ready after the restart")
    finally:
        again.stop()


def test_in_memory_clusters_start_empty(tmp_path):
    sim = _start(tmp_path, persist=False)
    try:
        apply(client.CustomObjectsApi(sim.api_client("keep")), "default", dgd("fleeting"))
    finally:
        sim.stop()
    assert not (tmp_path / "state").exists()
    again = _start(tmp_path, persist=False)
    try:
        assert again.cluster("keep").dgds() == []
    finally:
        again.stop()
