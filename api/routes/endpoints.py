"""Endpoints: one model name for clients, routed by the gateway to every cluster serving it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Operator, Viewer
from api.deps import DbDep, SettingsDep, TemporalDep
from api.errors import ApiError
from wingsmith.gateway import GatewayError, gateway_client
from wingsmith.store import endpoints as endpoint_store
from wingsmith.temporal import workflow_ui_url
from wingsmith.text import MAX_LIST, NameText
from workflows.endpoint import EndpointWorkflow
from workflows.starter import create_endpoint, endpoint_handle

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])


class EndpointRequest(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,62}$", examples=["kimi-k3"],
                      description="the model name clients send")
    workloads: list[NameText] = Field(min_length=1, max_length=MAX_LIST)


@router.post("", status_code=202, summary="Create an endpoint (or change its workloads)")
async def create(body: EndpointRequest, _operator: Operator, db: DbDep, settings: SettingsDep,
                 temporal: TemporalDep) -> dict[str, Any]:
    known = await endpoint_store.workload_states(db, body.workloads)
    missing = [w for w in body.workloads if w not in known]
    if missing:
        raise ApiError(422, f"unknown workload(s): {', '.join(missing)}", code="invalid_endpoint")
    gone = [w for w, s in known.items() if s in ("deleted", "failed")]
    if gone:
        raise ApiError(422, f"workload(s) {', '.join(gone)} no longer serve", code="invalid_endpoint")
    handle = await create_endpoint(temporal, settings, name=body.name, workloads=body.workloads)
    return {"name": body.name, "workflow_id": handle.id, "workflow_url": workflow_ui_url(settings, handle.id),
            "url": f"{settings.gateway_url}/v1", "workloads": body.workloads}


@router.get("", summary="List endpoints")
async def list_endpoints(_viewer: Viewer, db: DbDep):
    return {"endpoints": await endpoint_store.list_endpoints(db)}


@router.get("/{name}", summary="An endpoint: backends, weights and health")
async def get_endpoint(name: str, _viewer: Viewer, db: DbDep, settings: SettingsDep, request: Request):
    out = await endpoint_store.get_endpoint(db, name)
    if out is None:
        raise ApiError(404, f"endpoint {name} not found")
    out["workflow_url"] = workflow_ui_url(settings, out["workflow_id"])
    out["health"] = None
    try:
        def read():
            client = gateway_client(settings)
            try:
                return client.status(name)
            finally:
                client.close()
        status = await run_in_threadpool(read)
        out["health"] = status.model_dump(mode="json") if status else None
    except (GatewayError, Exception) as exc:  # noqa: BLE001 - health is best effort; the routes still answer
        out["health_error"] = getattr(exc, "message", type(exc).__name__)
    return out


@router.delete("/{name}", status_code=202, summary="Delete an endpoint (drains, then removes its routes)")
async def delete(name: str, _operator: Operator, temporal: TemporalDep) -> dict[str, Any]:
    try:
        await endpoint_handle(temporal, name).start_update(EndpointWorkflow.delete,
                                                           wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    except WorkflowUpdateFailedError as err:
        raise ApiError(409, str(err.cause or err)) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(404, f"endpoint {name} not found or already deleted") from None
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    return {"name": name, "state": "deleting"}
