"""Live inventory reads for a placement dry run happen in the worker, never in the API process: a
viewer's dry run starts a short LiveInventoryWorkflow whose reads run on the kube task queue, and a
plane without a worker says so at once instead of loading kubeconfigs itself."""

from __future__ import annotations

import asyncio
import os

from temporalio.client import WorkflowExecutionStatus

from api.services.inventories import LIVE_CACHE_SECONDS
from contracts.inventory import live_inventory_workflow_id
from tests.support import history_json, running_worker, save_history, wait_for_pollers, wait_until
from tests.workloads.conftest import as_
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster, delete_cluster

PLAN = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}


async def test_without_a_worker_the_api_reads_no_cluster_itself(api, clusters):
    r = await api.post("/v1/placements/dry-run", json={"plan": PLAN}, headers=as_("tok-vic"))
    assert r.status_code == 200, r.text
    inventories = r.json()["inventories"]
    assert inventories and all("no worker is polling" in inv["error"] and not inv["pools"] for inv in inventories)


async def test_a_viewers_dry_run_reads_live_inventories_through_the_worker(api, deps, temporal_client, clusters,
                                                                         pg_pool, tmp_path):
    await create_cluster(pg_pool, ClusterSpec(name="gone", kubeconfig=str(tmp_path / "absent")))
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
    # Issue 34: a run says in the Temporal UI what it read, by its id, summary and details.
    read = sorted(live)
    [mine] = [w for w in runs if w.id.startswith(live_inventory_workflow_id(read, ""))]
    assert all(name in mine.id for name in read[:2]), mine.id  # readable: it names what it read
    described = await temporal_client.get_workflow_handle(mine.id).describe()
    summary, details = await described.static_summary(), await described.static_details()
    assert summary and all(name in summary for name in read[:2]) and "placement dry run" in summary
    assert details and all(f"- {name}" in details for name in read)
    if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
        save_history("live_inventory", runs[0].id, await history_json(temporal_client.get_workflow_handle(runs[0].id)))


async def test_dry_runs_reuse_a_recent_read_and_bound_the_reads_at_once(api, deps, temporal_client, clusters):
    """Issue 31: a viewer could start LiveInventoryWorkflows without bound through dry runs."""
    async def started() -> int:
        return len([w async for w in temporal_client.list_workflows("WorkflowType = 'LiveInventoryWorkflow'")])
    initial = await started()
    async with running_worker(temporal_client, deps):
        await wait_for_pollers(temporal_client, deps.settings)
        # Slow clusters keep three reads of three clusters under way at once: one too many.
        for name in clusters.names:
            clusters.faults(name).latency = 1.0
        try:
            answers = await asyncio.gather(*(api.post(
                "/v1/placements/dry-run", json={"plan": PLAN, "clusters": [name]}, headers=as_("tok-vic"))
                for name in clusters.names))
        finally:
            for name in clusters.names:
                clusters.faults(name).latency = 0.0
        limited = [r for r in answers if r.status_code == 429]
        assert len(limited) == 1 and all(r.status_code == 200 for r in answers if r not in limited), answers
        assert limited[0].json()["error"]["code"] == "rate_limited" and int(limited[0].headers["Retry-After"]) >= 1

        await asyncio.sleep(LIVE_CACHE_SECONDS)  # what those reads left behind is too old now
        await wait_until(lambda: _more(started, initial + 1), what="the two live reads in visibility")
        before = await started()
        first, second = [await api.post("/v1/placements/dry-run", json={"plan": PLAN}, headers=as_("tok-vic"))
                         for _ in range(2)]
    assert first.status_code == second.status_code == 200
    assert first.json()["inventories"] == second.json()["inventories"]
    await wait_until(lambda: _more(started, before), what="the first dry run's live read")
    await asyncio.sleep(0.5)
    assert await started() == before + 1, "the second dry run read the clusters again"


async def _more(count, than: int) -> bool:
    return await count() > than
