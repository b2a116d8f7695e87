"""The published route table, for gateway replicas that pull it (wingsmith/adapters/gateway/routes_sync.py).

A gateway authenticates with the gateway admin token (the one the plane pushes routes with), not a
person's token: the table names every backend's address, which only the plane and its gateways need.
`If-None-Match` with the version a gateway holds answers 304, so polling every few seconds costs one
small query while nothing changes.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from api.deps import DbDep, SettingsDep
from api.errors import ApiError
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.adapters.store.gateway_routes import published, published_version
from wingsmith.domain.gateway.routes import EndpointRoutes

router = APIRouter(prefix="/v1/gateway", tags=["gateway"])
log = get_logger("wingsmith.api.gateway_routes")


class PublishedRouteTable(BaseModel):
    version: int
    routes: list[EndpointRoutes]


def etag(version: int) -> str:
    return f'"{version}"'


@router.get("/routes", response_model=PublishedRouteTable, responses={304: {"description": "unchanged"}})
async def route_table(request: Request, settings: SettingsDep, db: DbDep) -> Response:
    _check_gateway_token(request, settings.gateway_admin_token_ref)
    held = request.headers.get("if-none-match")
    if held is not None and held == etag(await published_version(db)):
        return Response(status_code=304, headers={"ETag": held})
    table = await published(db)
    body = PublishedRouteTable(version=table.version, routes=table.routes)
    return JSONResponse(body.model_dump(mode="json"), headers={"ETag": etag(table.version),
                                                               "Cache-Control": "no-cache"})


def _check_gateway_token(request: Request, ref: str | None) -> None:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(401, "a gateway pulls its routes with the gateway admin token as a bearer token",
                       headers={"WWW-Authenticate": "Bearer"})
    if not ref:
        # Not a passing outage (no 503): without a configured token no caller may ever pull the table.
        raise ApiError(403, "this plane has no gateway admin token (WINGSMITH_GATEWAY_ADMIN_TOKEN_REF), "
                            "so no gateway can pull its routes", code="gateway_token_not_configured")
    try:
        expected = read_secret_ref(ref)
    except SecretUnavailable as exc:
        # The reason may name a file or a variable: the operator reads it in the log, not the caller.
        log.error("gateway admin token unavailable", reason=str(exc))
        raise ApiError(503, "the gateway admin token cannot be read right now", code="gateway_token_unavailable",
                       headers={"Retry-After": "5"}) from None
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise ApiError(401, "wrong gateway admin token", headers={"WWW-Authenticate": "Bearer"})
