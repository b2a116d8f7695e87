"""Fault drills: a cluster that never becomes ready has its replicas re-placed; when every cluster
fails the rollout is rolled back to no DGD; a worker killed with SIGKILL mid-rollout and restarted
finishes with exactly one DGD per cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from tests.support import record_history_if_asked, running_worker, wait_until
from tests.workloads.conftest import as_, dgds
from tests.workloads.test_workload_journey import _until_stage


def _body(artifact: str, name: str, replicas: int = 2) -> dict:
    return {"artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": replicas,
            "name": name}


async def test_a_cluster_that_never_becomes_ready_gets_its_replicas_replaced(api, deps, temporal_client, clusters,
                                                                           approved_kimi):
    clusters.faults("sim-east").update({"never_ready": True})
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "drill-replace"), headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        live = await _until_stage(api, "drill-replace", {"serving", "failed"}, timeout=90)
        assert live["stage"] == "serving", live
        serving = {c["cluster"]: c["replicas"] for c in live["clusters"] if c["state"] == "serving"}
        assert serving == {"sim-west": 2}
        assert any("sim-east failed" in e and "ReadyDeadlineExceeded" in e for e in live["events"]), live["events"]
        # The failed cluster's DGD is removed while the workload serves on: it would hold GPUs.
        assert any("sim-east: the failed deployment was removed" in e for e in live["events"]), live["events"]
        assert set(dgds(clusters, "drill-replace")) == {"sim-west"}
        await record_history_if_asked(temporal_client, "workload/drill-replace", "workload_failed_cluster_removed")
        await api.delete("/v1/workloads/drill-replace", headers=as_("tok-olga"))
        await _until_stage(api, "drill-replace", {"deleted"}, timeout=60)
    assert dgds(clusters, "drill-replace") == {}


async def test_every_cluster_failing_rolls_back_to_no_dgd(api, deps, temporal_client, clusters, approved_kimi,
                                                          pg_pool):
    for name in ("sim-east", "sim-west"):
        clusters.faults(name).update({"crash_loop": True})
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "drill-rollback"), headers=as_("tok-olga"))
        assert r.status_code == 202
        handle = temporal_client.get_workflow_handle("workload/drill-rollback")
        try:
            await asyncio.wait_for(handle.result(), timeout=90)
            raise AssertionError("the workload should have failed")
        except TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - WorkflowFailureError carries the cause
            assert "could not be placed" in str(exc.cause) or "could not be placed" in str(exc)
    assert dgds(clusters, "drill-rollback") == {}
    assert await pg_pool.fetchval("select state from workloads where id = 'drill-rollback'") == "failed"
    assert await pg_pool.fetchval("select count(*) from deployments where workload_id = 'drill-rollback'") == 0


async def test_worker_killed_mid_rollout_finishes_with_one_dgd_per_cluster(api, deps, temporal_client, clusters,
                                                                          approved_kimi, pg_dsn, tmp_path):
    # A slow operator keeps the rollout in flight long enough to kill the worker in the middle of it.
    for name in clusters.names:
        clusters.cluster(name).operator.delay = 3.0
    s = deps.settings
    env = dict(os.environ, DATABASE_URL=pg_dsn, WINGSMITH_TASK_QUEUE=s.task_queue,
               WINGSMITH_KUBE_TASK_QUEUE=s.kube_task_queue, WINGSMITH_HF_ENDPOINT=s.hf_endpoint,
               WINGSMITH_HOME=str(tmp_path / "worker"), WINGSMITH_LOG_FORMAT="json",
               WINGSMITH_ROLLOUT_POLL_SECONDS="0.2", WINGSMITH_READY_DEADLINE_SECONDS="30",
               TEMPORAL_ADDRESS=temporal_client.service_client.config.target_host,
               TEMPORAL_NAMESPACE=temporal_client.namespace)

    def start_worker(n: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "worker"], env=env, stdout=subprocess.DEVNULL,
                                stderr=open(tmp_path / f"worker-{n}.log", "wb"))

    worker = start_worker(1)
    try:
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "drill-kill"), headers=as_("tok-olga"))
        assert r.status_code == 202

        async def applied():
            return bool(dgds(clusters, "drill-kill"))
        await wait_until(applied, timeout=60, what="the first DGD")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        await asyncio.sleep(1)
        worker = start_worker(2)
        live = await _until_stage(api, "drill-kill", {"serving", "failed"}, timeout=120)
        assert live["stage"] == "serving", live
        found = dgds(clusters, "drill-kill")
        serving = {c["cluster"] for c in live["clusters"] if c["state"] == "serving"}
        assert set(found) == serving and all(len(v) == 1 for v in found.values())
        await api.delete("/v1/workloads/drill-kill", headers=as_("tok-olga"))
        await _until_stage(api, "drill-kill", {"deleted"}, timeout=60)
        assert dgds(clusters, "drill-kill") == {}
    finally:
        for name in clusters.names:
            clusters.cluster(name).operator.delay = 0.2
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)


async def test_a_delete_the_cluster_refuses_is_retried_until_no_dgd_is_left(api, deps, temporal_client, clusters,
                                                                           approved_kimi):
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "drill-leftover", replicas=1),
                           headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        live = await _until_stage(api, "drill-leftover", {"serving"}, timeout=60)
        [cluster] = [c["cluster"] for c in live["clusters"]]
        # The plane loses its access to the clusters (tokens revoked) just before the delete.
        kubeconfig = clusters.kubeconfig_path
        good = kubeconfig.read_text()
        revoked = good
        for name in clusters.names:
            revoked = revoked.replace(clusters.cluster(name).token, "revoked-token")
        kubeconfig.write_text(revoked)
        try:
            assert (await api.delete("/v1/workloads/drill-leftover", headers=as_("tok-olga"))).status_code == 202

            async def left():
                got = (await api.get("/v1/workloads/drill-leftover", headers=as_("tok-vic"))).json()["live"]
                return got if any("deployments left" in e for e in got["events"]) else None
            live = await wait_until(left, timeout=30, what="the refused delete reported")
            assert live["stage"] == "deleting", live
            assert any("Unauthorized" in e for e in live["events"]), live["events"]
            assert set(dgds(clusters, "drill-leftover")) == {cluster}, "the DGD is still there, and said so"
        finally:
            kubeconfig.write_text(good)
        # Access restored: the next retry removes it, and only then is the workload deleted.
        await _until_stage(api, "drill-leftover", {"deleted"}, timeout=40)
        await record_history_if_asked(temporal_client, "workload/drill-leftover", "workload_delete_retried")
    assert dgds(clusters, "drill-leftover") == {}
