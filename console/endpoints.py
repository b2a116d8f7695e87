"""Endpoint pages: the list, and one endpoint's backends (workload, cluster, URL), their weights and
health as the gateway reports them, the model name clients send, and a request to paste. Reads and changes
go through the services the REST routes call (api/services/endpoints.py), so the console and the API say the
same thing."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any
from urllib.parse import quote

import asyncpg
from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from api.auth import Principal
from api.deps import DbDep, SettingsDep, TemporalDep, temporal_or_none
from api.errors import ApiError
from api.responses import answer_fields
from api.services import endpoints as endpoints_service
from api.services.endpoints import WorkloadsChange
from api.services.workloads import list_workloads
from console.forms import refusal_words
from console.journey import JSON
from console.rendering import ConsoleRoute, read_form, redirect, render
from console.session import ConsoleOperator, ConsoleViewer, check_csrf
from console.traffic_charts import traffic_section
from console.workloads import OFFERED_STATES, workload_path
from wingsmith.adapters.gateway.traffic_reader import read_traffic
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway import Backend, BackendStatus
from wingsmith.domain.gateway.traffic import BackendTraffic

router = APIRouter(route_class=ConsoleRoute)

HEALTH_WORDS = {
    "healthy": "takes new requests",
    "draining": "takes no new requests; removed once its requests finish",
    "cooling_down": "a request to it failed; the gateway tries it again shortly",
    "unhealthy": "its requests fail",
    "not_reported": "this gateway does not report health",
    "unknown": "the gateway did not answer",
}


class BackendRow(BaseModel):
    id: str
    cluster: str
    workload_id: str
    url: str
    weight: int
    share: float | None  # percent of new requests
    health: str
    health_words: str
    draining_until: datetime | None
    in_flight: int | None
    requests: int | None  # from the gateway's Prometheus metrics (wingsmith.domain.gateway.traffic)
    failures: int | None
    p50_ms: float | None
    p99_ms: float | None
    last_error: str | None
    served_model: str | None


def health_of(backend: Backend, status: BackendStatus | None) -> str:
    """One word for a backend's state; draining wins because it says the plane is removing it."""
    if status is None:
        return "unknown"
    if backend.weight == 0 or status.weight == 0:
        return "draining"
    if status.cooling_down:
        return "cooling_down"
    if status.healthy is None:
        return "not_reported"
    return "healthy" if status.healthy else "unhealthy"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def backend_rows(recorded: list[dict[str, Any]], health: dict[str, Any] | None,
                 traffic: dict[str, BackendTraffic] | None = None) -> list[BackendRow]:
    """The gateway's own routes when it answered (what it does now), else the routes the plane recorded.
    Request counts and latencies are the gateway's metrics, the numbers Prometheus scrapes."""
    routes = (health or {}).get("routes", {}).get("backends") if health else None
    backends = [Backend.model_validate(b) for b in (routes if routes is not None else recorded)]
    statuses = {s["id"]: BackendStatus.model_validate(s) for s in (health or {}).get("backends", [])}
    total = sum(b.weight for b in backends)
    rows = []
    for b in backends:
        status = statuses.get(b.id)
        seen = traffic.get(b.id, BackendTraffic(requests=0, failures=0, p50_seconds=None, p99_seconds=None)) \
            if traffic is not None else None
        health_word = health_of(b, status)
        rows.append(BackendRow(
            id=b.id, cluster=b.cluster, workload_id=b.workload_id, url=b.url, weight=b.weight,
            share=round(100 * b.weight / total, 1) if total else None, health=health_word,
            health_words=HEALTH_WORDS[health_word], draining_until=b.draining_until,
            in_flight=status.in_flight if status else None, requests=seen.requests if seen else None,
            failures=seen.failures if seen else None, p50_ms=_ms(seen.p50_seconds) if seen else None,
            p99_ms=_ms(seen.p99_seconds) if seen else None, last_error=status.last_error if status else None,
            served_model=b.served_model))
    return rows


def gateway_base(gateway_url: str) -> str:
    """The base URL OpenAI clients take (the `/v1` the create handler reports too)."""
    return gateway_url.rstrip("/") + "/v1"


def chat_curl(base_url: str, model: str) -> str:
    """A chat completion through the gateway, ready to paste."""
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello in one sentence."}]}
    url = shlex.quote(base_url + "/chat/completions")
    return f"curl -sS {JSON} \\\n  -d {shlex.quote(json.dumps(body))} \\\n  {url}"


def endpoint_path(name: str) -> str:
    return "/console/endpoints/" + quote(name, safe="")


@router.get("/endpoints")
async def endpoint_list(request: Request, principal: ConsoleViewer, db: DbDep):
    listed = [answer_fields(e) for e in await endpoints_service.list_endpoints(principal, db=db)]
    rows = [{**e, "routes": [Backend.model_validate(b) for b in e.get("routes") or []]} for e in listed]
    return render(request, "endpoints.html", principal=principal, endpoints=rows, endpoint_path=endpoint_path,
                  workload_path=workload_path)


async def _endpoint_page(request: Request, name: str, principal: Principal, db: asyncpg.Pool, settings: Settings, *,
                         status_code: int = 200, error: str | None = None):
    e = answer_fields(await endpoints_service.get_endpoint(name, viewer=principal, db=db, settings=settings,
                                                           temporal=temporal_or_none(request.app.state)))
    traffic = await read_traffic(settings.gateway_url, name, settings.gateway_admin_token_ref) \
        if settings.gateway == "local" else None
    backends = backend_rows(e.get("routes") or [], e.get("health"), traffic)
    base = gateway_base(settings.gateway_url)
    served_as = sorted({b.served_model for b in backends if b.served_model and b.served_model != name})
    listed = [answer_fields(w) for w in await list_workloads(principal, db=db, limit=500)] \
        if principal.has("operator") else []
    # The endpoint takes only its own team's workloads (an admin sees every team's in the list).
    offered = sorted({w["id"] for w in listed if w["state"] in OFFERED_STATES and w["team"] == e["team"]}
                     | set(e.get("workloads") or []))
    return render(request, "endpoint.html", status_code=status_code, principal=principal, e=e, backends=backends,
                  base_url=base, curl=chat_curl(base, name), served_as=served_as, offered=offered, error=error,
                  serving=sum(1 for b in backends if b.weight > 0), workload_path=workload_path,
                  traffic=await traffic_section(db, settings, endpoint=name))


@router.get("/endpoints/{name}")
async def endpoint_page(request: Request, name: str, principal: ConsoleViewer, db: DbDep, settings: SettingsDep):
    return await _endpoint_page(request, name, principal, db, settings)


@router.post("/endpoints/{name}/workloads")
async def change_workloads(request: Request, name: str, principal: ConsoleOperator, db: DbDep, settings: SettingsDep,
                           temporal: TemporalDep):
    form = await read_form(request)
    check_csrf(request, form)
    chosen = [w for w in form.get("workloads", []) if w]
    try:
        body = WorkloadsChange(workloads=chosen)
    except ValidationError as exc:
        return await _endpoint_page(request, name, principal, db, settings, status_code=422,
                                    error=refusal_words(exc))
    try:
        # The same checked update and refusal words as PATCH /v1/endpoints/{name}.
        await endpoints_service.set_workloads(name, body.workloads, principal=principal, db=db, temporal=temporal,
                                              settings=settings)
    except ApiError as err:
        return await _endpoint_page(request, name, principal, db, settings, status_code=err.status, error=err.message)
    return redirect(endpoint_path(name) + "?changed=1")
