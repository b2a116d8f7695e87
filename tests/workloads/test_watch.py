"""Serving is watched: a serving workload notices what happens to its deployments outside the plane
and heals it. Real Temporal, real Postgres, the real kubernetes client against the simulated
clusters; the watch looks every half second so the test takes seconds, not minutes."""

from __future__ import annotations

import os
import time

import pytest
from kubernetes import client

from tests.support import history_json, running_worker, save_history, wait_until
from tests.workloads.conftest import as_, dgds
from tests.workloads.test_workload_journey import _status, _until_stage
from wingsmith.dynamo import GROUP, PLURAL, VERSION


@pytest.fixture
def settings(settings):  # noqa: F811 - the workload test bed, watching fast
    return settings.model_copy(update={"watch_status_seconds": 0.5, "watch_probe_seconds": 1.0,
                                       "drift_grace_seconds": 4.0})


def _body(artifact: str, name: str, **extra) -> dict:
    return {"artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1, "name": name,
            **extra}


def _custom(sims, cluster: str) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(sims.api_client(cluster))


async def _serving_on(api, workload_id: str) -> tuple[str, dict]:
    live = await _until_stage(api, workload_id, {"serving", "failed"}, timeout=90)
    assert live["stage"] == "serving", live
    [cluster] = [c for c in live["clusters"] if c["state"] == "serving"]
    return cluster["cluster"], cluster


async def test_a_dgd_deleted_out_of_band_comes_back_and_not_serving_shows_meanwhile(
        api, deps, temporal_client, clusters, approved_kimi, pg_pool):
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "watch-delete"), headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        cluster, before = await _serving_on(api, "watch-delete")
        [dgd] = dgds(clusters, "watch-delete")[cluster]
        uid = dgd["metadata"]["uid"]

        _custom(clusters, cluster).delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                                                   dgd["metadata"]["name"])
        deleted_at = time.monotonic()
        # Not serving, observed: the workload, its cluster and the registry all say so (never "serving
        # over nothing") until the deployment is back.
        live = await _until_stage(api, "watch-delete", {"degraded"}, timeout=20)
        assert any(c["cluster"] == cluster and c["state"] in ("degraded", "rolling_out") for c in live["clusters"])
        noticed = await wait_until(lambda: _registry_says(pg_pool, "watch-delete", "degraded"), timeout=10,
                                   what="the registry to say degraded")
        assert "deployment missing" in str(noticed)

        live = await _until_stage(api, "watch-delete", {"serving"}, timeout=60)
        healed_in = time.monotonic() - deleted_at
        assert healed_in < 60
        [again] = dgds(clusters, "watch-delete")[cluster]
        assert again["metadata"]["uid"] != uid  # a new object, applied by the plane
        assert [c["state"] for c in live["clusters"]] == ["serving"]
        assert any(f"healed {cluster} (reapply: deployment missing)" in e for e in live["events"]), live["events"]
        heal = await pg_pool.fetchrow("select detail from events where subject = 'watch-delete' "
                                      "and kind = 'workload_healed'")
        assert heal is not None and heal["detail"]["cause"] == "deployment missing"
        assert heal["detail"]["cluster"] == cluster and 0 < heal["detail"]["seconds"] < 60
        assert await pg_pool.fetchval("select state from workloads where id = 'watch-delete'") == "serving"
        assert await pg_pool.fetchval("select state from deployments where workload_id = 'watch-delete'") \
            == "serving"
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            handle = temporal_client.get_workflow_handle("workload/watch-delete")
            save_history("workload_healed_missing_dgd", handle.id, await history_json(handle))
        await api.delete("/v1/workloads/watch-delete", headers=as_("tok-olga"))
        await _until_stage(api, "watch-delete", {"deleted"}, timeout=60)
    assert dgds(clusters, "watch-delete") == {}


async def _registry_says(pg_pool, workload_id: str, state: str):
    row = await pg_pool.fetchrow("select w.state, d.state as dstate, d.detail from workloads w join deployments d "
                                 "on d.workload_id = w.id where w.id = $1", workload_id)
    return row["detail"] if row and row["state"] == state and row["dstate"] == state else None


async def test_an_edited_spec_is_put_back_or_only_reported(api, deps, temporal_client, clusters, approved_kimi):
    async with running_worker(temporal_client, deps):
        for name, policy in (("watch-heal", "heal"), ("watch-report", "report")):
            r = await api.post("/v1/workloads", json=_body(approved_kimi, name, drift=policy), headers=as_("tok-olga"))
            assert r.status_code == 202, r.text
        for name, policy in (("watch-heal", "heal"), ("watch-report", "report")):
            cluster, _ = await _serving_on(api, name)
            [dgd] = dgds(clusters, name)[cluster]
            custom = _custom(clusters, cluster)
            spec = dgd["spec"]
            spec["components"][1]["replicas"] = 2  # scaled by hand, outside the plane
            custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, dgd["metadata"]["name"],
                                                  {"spec": {"components": spec["components"]}})

            def replicas_now() -> int:
                return custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                                           dgd["metadata"]["name"])["spec"]["components"][1]["replicas"]
            if policy == "heal":
                async def put_back():
                    live = (await _status(api, name)).get("live") or {}
                    return replicas_now() == 1 and live.get("stage") == "serving" and any(
                        "spec edited outside the plane" in e and "healed" in e for e in live["events"])
                await wait_until(put_back, timeout=60, what="the edit to be put back")
            else:
                async def reported():
                    live = (await _status(api, name)).get("live") or {}
                    return any(c.get("drift") for c in live.get("clusters", []))
                await wait_until(reported, timeout=30, what="the edit to be reported")
                assert replicas_now() == 2  # left alone
        for name in ("watch-heal", "watch-report"):
            await api.delete(f"/v1/workloads/{name}", headers=as_("tok-olga"))
            await _until_stage(api, name, {"deleted"}, timeout=60)


async def test_an_unreachable_cluster_past_the_grace_is_replaced_and_cleaned_when_it_returns(
        api, deps, temporal_client, clusters, approved_kimi):
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=_body(approved_kimi, "watch-lost"), headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        lost, _ = await _serving_on(api, "watch-lost")
        clusters.faults(lost).update({"unreachable": True})
        live = await _until_stage(api, "watch-lost", {"degraded"}, timeout=20)
        assert any("cluster unreachable" in (c.get("error") or "") for c in live["clusters"]), live

        async def moved():
            live = (await _status(api, "watch-lost")).get("live") or {}
            serving = [c["cluster"] for c in live.get("clusters", []) if c["state"] == "serving"]
            return live if live.get("stage") == "serving" and serving and lost not in serving else None
        live = await wait_until(moved, timeout=90, what="the replica to move to another cluster")
        assert any(f"healed {lost} (replace" in e for e in live["events"]), live["events"]
        # The old deployment is still on the partitioned cluster: two exist until it answers again.
        assert len(dgds(clusters, "watch-lost")) == 2
        clusters.faults(lost).update({"unreachable": False})
        await wait_until(lambda: _only_elsewhere(clusters, lost), timeout=60, what="the old deployment removed")
        live = (await _status(api, "watch-lost"))["live"]
        assert live["stage"] == "serving" and any(f"{lost} answers again" in e for e in live["events"])
        await api.delete("/v1/workloads/watch-lost", headers=as_("tok-olga"))
        await _until_stage(api, "watch-lost", {"deleted"}, timeout=60)
    assert dgds(clusters, "watch-lost") == {}


async def _only_elsewhere(clusters, lost: str) -> bool:
    found = dgds(clusters, "watch-lost")
    return lost not in found and sum(len(v) for v in found.values()) == 1
