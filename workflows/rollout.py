"""ClusterRolloutWorkflow (`workload/<id>/cluster/<name>`): one rollout on one cluster.

apply → render the DynamoGraphDeployment and server-side apply it; wait until it serves (the Ready
condition and `successful` for the generation just applied; fails fast on crash loops); probe the
frontend's /v1/models until the served name appears; record the deployment. `delete` tears it down
(idempotent, waits until gone). Kubernetes calls run on the kube task queue.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from contracts.ids import CLUSTERS, STAGE, WORKLOAD
from contracts.rollout import FINAL_ERRORS, ClusterRolloutInput, ClusterRolloutResult

with workflow.unsafe.imports_passed_through():
    from activities.rollout import ApplyInput, DeleteInput, ProbeFrontendInput, RolloutActivities, WaitReadyInput
    from activities.workload import DeploymentRecord, WorkloadActivities
    from wingsmith.dynamo import dgd_name

_KUBE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                          non_retryable_error_types=FINAL_ERRORS)
# A worker that dies mid-activity is noticed when its heartbeats stop: long waits heartbeat every
# poll (2 s by default), so a short timeout lets another worker take over within seconds. 15 s made
# each worker crash cost a rollout (so a scale or a heal) 15 s plus the retry's backoff (chaos run).
_HEARTBEAT = timedelta(seconds=8)
# Registry writes take milliseconds: a worker that dies mid-write is written off after 10 s, and
# while Postgres restarts they retry every few seconds, not every half minute.
# Local activities: they run inside the workflow task on the worker that holds the workflow, with no
# round trip through the server to dispatch them or to report back (on the dev server each such trip
# is tens of milliseconds); the result is still recorded (a marker), retried and idempotent.
_DB = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5)))


@workflow.defn
class ClusterRolloutWorkflow:
    def __init__(self) -> None:
        self.step = "starting"

    @workflow.run
    async def run(self, params: ClusterRolloutInput) -> ClusterRolloutResult:
        name = dgd_name(params.workload_id, params.cluster, params.revision)
        # Its own attributes, so a rollout started from user code is found like one its workload started.
        workflow.upsert_search_attributes([WORKLOAD.value_set(params.workload_id),
                                           CLUSTERS.value_set([params.cluster]), STAGE.value_set("rollout")])
        if params.mode == "delete":
            self.step = "deleting"
            try:
                await workflow.execute_activity_method(
                    RolloutActivities.delete,
                    DeleteInput(kubeconfig=params.kubeconfig, name=name, namespace=params.namespace),
                    **_kube(params, timedelta(minutes=20), heartbeat=True))
            except ActivityError as err:
                kind, message = _kind_and_message(err)
                raise ApplicationError(f"{params.cluster}: {kind}: {message}", type=kind, non_retryable=True) from None
            await self._record(params, name, "deleted", 0)
            return ClusterRolloutResult(cluster=params.cluster, dgd_name=name, namespace=params.namespace,
                                        state="deleted")

        assert params.spec is not None
        replicas = params.spec.worker.replicas
        try:
            self.step = "applying"
            applied = await workflow.execute_activity_method(
                RolloutActivities.apply, ApplyInput(kubeconfig=params.kubeconfig, spec=params.spec),
                # One server-side apply (and the adapter's few retries): seconds. It does not heartbeat,
                # so this is how long a killed worker holds it; the apply is idempotent and retried.
                **_kube(params, timedelta(seconds=20), heartbeat=False))
            await self._record(params, name, "applied", replicas, {"generation": applied.generation})
            self.step = "waiting until ready"
            await workflow.execute_activity_method(
                RolloutActivities.wait_ready, WaitReadyInput(
                    kubeconfig=params.kubeconfig, name=name, namespace=params.namespace,
                    generation=applied.generation, weight_bytes=params.weight_bytes,
                    deadline_seconds=params.ready_deadline_seconds, poll_seconds=params.poll_seconds,
                    unschedulable_grace_seconds=params.unschedulable_grace_seconds),
                **_kube(params, timedelta(hours=7), heartbeat=True))
            self.step = "probing the frontend"
            probe = await workflow.execute_activity_method(
                RolloutActivities.probe_frontend, ProbeFrontendInput(
                    kubeconfig=params.kubeconfig, name=name, namespace=params.namespace,
                    served_model_name=params.spec.served_model_name, timeout_seconds=600,
                    poll_seconds=params.poll_seconds),
                **_kube(params, timedelta(minutes=12), heartbeat=True))
        except ActivityError as err:
            kind, message = _kind_and_message(err)
            await self._record(params, name, "failed", replicas, {"cause": f"{kind}: {message}"})
            raise ApplicationError(f"{params.cluster}: {kind}: {message}", type=kind, non_retryable=True) from None
        self.step = "serving"
        await self._record(params, name, "serving", replicas, {"generation": applied.generation}, probe.url)
        return ClusterRolloutResult(cluster=params.cluster, dgd_name=name, namespace=params.namespace, state="serving",
                                    replicas=replicas, generation=applied.generation, spec_hash=applied.spec_hash,
                                    frontend_url=probe.url)

    @workflow.query
    def progress(self) -> str:
        return self.step

    async def _record(self, params: ClusterRolloutInput, name: str, state: str, replicas: int,
                      detail: dict[str, Any] | None = None, frontend_url: str | None = None) -> None:
        info = workflow.info()
        await workflow.execute_local_activity_method(WorkloadActivities.record_deployment, DeploymentRecord(
            workload_id=params.workload_id, cluster=params.cluster, revision=params.revision, dgd_name=name,
            namespace=params.namespace, replicas=replicas, state=state, frontend_url=frontend_url, detail=detail or {},
            source=info.workflow_id, step=f"{info.run_id}:{state}"), **_DB)


def _kube(params: ClusterRolloutInput, timeout: timedelta, *, heartbeat: bool) -> workflow.ActivityConfig:
    """Kubernetes calls: on the kube task queue, retried unless final; long waits heartbeat."""
    config = workflow.ActivityConfig(task_queue=params.kube_task_queue, retry_policy=_KUBE_RETRY,
                                     start_to_close_timeout=timeout)
    if heartbeat:
        config["heartbeat_timeout"] = _HEARTBEAT
    return config


def _kind_and_message(err: ActivityError) -> tuple[str, str]:
    """The activity's own error type and words, which the workload shows as the cluster's cause."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.type or "RolloutFailed", cause.message
    return "RolloutFailed", str(cause or err)
