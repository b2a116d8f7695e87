"""Start and drive Wingsmith workflows from Python (the samples' `starter.py`): the API, the CLI and
your own programs use the same functions, so a retried request starts nothing twice (USE_EXISTING
on the deterministic id). Workflows are started and reached by their type and handler names from
contracts/, never by importing their classes: the API process loads no workflow, no activity and no
`kubernetes` client (tests/test_layers.py checks it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from contracts import artifact as artifact_contract
from contracts import autoscaler as autoscaler_contract
from contracts import endpoint as endpoint_contract
from contracts import workload as workload_contract
from contracts.artifact import ArtifactOutcome, ArtifactStatus, ArtifactWorkflowInput, ReviewPolicy, artifact_id
from contracts.autoscaler import AutoscalerInput, AutoscalerStatus
from contracts.endpoint import EndpointStatus, EndpointWorkflowInput
from contracts.ids import (
    WORKLOAD,
    artifact_workflow_id,
    artifact_workflow_id_of,
    autoscaler_workflow_id,
    endpoint_workflow_id,
    workload_workflow_id,
)
from contracts.workload import WatchSettings, WorkloadStatus, WorkloadWorkflowInput
from wingsmith.domain.config import Settings
from wingsmith.domain.hub.source import ModelSource, parse_source
from wingsmith.domain.teams import DEFAULT_TEAM
from wingsmith.domain.workloads import WorkloadPlan


class StartedArtifact(BaseModel):
    id: str
    workflow_id: str
    repo_id: str
    revision: str
    sha: str
    started: bool  # False: it already existed (a repeated register)


def review_policy(settings: Settings) -> ReviewPolicy:
    return ReviewPolicy(deadline_seconds=settings.review_deadline_seconds, four_eyes=settings.review_four_eyes,
                        signal_decisions=settings.review_signal_decisions)


async def register_artifact(client: Client, settings: Settings, *, source: str | ModelSource, sha: str,
                            requested_by: str, task_queue: str | None = None,
                            policy: ReviewPolicy | None = None, team: str = DEFAULT_TEAM) -> StartedArtifact:
    """Start the artifact's workflow for a source already resolved to `sha`. Starting it again while
    it runs, or after it ended with a decision, returns the same artifact; a failed one may restart."""
    src = parse_source(source) if isinstance(source, str) else source
    params = ArtifactWorkflowInput(repo_id=src.repo_id, revision=src.revision, sha=sha, requested_by=requested_by,
                                   team=team, policy=policy or review_policy(settings),
                                   kube_task_queue=settings.kube_task_queue)
    wf_id = artifact_workflow_id(src.repo_id, sha)
    started = not await _exists(client, wf_id)
    if started:
        try:
            await client.start_workflow(
                artifact_contract.WORKFLOW, params, id=wf_id, task_queue=task_queue or settings.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                search_attributes=artifact_contract.start_search_attributes(params),
                static_summary=f"Review {src.repo_id}@{sha[:12]}",
                static_details=(f"Draft for {src.repo_id} at {sha} (asked as {src.revision}), "
                                f"requested by {requested_by}."))
        except WorkflowAlreadyStartedError:  # decided already: the artifact exists as it was
            started = False
    return StartedArtifact(id=artifact_id(src.repo_id, sha), workflow_id=wf_id, repo_id=src.repo_id,
                           revision=src.revision, sha=sha, started=started)


async def _exists(client: Client, workflow_id: str) -> bool:
    """Whether this artifact already has a workflow that counts (running, or ended other than failed)."""
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return desc.status not in (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TERMINATED,
                               WorkflowExecutionStatus.TIMED_OUT, WorkflowExecutionStatus.CANCELED)


def artifact_handle(client: Client, artifact: str) -> WorkflowHandle[Any, ArtifactOutcome]:
    return client.get_workflow_handle(artifact_workflow_id_of(artifact), result_type=ArtifactOutcome)


async def artifact_status(client: Client, artifact: str, wait: timedelta | None = None) -> ArtifactStatus:
    """The artifact workflow's own status; `wait` bounds how long a query no worker answers is held (the
    server holds it until its own deadline, tens of seconds)."""
    return await artifact_handle(client, artifact).query(artifact_contract.QUERY_STATUS, result_type=ArtifactStatus,
                                                         rpc_timeout=wait)


DRAIN_ANSWER_MARGIN_SECONDS = 60


async def create_workload(client: Client, settings: Settings, *, plan: WorkloadPlan, requested_by: str,
                          repo_id: str, team: str = DEFAULT_TEAM) -> WorkflowHandle[Any, WorkloadStatus]:
    """Start the workload's workflow, owned by `team`; repeating it with the same workload id returns the
    running one."""
    params = WorkloadWorkflowInput(plan=plan, requested_by=requested_by, team=team,
                                   kube_task_queue=settings.kube_task_queue,
                                   ready_deadline_seconds=settings.ready_deadline_seconds,
                                   poll_seconds=settings.rollout_poll_seconds,
                                   unschedulable_grace_seconds=settings.unschedulable_grace_seconds,
                                   # Each endpoint drains for up to the grace and then says so; the margin
                                   # covers its reconcile pass, so a slow endpoint is waited for, a gone one not.
                                   drain_grace_seconds=settings.drain_grace_seconds + DRAIN_ANSWER_MARGIN_SECONDS,
                                   watch=WatchSettings(status_seconds=settings.watch_status_seconds,
                                                       probe_seconds=settings.watch_probe_seconds,
                                                       report_seconds=settings.watch_report_seconds,
                                                       grace_seconds=settings.drift_grace_seconds,
                                                       looks_per_run=settings.watch_looks_per_run))
    return await client.start_workflow(
        workload_contract.WORKFLOW, params, id=workload_workflow_id(plan.workload_id), task_queue=settings.task_queue,
        result_type=WorkloadStatus,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        search_attributes=workload_contract.start_search_attributes(params),
        static_summary=f"{plan.workload_id}: {repo_id} on {plan.replicas} × {plan.hardware} {plan.layout}",
        static_details=(f"{plan.served_model_name} from {plan.artifact_id} (draft v{plan.draft_version}), "
                        f"{plan.gpus_per_replica} GPUs per replica, "
                        f"--max-num-seqs {plan.max_num_seqs or 'engine default'}"
                        f" ({plan.max_num_seqs_source}), requested by {requested_by} (team {team})."))


def workload_handle(client: Client, workload_id: str) -> WorkflowHandle[Any, WorkloadStatus]:
    return client.get_workflow_handle(workload_workflow_id(workload_id), result_type=WorkloadStatus)


async def workload_status(client: Client, workload_id: str) -> WorkloadStatus:
    return await workload_handle(client, workload_id).query(workload_contract.QUERY_STATUS, result_type=WorkloadStatus)


class StartedEndpoint(BaseModel):
    workflow_id: str
    started: bool  # False: the endpoint already ran; `routed` says which workloads it keeps
    routed: list[str]
    stage: str = "starting"
    team: str = DEFAULT_TEAM  # the team that owns it (another team's when the name is taken)


async def create_endpoint(client: Client, settings: Settings, *, name: str, workloads: list[str],
                          requested_by: str = "unknown", team: str = DEFAULT_TEAM,
                          model: str | None = None) -> StartedEndpoint:
    """Start the endpoint's workflow, owned by `team`: one model name routed to its workloads' deployments.
    If it already runs, nothing starts and its current workloads and team are returned, so a caller can
    tell a repeated create (same workloads) from a change (which goes through `set_workloads`) and from
    a name another team holds."""
    wf_id = endpoint_workflow_id(name)
    try:
        await client.start_workflow(
            endpoint_contract.WORKFLOW, EndpointWorkflowInput(name=name, workloads=workloads, model=model,
                                                        requested_by=requested_by, team=team,
                                                        drain_grace_seconds=settings.drain_grace_seconds),
            id=wf_id, task_queue=settings.task_queue, id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            static_summary=f"Endpoint {name} → {', '.join(workloads)}",
            static_details=f"Requested by {requested_by} (team {team}).")
    except WorkflowAlreadyStartedError:
        status = await endpoint_status(client, name)
        return StartedEndpoint(workflow_id=wf_id, started=False,
                               routed=[w for w in status.workloads if w not in status.draining], stage=status.stage,
                               team=status.team)
    return StartedEndpoint(workflow_id=wf_id, started=True, routed=list(dict.fromkeys(workloads)), team=team)


def endpoint_handle(client: Client, name: str) -> WorkflowHandle[Any, EndpointStatus]:
    return client.get_workflow_handle(endpoint_workflow_id(name), result_type=EndpointStatus)


async def endpoint_status(client: Client, name: str) -> EndpointStatus:
    return await endpoint_handle(client, name).query(endpoint_contract.QUERY_STATUS, result_type=EndpointStatus)


async def start_autoscaler(client: Client, settings: Settings, *, workload_id: str,
                           team: str = DEFAULT_TEAM) -> WorkflowHandle[Any, AutoscalerStatus]:
    """Start the workload's autoscaling loop; while one runs, that one (it reads the policy every period, so a
    changed policy needs no restart). It ends by itself once the policy is removed or the workload is gone."""
    params = AutoscalerInput(workload_id=workload_id, team=team, period_seconds=settings.autoscaler_period_seconds,
                             approval_timeout_seconds=settings.autoscaler_approval_seconds)
    return await client.start_workflow(
        autoscaler_contract.WORKFLOW, params, id=autoscaler_workflow_id(workload_id), task_queue=settings.task_queue,
        result_type=AutoscalerStatus, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(WORKLOAD, workload_id)]),
        static_summary=f"Autoscaler of {workload_id}",
        static_details=f"Holds workload {workload_id} (team {team}) to its autoscaling policy; decisions in "
                       f"GET /v1/workloads/{workload_id}/autoscaling.")


def autoscaler_handle(client: Client, workload_id: str) -> WorkflowHandle[Any, AutoscalerStatus]:
    return client.get_workflow_handle(autoscaler_workflow_id(workload_id), result_type=AutoscalerStatus)
