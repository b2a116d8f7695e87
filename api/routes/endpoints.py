"""Endpoints: one model name for clients, routed by the gateway to every cluster serving it (the use cases:
api/services/endpoints.py)."""

from __future__ import annotations

from fastapi import APIRouter

from api.auth import Operator, Viewer
from api.deps import DbDep, MaybeTemporalDep, SettingsDep, TemporalDep
from api.responses import EndpointChanged, EndpointDeleting, EndpointDetail, EndpointList, EndpointStarted
from api.services import endpoints as service
from api.services.endpoints import EndpointRequest, WorkloadsChange

router = APIRouter(prefix="/v1/endpoints", tags=["endpoints"])


@router.post("", status_code=202, response_model=EndpointStarted,
             summary="Create an endpoint (repeating it with the same workloads is a no-op)")
async def create(body: EndpointRequest, principal: Operator, db: DbDep, settings: SettingsDep,
                 temporal: TemporalDep) -> EndpointStarted:
    return await service.create(body, principal=principal, db=db, temporal=temporal, settings=settings)


@router.patch("/{name}", status_code=202, response_model=EndpointChanged,
              summary="Change an endpoint's workloads (leaving ones are drained first)")
async def set_workloads(name: str, body: WorkloadsChange, principal: Operator, settings: SettingsDep,
                        temporal: TemporalDep, db: DbDep) -> EndpointChanged:
    return await service.set_workloads(name, body.workloads, principal=principal, db=db, temporal=temporal,
                                       settings=settings)


@router.get("", response_model=EndpointList, response_model_exclude_unset=True,
            summary="List endpoints (the caller's team's; an admin's: every team's)")
async def list_endpoints(viewer: Viewer, db: DbDep) -> EndpointList:
    return EndpointList(endpoints=await service.list_endpoints(viewer, db=db))


@router.get("/{name}", response_model=EndpointDetail, response_model_exclude_unset=True,
            summary="An endpoint: backends, weights and health")
async def get_endpoint(name: str, viewer: Viewer, db: DbDep, settings: SettingsDep,
                       temporal: MaybeTemporalDep) -> EndpointDetail:
    return await service.get_endpoint(name, viewer=viewer, db=db, temporal=temporal, settings=settings)


@router.delete("/{name}", status_code=202, response_model=EndpointDeleting,
               summary="Delete an endpoint (drains, then removes its routes)")
async def delete(name: str, operator: Operator, temporal: TemporalDep, db: DbDep) -> EndpointDeleting:
    return await service.delete(name, principal=operator, db=db, temporal=temporal)
