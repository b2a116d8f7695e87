"""Endpoints: one model name for clients, routed by the gateway to every cluster serving it. Create one,
change its workloads (leaving ones are drained first), list, read (with what the gateway reports) and delete.
An endpoint belongs to the team that created it and takes only that team's workloads; names are unique
across teams, and another team's endpoint answers word for word as an absent one."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ActivityError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Principal
from api.errors import ApiError
from api.ownership import hide, listing_team, own_endpoint
from api.responses import EndpointChanged, EndpointDeleting, EndpointDetail, EndpointStarted, EndpointSummary
from contracts import endpoint as endpoint_contract
from contracts.conditions import Condition
from contracts.endpoint import SetWorkloads
from contracts.ids import endpoint_workflow_id
from wingsmith.adapters.gateway import GatewayError, gateway_client
from wingsmith.adapters.starter import create_endpoint, endpoint_handle, endpoint_status
from wingsmith.adapters.store import endpoints as store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.domain.config import Settings
from wingsmith.domain.endpoints import endpoint_model, membership_problems
from wingsmith.domain.gateway import RouteStatus
from wingsmith.domain.text import MAX_LIST, NameText


class EndpointRequest(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,62}$", examples=["kimi-k3"],
                      description="the model name clients send")
    workloads: list[NameText] = Field(min_length=1, max_length=MAX_LIST)


class WorkloadsChange(BaseModel):
    workloads: list[NameText] = Field(min_length=1, max_length=MAX_LIST,
                                      description="the endpoint's workloads from now on")


async def create(body: EndpointRequest, *, principal: Principal, db: asyncpg.Pool, temporal: Client,
                 settings: Settings) -> EndpointStarted:
    """Start the endpoint's workflow; repeating it with the same workloads is a no-op."""
    # The gateway routes by name, so names are unique across teams: another team's says only "taken".
    await own_endpoint(principal, db, temporal, body.name, _taken(body.name))
    # The endpoint is its creator's team's and takes only that team's workloads.
    facts = await store.workload_facts(db, body.workloads, team=principal.team)
    problems = membership_problems(body.name, body.workloads, facts, model=None)
    if problems:
        raise ApiError(422, "; ".join(problems), code="invalid_endpoint")
    try:
        started = await create_endpoint(temporal, settings, name=body.name, workloads=body.workloads,
                                        model=endpoint_model(facts, body.workloads),
                                        requested_by=principal.name, team=principal.team)
    except RPCError as err:
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    if not started.started:
        # Started by another team between the check above and this start.
        hide(principal, "endpoint", body.name, started.team, _taken(body.name))
        if started.stage in ("deleting", "deleted"):
            raise ApiError(409, f"endpoint {body.name} is being deleted; create it again once it is gone")
        if set(started.routed) != set(body.workloads):
            raise ApiError(409, f"endpoint {body.name} exists with workloads {', '.join(started.routed) or '(none)'}; "
                           f"change them with PATCH /v1/endpoints/{body.name}", code="endpoint_exists",
                           details={"workloads": started.routed, "change_with": f"PATCH /v1/endpoints/{body.name}"})
    # Said, not waited for: a new endpoint's routes follow once its workflow sees a workload serving.
    status, error = await _gateway_status(settings, body.name)
    return EndpointStarted(name=body.name, workflow_id=started.workflow_id, started=started.started,
                           workflow_url=workflow_ui_url(settings, started.workflow_id),
                           url=f"{settings.gateway_url}/v1", workloads=started.routed,
                           published=published(status) if error is None else None)


async def set_workloads(name: str, workloads: list[str], *, principal: Principal, db: asyncpg.Pool,
                        temporal: Client, settings: Settings) -> EndpointChanged:
    """The endpoint's workloads from now on; leaving ones are drained before they are removed."""
    await own_endpoint(principal, db, temporal, name, _not_found(name))
    await _check_change(name, workloads, db, temporal)
    try:
        status = await endpoint_handle(temporal, name).execute_update(
            endpoint_contract.UPDATE_SET_WORKLOADS,
            SetWorkloads(workloads=workloads, requested_by=principal.name, team=principal.team),
            result_type=endpoint_contract.EndpointStatus)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        kind = getattr(cause, "type", None)
        message = getattr(cause, "message", None) or str(cause or err)
        if kind == endpoint_contract.INVALID_WORKLOADS:
            raise ApiError(422, message, code="invalid_endpoint") from None
        if isinstance(cause, ActivityError):
            raise ApiError(503, f"the registry could not check the workloads: {cause.cause or cause}") from None
        raise ApiError(409, message) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(404, f"endpoint {name} not found") from None
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    return EndpointChanged(name=name, workflow_id=endpoint_workflow_id(name),
                           workflow_url=workflow_ui_url(settings, endpoint_workflow_id(name)), stage=status.stage,
                           workloads=[w for w in status.workloads if w not in status.draining],
                           draining=status.draining)


async def _check_change(name: str, wanted: list[str], db: asyncpg.Pool, temporal: Client) -> None:
    """Refuse a change the endpoint's workflow would refuse, before sending it: the workflow checks
    again (it alone sees changes racing this one)."""
    try:
        current = await endpoint_status(temporal, name)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(404, f"endpoint {name} not found") from None
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    if current.stage in ("deleting", "deleted"):
        raise ApiError(409, f"endpoint {name} is being deleted; its workloads can no longer change",
                       code="endpoint_deleting")
    # Only the endpoint's team's workloads exist for it (an admin's change too).
    facts = await store.workload_facts(db, list(dict.fromkeys([*wanted, *current.workloads])), team=current.team)
    problems = membership_problems(name, wanted, facts, current.model or endpoint_model(facts, current.workloads))
    if problems:
        raise ApiError(422, "; ".join(problems), code="invalid_endpoint")


async def list_endpoints(viewer: Principal, *, db: asyncpg.Pool) -> list[EndpointSummary]:
    """The endpoints `viewer` may see: its team's; an admin's: every team's."""
    return [EndpointSummary.model_validate(row) for row in await store.list_endpoints(db, team=listing_team(viewer))]


async def get_endpoint(name: str, *, viewer: Principal, db: asyncpg.Pool, temporal: Client | None,
                       settings: Settings) -> EndpointDetail:
    """The registry row, the workflow's conditions and what the gateway reports (its backends, weights and
    health, and whether it routes the name yet); the row answers without Temporal or the gateway."""
    out = await store.get_endpoint(db, name)
    if out is None:
        raise _not_found(name)
    hide(viewer, "endpoint", name, out["team"], _not_found(name))
    out["workflow_url"] = workflow_ui_url(settings, out["workflow_id"])
    out["conditions"] = await _conditions(temporal, name)
    status, error = await _gateway_status(settings, name)
    out["health"] = status.model_dump(mode="json") if status else None
    out["published"] = published(status) if error is None else None
    if error is not None:
        out["health_error"] = error
    return EndpointDetail.model_validate(out)


def published(status: RouteStatus | None) -> bool:
    """Whether the gateway routes the name: a chat sent now reaches a backend instead of model_not_found."""
    return status is not None and any(b.weight > 0 for b in status.backends)


async def _gateway_status(settings: Settings, name: str) -> tuple[RouteStatus | None, str | None]:
    """What the gateway knows of the name (None: no routes), or why it could not be read (best effort: the
    registry still answers)."""
    def read() -> RouteStatus | None:
        client = gateway_client(settings)
        try:
            return client.status(name)
        finally:
            client.close()
    try:
        return await run_in_threadpool(read), None
    except (GatewayError, Exception) as exc:  # noqa: BLE001 - health is best effort; the routes still answer
        return None, getattr(exc, "message", type(exc).__name__)


async def _conditions(temporal: Client | None, name: str) -> list[Condition]:
    """The workflow's conditions (best effort: the registry row answers without Temporal)."""
    if temporal is None:
        return []
    try:
        live = await endpoint_status(temporal, name)
    except Exception:  # noqa: BLE001 - not started yet, or Temporal unreachable: the row still answers
        return []
    return list(live.conditions)


async def delete(name: str, *, principal: Principal, db: asyncpg.Pool, temporal: Client) -> EndpointDeleting:
    """Delete it: it drains, then its routes are removed; answers once the workflow took the request."""
    await own_endpoint(principal, db, temporal, name, _gone(name))
    try:
        await endpoint_handle(temporal, name).start_update(endpoint_contract.UPDATE_DELETE,
                                                           wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    except WorkflowUpdateFailedError as err:
        raise ApiError(409, str(err.cause or err)) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise _gone(name) from None
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    return EndpointDeleting(name=name, state="deleting")


# Another team's endpoint answers word for word as an absent one: these are the answers for those.
def _not_found(name: str) -> ApiError:
    return ApiError(404, f"endpoint {name} not found")


def _gone(name: str) -> ApiError:
    return ApiError(404, f"endpoint {name} not found or already deleted")


def _taken(name: str) -> ApiError:
    return ApiError(409, f"endpoint name {name} is taken; choose another name", code="endpoint_name_taken")
