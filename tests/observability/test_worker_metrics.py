"""The worker's scrape port: the Temporal SDK's own runtime metrics (its Rust exporter, passed
through) next to the plane's `wingsmith_*` families, from a real worker running a real workflow; and
the domain counters' mapping from the activities that record the events."""

from __future__ import annotations

import uuid

from activities.workload import DeploymentRecord, HealRecord
from contracts.ping import PingWorkflowInput
from tests.observability.scrape import WORKER_FAMILIES, scrape, total
from tests.support import running_worker
from wingsmith.adapters import metrics
from wingsmith.adapters.temporal import connect
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port
from worker.metrics import count, metrics_runtime, serve_metrics
from worker.registry import WorkerDeps
from workflows.ping import PingWorkflow

# The SDK families the dashboard's worker-health row reads (deploy/grafana/dashboards/wingsmith.json).
SDK_FAMILIES = {"temporal_workflow_completed", "temporal_workflow_task_schedule_to_start_latency_seconds",
                "temporal_activity_schedule_to_start_latency_seconds", "temporal_activity_execution_latency_seconds",
                "temporal_worker_task_slots_available", "temporal_request"}


async def test_one_port_serves_sdk_and_plane_metrics(temporal_server, temporal_client):
    settings = Settings(worker_metrics_port=free_port(), temporal_namespace=temporal_client.namespace)
    runtime, sdk_url = metrics_runtime(settings)
    server = serve_metrics(settings, sdk_url)
    try:
        client = await connect(settings, address=temporal_server.address, runtime=runtime)
        async with running_worker(client, WorkerDeps(settings=settings)) as queue:
            await client.execute_workflow(PingWorkflow.run, PingWorkflowInput(), id=f"ping-{uuid.uuid4().hex[:8]}",
                                          task_queue=queue)
        families = scrape(f"http://127.0.0.1:{settings.worker_metrics_port}/metrics")
    finally:
        server.shutdown()
    assert WORKER_FAMILIES <= set(families), sorted(families)
    assert total(families["wingsmith_worker_sdk_metrics_up"], "wingsmith_worker_sdk_metrics_up") == 1
    assert SDK_FAMILIES <= set(families), sorted(f for f in families if f.startswith("temporal_"))
    assert total(families["temporal_workflow_completed"], "temporal_workflow_completed_total",
                 workflow_type="PingWorkflow") >= 1


async def test_a_failed_rollout_counts_its_cause_and_its_replicas_to_re_place():
    before_failed = metrics.ROLLOUTS_FAILED.labels("Unschedulable")._value.get()
    before_replaced = metrics.REPLACEMENTS._value.get()
    record = DeploymentRecord(workload_id="w", cluster="c", dgd_name="d", namespace="n", replicas=2, state="failed",
                              detail={"cause": "Unschedulable: 0/4 nodes are available"}, source="s", step="r:failed")
    await count("workload.record_deployment", record, None)
    assert metrics.ROLLOUTS_FAILED.labels("Unschedulable")._value.get() == before_failed + 1
    assert metrics.REPLACEMENTS._value.get() == before_replaced + 2


async def test_a_heal_counts_by_what_was_wrong():
    before = metrics.HEALS.labels("DeploymentMissing")._value.get()
    record = HealRecord(workload_id="w", workflow_id="workload/w", step="heal:1", cluster="c", action="reapply",
                        problem="DeploymentMissing", cause="deployment missing", seconds=4.2, outcome="serving again")
    await count("workload.record_heal", record, None)
    assert metrics.HEALS.labels("DeploymentMissing")._value.get() == before + 1


def test_labels_stay_bounded():
    assert metrics.cause_label("RolloutFailed: pods crash-looping") == "RolloutFailed"
    assert metrics.cause_label("a message, not a type: 42") == "other"
    assert metrics.cause_label(None) == "other"
    assert metrics.decision_label("approve") == "approved" and metrics.decision_label("made-up") == "other"
