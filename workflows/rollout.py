"""ClusterRolloutWorkflow (`workload/<id>/cluster/<name>`): one rollout on one cluster.

apply → render the DynamoGraphDeployment and server-side apply it; wait until it serves (the Ready
condition and `successful` for the generation just applied; fails fast on crash loops); probe the
frontend's /v1/models until the served name appears; record the deployment. `delete` tears it down
(idempotent, waits until gone). Kubernetes calls run on the kube task queue.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from contracts import rollout as contract
from contracts.ids import CLUSTERS, STAGE, WORKLOAD
from contracts.rollout import (
    ACTIVITY_APPLY,
    ACTIVITY_DELETE,
    ACTIVITY_PROBE_FRONTEND,
    ACTIVITY_RECORD_DEPLOYMENT,
    ACTIVITY_WAIT_READY,
    ApplyInput,
    ApplyOutput,
    ClusterRolloutInput,
    ClusterRolloutResult,
    DeleteInput,
    DeploymentRecord,
    ProbeFrontendInput,
    ProbeFrontendOutput,
    WaitReadyInput,
)
from wingsmith.domain.dynamo import dgd_name
from workflows import policies


@workflow.defn(name=contract.WORKFLOW)
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
                await workflow.execute_activity(
                    ACTIVITY_DELETE, DeleteInput(kubeconfig=params.kubeconfig, name=name, namespace=params.namespace),
                    **policies.rollout_delete(params.kube_task_queue))
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
            applied = await workflow.execute_activity(
                ACTIVITY_APPLY, ApplyInput(kubeconfig=params.kubeconfig, spec=params.spec), result_type=ApplyOutput,
                **policies.rollout_apply(params.kube_task_queue))
            if not params.keep_routed:
                await self._record(params, name, "applied", replicas, {"generation": applied.generation})
            self.step = "waiting until ready"
            await workflow.execute_activity(
                ACTIVITY_WAIT_READY, WaitReadyInput(
                    kubeconfig=params.kubeconfig, name=name, namespace=params.namespace,
                    generation=applied.generation, weight_bytes=params.weight_bytes,
                    deadline_seconds=params.ready_deadline_seconds, poll_seconds=params.poll_seconds,
                    unschedulable_grace_seconds=params.unschedulable_grace_seconds),
                **policies.rollout_wait_ready(params.kube_task_queue))
            self.step = "probing the frontend"
            probe = await workflow.execute_activity(
                ACTIVITY_PROBE_FRONTEND, ProbeFrontendInput(
                    kubeconfig=params.kubeconfig, name=name, namespace=params.namespace,
                    served_model_name=params.spec.served_model_name, timeout_seconds=600,
                    poll_seconds=params.poll_seconds), result_type=ProbeFrontendOutput,
                **policies.rollout_probe(params.kube_task_queue))
        except ActivityError as err:
            kind, message = _kind_and_message(err)
            # A serving deployment that only scaled still serves its old count: its row stays `serving`
            # (a row that leaves it takes the endpoints' route away); its workload says what failed.
            if not params.keep_routed:
                await self._record(params, name, "failed", replicas, {"cause": f"{kind}: {message}"})
            raise ApplicationError(f"{params.cluster}: {kind}: {message}", type=kind, non_retryable=True) from None
        self.step = "serving"
        await self._record(params, name, "serving", replicas, {"generation": applied.generation}, probe.url)
        return ClusterRolloutResult(cluster=params.cluster, dgd_name=name, namespace=params.namespace, state="serving",
                                    replicas=replicas, generation=applied.generation, spec_hash=applied.spec_hash,
                                    frontend_url=probe.url)

    @workflow.query(name=contract.QUERY_PROGRESS)
    def progress(self) -> str:
        return self.step

    async def _record(self, params: ClusterRolloutInput, name: str, state: str, replicas: int,
                      detail: dict[str, Any] | None = None, frontend_url: str | None = None) -> None:
        info = workflow.info()
        await workflow.execute_local_activity(ACTIVITY_RECORD_DEPLOYMENT, DeploymentRecord(
            workload_id=params.workload_id, cluster=params.cluster, revision=params.revision, dgd_name=name,
            namespace=params.namespace, replicas=replicas, state=state, frontend_url=frontend_url, detail=detail or {},
            source=info.workflow_id, step=f"{info.run_id}:{state}"), **policies.REGISTRY)


def _kind_and_message(err: ActivityError) -> tuple[str, str]:
    """The activity's own error type and words, which the workload shows as the cluster's cause."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.type or "RolloutFailed", cause.message
    return "RolloutFailed", str(cause or err)
