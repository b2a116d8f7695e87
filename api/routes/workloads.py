"""Workloads: create (validated against the approved draft; a dry run writes nothing), list, read,
scale and delete. The workload workflow does the work; these routes start it and talk to it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Operator, Viewer
from api.deps import DbDep, SettingsDep, TemporalDep
from api.errors import ApiError
from api.routes.clusters import DryRunRequest, dry_run
from wingsmith.dynamo import render_dgd
from wingsmith.recipes import load_catalog
from wingsmith.store import workloads as store
from wingsmith.temporal import workflow_ui_url
from wingsmith.workload_state import DeleteRequest, ScaleRequest, WorkloadStatus
from wingsmith.workloads import (
    InvalidWorkload,
    WorkloadPlan,
    WorkloadRequest,
    approved_artifact_from_row,
    plan_workload,
)
from workflows.ids import workload_workflow_id
from workflows.starter import create_workload, workload_handle
from workflows.workload import WorkloadWorkflow

router = APIRouter(prefix="/v1/workloads", tags=["workloads"])


class Created(BaseModel):
    id: str
    workflow_id: str
    workflow_url: str
    plan: WorkloadPlan


class DryRun(BaseModel):
    dry_run: bool = True
    plan: WorkloadPlan
    placement: dict[str, Any]
    manifests: dict[str, dict[str, Any]] = Field(description="cluster → the DynamoGraphDeployment it would get")


class ScaleBody(BaseModel):
    replicas: int = Field(ge=1, le=256)


@router.post("", status_code=202, response_model=Created | DryRun, summary="Create a workload (or dry-run it)")
async def create(body: WorkloadRequest, principal: Operator, db: DbDep, settings: SettingsDep,
                 request: Request) -> Created | DryRun:
    row = await store.approved_artifact(db, body.artifact_id)
    artifact = approved_artifact_from_row(row) if row is not None else None
    try:
        if artifact is None:
            raise InvalidWorkload(f"artifact {body.artifact_id} not found; register it first", field="artifact_id")
        plan = plan_workload(body, artifact, load_catalog(), image=settings.vllm_runtime_image,
                             namespace=settings.deploy_namespace, hf_token_secret=settings.hf_token_secret)
    except InvalidWorkload as exc:
        raise ApiError(422, str(exc), code="invalid_workload",
                       details={"field": exc.field, **exc.details}) from None
    if body.dry_run:
        placed = await dry_run(DryRunRequest(plan=plan.placement), db, principal, request, settings)
        manifests = {cluster: render_dgd(plan.rollout_spec(cluster, n))
                     for cluster, n in placed.decision.replicas.items()}
        return DryRun(plan=plan, placement=placed.decision.model_dump(mode="json"), manifests=manifests)
    temporal = _temporal(request)
    handle = await create_workload(temporal, settings, plan=plan, requested_by=principal.name,
                                   repo_id=artifact.repo_id)
    return Created(id=plan.workload_id, workflow_id=handle.id, workflow_url=workflow_ui_url(settings, handle.id),
                   plan=plan)


@router.get("", summary="List workloads")
async def list_workloads(_viewer: Viewer, db: DbDep, limit: int = Query(200, ge=1, le=1000)):
    return {"workloads": await store.list_workloads(db, limit=limit)}


@router.get("/{workload_id}", summary="A workload: per-cluster state, DGD names, frontend URLs, events")
async def get_workload(workload_id: str, _viewer: Viewer, db: DbDep, settings: SettingsDep,
                       request: Request) -> dict[str, Any]:
    row = await store.get_workload(db, workload_id)
    live = None
    temporal = getattr(request.app.state, "temporal", None)
    if temporal is not None:
        try:
            live = await workload_handle(temporal, workload_id).query(WorkloadWorkflow.status)
        except (RPCError, Exception):  # noqa: BLE001 - the registry row still answers
            live = None
    if row is None and live is None:
        raise ApiError(404, f"workload {workload_id} not found")
    out = row or {"id": workload_id}
    out["workflow_id"] = workload_workflow_id(workload_id)
    out["workflow_url"] = workflow_ui_url(settings, out["workflow_id"])
    out["live"] = live.model_dump(mode="json") if live else None
    return out


@router.patch("/{workload_id}", response_model=WorkloadStatus, summary="Scale a workload")
async def scale(workload_id: str, body: ScaleBody, principal: Operator, temporal: TemporalDep) -> WorkloadStatus:
    handle = workload_handle(temporal, workload_id)
    try:
        return await handle.execute_update(WorkloadWorkflow.scale,
                                           ScaleRequest(replicas=body.replicas, requested_by=principal.name))
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _update_error(err, workload_id) from None


@router.delete("/{workload_id}", status_code=202, summary="Delete a workload (drains endpoints, then tears down)")
async def delete(workload_id: str, principal: Operator, temporal: TemporalDep) -> dict[str, Any]:
    handle = workload_handle(temporal, workload_id)
    try:
        await handle.start_update(WorkloadWorkflow.delete, DeleteRequest(requested_by=principal.name),
                                  wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    except (WorkflowUpdateFailedError, RPCError) as err:
        raise _update_error(err, workload_id) from None
    return {"id": workload_id, "state": "deleting"}


def _update_error(err: Exception, workload_id: str) -> ApiError:
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        if isinstance(cause, ApplicationError):
            return ApiError(409, cause.message, code="conflict")
        return ApiError(409, str(cause or err), code="conflict")
    assert isinstance(err, RPCError)
    if err.status == RPCStatusCode.NOT_FOUND:
        return ApiError(404, f"workload {workload_id} not found or no longer running")
    return ApiError(503, f"Temporal could not take the request: {err.message}")


def _temporal(request: Request):
    client = getattr(request.app.state, "temporal", None)
    if client is None:
        raise ApiError(503, "Temporal is not reachable")
    return client
