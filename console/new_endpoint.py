"""Create an endpoint from the console: a model name for clients (`name`) and the workloads behind it
(`workloads`, a multi-select of serving workloads), created as `POST /v1/endpoints` creates it
(api/services/endpoints.py).

An existing endpoint's workloads change on its own page (`console/endpoints.py`, as PATCH changes them)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

import asyncpg
from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from api.auth import Principal
from api.deps import DbDep, SettingsDep, TemporalDep
from api.errors import ApiError
from api.responses import answer_fields
from api.services import endpoints as endpoints_service
from api.services.endpoints import EndpointRequest
from api.services.workloads import list_workloads
from console.endpoints import endpoint_path
from console.forms import refusal_words
from console.rendering import ConsoleRoute, first, read_form, redirect, render
from console.session import ConsoleOperator, check_csrf
from console.workloads import OFFERED_STATES

router = APIRouter(route_class=ConsoleRoute)

RECORD_WAIT_SECONDS = 5.0



async def _page(request: Request, principal: Principal, db: asyncpg.Pool, *, name: str = "",
                chosen: list[str] | None = None, status_code: int = 200, error: str | None = None) -> Response:
    listed = [answer_fields(w) for w in await list_workloads(principal, db=db, limit=500)]
    # A new endpoint is its creator's team's and takes only that team's workloads (an admin lists every team's).
    offered = sorted((w for w in listed if w["state"] in OFFERED_STATES and w["team"] == principal.team),
                     key=lambda w: (w["state"] != "serving", w["id"]))
    chosen = chosen if chosen is not None else [request.query_params["workload"]] \
        if request.query_params.get("workload") else []
    if not name and len(chosen) == 1:
        served = next(((w.get("spec") or {}).get("served_model_name") for w in offered if w["id"] == chosen[0]), None)
        name = served or ""
    return render(request, "endpoint_new.html", status_code=status_code, principal=principal, workloads=offered,
                  endpoint_name=name, chosen=chosen, error=error)


@router.get("/endpoints/new")
async def new_endpoint(request: Request, principal: ConsoleOperator, db: DbDep):
    return await _page(request, principal, db)


@router.post("/endpoints/new")
async def create_endpoint(request: Request, principal: ConsoleOperator, db: DbDep, settings: SettingsDep,
                          temporal: TemporalDep):
    form = await read_form(request)
    check_csrf(request, form)
    name = first(form, "name").strip()
    chosen = [w for w in form.get("workloads", []) if w]
    try:
        body = EndpointRequest(name=name, workloads=chosen)
    except ValidationError as exc:
        return await _page(request, principal, db, name=name, chosen=chosen, status_code=422,
                           error=refusal_words(exc))
    try:
        await endpoints_service.create(body, principal=principal, db=db, temporal=temporal, settings=settings)
    except ApiError as err:
        return await _page(request, principal, db, name=name, chosen=chosen, status_code=err.status,
                           error=err.message)
    if await _recorded(db, name):
        return redirect(endpoint_path(name) + "?created=1")
    return redirect("/console/endpoints?" + urlencode({"created": name}))


async def _recorded(db: asyncpg.Pool, name: str) -> bool:
    """The endpoint's workflow writes its registry row as its first step; the page reads that row, so
    wait a little for it rather than land on "not found"."""
    deadline = asyncio.get_running_loop().time() + RECORD_WAIT_SECONDS
    while True:
        if await db.fetchval("select 1 from endpoints where name = $1", name):
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.1)
