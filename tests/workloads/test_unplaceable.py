"""A workload no cluster can take fails with every cluster's reason in its failure, where the CLI,
the console and the Temporal UI show it."""

from __future__ import annotations

from tests.support import running_worker
from tests.workloads.conftest import as_, dgds
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.cli.workloads import show_text


async def test_an_unplaceable_workload_says_why_for_each_cluster(api, deps, temporal_client, clusters, approved_kimi):
    body = {"artifact_id": approved_kimi, "hardware": "b300", "layout": "single_node_tp", "replicas": 1,
            "name": "nowhere"}
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        live = await _until_stage(api, "nowhere", {"serving", "failed"}, timeout=60)
        # `wingsmith workloads show` renders the API's answer: the failure row carries the reasons.
        shown = show_text((await api.get("/v1/workloads/nowhere", headers=as_("tok-olga"))).json())
    assert live["stage"] == "failed", live
    assert "sim-west: filtered out by hardware: no b300 nodes (has: h200)" in shown.split("failure", 1)[1], shown
    for cluster in ("sim-east", "sim-west"):
        assert f"{cluster}: filtered out by hardware: no b300 nodes (has: h200)" in live["failure"], live["failure"]
    handle = temporal_client.get_workflow_handle("workload/nowhere")
    try:
        await handle.result()
        raise AssertionError("the workload should have failed")
    except Exception as exc:  # noqa: BLE001 - WorkflowFailureError carries the cause
        assert "no b300 nodes (has: h200)" in str(exc.cause)
    assert dgds(clusters, "nowhere") == {}

