"""Live inventory reads for a placement dry run happen in the worker, never in the API process: a
viewer's dry run starts a short LiveInventoryWorkflow whose reads run on the kube task queue, and a
plane without a worker says so at once instead of loading kubeconfigs itself."""

from __future__ import annotations

import os

from temporalio.client import WorkflowExecutionStatus

from tests.support import history_json, running_worker, save_history, wait_for_pollers
from tests.workloads.conftest import as_
from wingsmith.store.clusters import ClusterSpec, create_cluster, delete_cluster

PLAN = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}


async def test_without_a_worker_the_api_reads_no_cluster_itself(api, clusters):
    r = await api.post("/v1/placements/dry-run", json={"plan": PLAN}, headers=as_("tok-vic"))
    assert r.status_code == 200, r.text
    inventories = r.json()["inventories"]
    assert inventories and all("no worker is polling" in inv["error"] and not inv["pools"] for inv in inventories)


async def test_a_viewers_dry_run_reads_live_inventories_through_the_worker(api, deps, temporal_client, clusters,
                                                                         pg_pool):
    await create_cluster(pg_pool, ClusterSpec(name="gone", kubeconfig="/nonexistent/kubeconfig"))
    try:
        async with running_worker(temporal_client, deps):
            await wait_for_pollers(temporal_client, deps.settings)
            r = await api.post("/v1/placements/dry-run", json={"plan": PLAN}, headers=as_("tok-vic"))
    finally:
        await delete_cluster(pg_pool, "gone")
    assert r.status_code == 200, r.text
    live = {inv["cluster"]: inv for inv in r.json()["inventories"]}
    assert live["sim-east"]["error"] is None and live["sim-east"]["pools"][0]["hardware_id"] == "h200"
    assert "KubeconfigMissing" in live["gone"]["error"]  # the worker's own words for a cluster it cannot read
    assert r.json()["decision"]["placed"] == 1
    runs = [w async for w in temporal_client.list_workflows("WorkflowType = 'LiveInventoryWorkflow'")]
    assert runs and all(w.status == WorkflowExecutionStatus.COMPLETED for w in runs)
    if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
        save_history("live_inventory", runs[0].id, await history_json(temporal_client.get_workflow_handle(runs[0].id)))
