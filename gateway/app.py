"""The local gateway: an OpenAI-compatible router from one model name to the deployments serving it.

    /v1/models, /v1/models/{model}        the endpoint names it routes (with client keys on: a key)
    /v1/chat/completions, /v1/completions  proxied to one of the endpoint's backends, by weight
    /admin/routes[/{model}]                GET / PUT / DELETE, bearer token (read per call from a reference)
    /healthz
    /readyz                                with a routes source: 503 until the first pull or push landed
    /metrics                               Prometheus (gateway/metrics.py); with client keys on,
                                           the admin token (the traffic it shows is the operator's)

The two proxy routes are served by a plain ASGI hot path (gateway/proxy.py): retries, cool-downs
and the relay of streamed answers are described there. A backend that cools down gets no new
requests until a background probe of its `/v1/models` (here) lists the model again.

What a client is told never names the gateway's files or its backends' addresses; the log does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from opentelemetry.trace import TracerProvider
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.answers import openai_error, refused_by_door, too_large, unauthorized, unknown_model
from gateway.bounds import BodyBounds, BodyRefused, Bounds
from gateway.guard import DEFAULT_MAX_BODY_BYTES, ClientKeys, Refusal
from gateway.metrics import GatewayMetrics
from gateway.proxy import Proxy, proxied
from gateway.table import BackendState, RouteTable, log
from gateway.tracing import RequestTracer
from gateway.upstream import UpstreamError, Upstreams
from wingsmith.adapters.body_limit import BodyLimit, RequestTooLarge
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.domain.gateway.routes import EndpointRoutes


class GatewayApp(Starlette):
    """Starlette for everything but the proxy routes' POSTs, which go straight to `proxy` (plain
    ASGI, with its own body limit) without Starlette's middleware, routing and request objects. Every
    request passes `bounds` first: the body's deadline and the bytes held (gateway/bounds.py)."""

    proxy: ASGIApp
    bounds: BodyBounds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.bounds(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if proxied(scope):
            await self.proxy(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


class ModelNames:
    """`/v1/models` and `/v1/models/{model}`: the endpoint names this gateway routes (with client keys on,
    the ones the caller's key may call)."""

    def __init__(self, table: RouteTable, client_keys: ClientKeys):
        self.table, self.client_keys = table, client_keys
        self.created = int(time.time())

    async def listed(self, request: Request) -> Response:
        try:
            names = self.client_keys.callable_models(request.headers.get("authorization", ""), self.table.models())
        except Refusal as refusal:
            return refused_by_door(refusal)
        return JSONResponse({"object": "list", "data": [_model_card(m, self.created) for m in names]})

    async def one(self, request: Request) -> Response:
        name = request.path_params["model"]
        try:
            self.client_keys.check(request.headers.get("authorization", ""), name)
        except Refusal as refusal:
            return refused_by_door(refusal)
        if self.table.get(name) is None:
            return unknown_model(name)
        return JSONResponse(_model_card(name, self.created))


class Prober:
    """Probes each cooled-down backend's `/v1/models` until it lists its model again; only then does
    it get new requests (RouteTable.recovered)."""

    def __init__(self, table: RouteTable, upstreams: Upstreams, *, interval: float, timeout: float):
        self.table, self.upstreams = table, upstreams
        self.interval, self.timeout = interval, timeout

    async def probe(self, model_name: str, state: BackendState) -> None:
        backend = state.backend
        state.next_probe = time.monotonic() + self.interval
        wanted = backend.model_for(model_name)
        try:
            pool, prefix = self.upstreams.for_url(backend.url)
            resp = await pool.request("GET", prefix + "/v1/models", [], read_timeout=self.timeout)
            try:
                answer = await resp.read()
            finally:
                resp.release()
            listed = {m.get("id") for m in json.loads(answer).get("data", []) if isinstance(m, dict)} \
                if resp.status == 200 else set()
        except UpstreamError as exc:
            state.last_error = f"probe: {exc.reason}"
            return
        except (ValueError, AttributeError) as exc:
            state.last_error = f"probe: {type(exc).__name__}"
            return
        if wanted in listed:
            self.table.recovered(state)
        else:
            state.last_error = (f"probe: HTTP {resp.status}" if resp.status != 200
                                else f"probe: {wanted!r} not listed")

    async def run(self) -> None:
        tick = min(0.05, self.interval)
        while True:
            due = self.table.due_probes(time.monotonic())
            if due:
                await asyncio.gather(*(self.probe(m, s) for m, s in due), return_exceptions=True)
            await asyncio.sleep(tick)


class Admin:
    """`/admin/routes[/{model}]` (the routes, set by the plane) and the door to `/metrics`: a bearer token
    read per call from its reference, so a rotated token applies at once."""

    def __init__(self, app: GatewayApp, table: RouteTable, upstreams: Upstreams, admin_token_ref: str | None):
        self.app, self.table, self.upstreams, self.token_ref = app, table, upstreams, admin_token_ref

    async def forget_unrouted(self) -> None:
        """Close the connections to backends no route names any more (in-flight answers finish first:
        their connections are closed when released)."""
        await self.upstreams.forget({b.url for routes in self.table.all() for b in routes.backends})

    def refused(self, request: Request) -> Response | None:
        if self.token_ref is None:
            return openai_error(503, "The admin API is disabled: no admin token reference is configured.",
                                "service_unavailable", "admin_disabled")
        try:
            expected = read_secret_ref(self.token_ref)
        except SecretUnavailable as exc:
            log.error("gateway admin token unavailable", reason=str(exc))
            return openai_error(503, "The admin token cannot be read; the gateway's log says why.",
                                "service_unavailable", "admin_token_unavailable")
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return unauthorized("Missing bearer token for the gateway admin API.", "missing_token")
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            return unauthorized("Wrong bearer token for the gateway admin API.", "wrong_token")
        return None

    async def listed(self, request: Request) -> Response:
        if denied := self.refused(request):
            return denied
        return JSONResponse({"data": [status.model_dump(mode="json") for status in self.table.statuses()]})

    async def route(self, request: Request) -> Response:
        if denied := self.refused(request):
            return denied
        name = request.path_params["model"]
        if request.method == "GET":
            status = self.table.status(name)
            if status is None:
                return openai_error(404, f"The gateway has no routes for model {name!r}.",
                                    "invalid_request_error", "routes_not_found", "model")
            return JSONResponse(status.model_dump(mode="json"))
        if request.method == "DELETE":
            deleted = self.table.delete(name)
            await self._changed()
            return JSONResponse({"model_name": name, "deleted": deleted})
        routes = _routes_from_body(name, await request.body())
        if isinstance(routes, Response):
            return routes
        status = self.table.set(routes)
        await self._changed()
        log.info("gateway routes set", model=name, backends={b.id: b.weight for b in routes.backends})
        return JSONResponse(status.model_dump(mode="json"))

    async def _changed(self) -> None:
        self.app.state.pushed = True
        await self.forget_unrouted()


def _routes_from_body(name: str, raw: bytes) -> EndpointRoutes | Response:
    """The routes a PUT gives for `name`, or the answer that says what is wrong with them."""
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return openai_error(400, "The request body is not valid JSON.", "invalid_request_error", "invalid_json")
    if not isinstance(body, dict):
        return openai_error(400, "The routes must be a JSON object with model_name and backends.",
                            "invalid_request_error", "invalid_routes")
    body.setdefault("model_name", name)
    if body["model_name"] != name:
        return openai_error(400, f"model_name {body['model_name']!r} in the body differs from {name!r} in the path.",
                            "invalid_request_error", "model_name_mismatch", "model_name")
    try:
        return EndpointRoutes.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
        return openai_error(422, f"Invalid routes: {problems}", "invalid_request_error", "invalid_routes")


class Health:
    """`/healthz` (the process answers) and `/readyz` (it knows its routes)."""

    def __init__(self, app: GatewayApp, table: RouteTable):
        self.app, self.table = app, table
        self.saved_at_start = bool(table.models())

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "endpoints": len(self.table.models())})

    async def readyz(self, request: Request) -> Response:
        # A new replica that pulls its routes knows none until its first pull: it would answer 404 for
        # every model, so it takes no traffic until a pull or a push landed. A table saved by an
        # earlier run of this replica (its state dir) is served as after a pull: the one it last had.
        state = self.app.state
        sync = state.routes_sync
        if sync is None or sync.last_pulled is not None or state.pushed or self.saved_at_start:
            return JSONResponse({"status": "ready", "endpoints": len(self.table.models())})
        return openai_error(503, "The gateway has not received its routes yet: its first pull from the route "
                                 "source has not been answered.", "service_unavailable", "routes_not_loaded")


async def _not_found(request: Request, exc: Exception) -> Response:
    if isinstance(exc, RequestTooLarge):  # a body read by a handler other than the proxy
        return too_large(exc.limit)
    if isinstance(exc, BodyRefused):  # late, or past the bytes the gateway may hold
        return exc.answer()
    status = getattr(exc, "status_code", 404)
    message = "Unknown URL." if status == 404 else f"Method {request.method} is not allowed here."
    return openai_error(status, f"{message} ({request.method} {request.url.path})", "invalid_request_error",
                        "unknown_url" if status == 404 else "method_not_allowed")


async def _proxied_elsewhere(request: Request) -> Response:
    raise AssertionError("POSTs to the proxy routes never reach Starlette (GatewayApp.__call__)")


def create_gateway_app(*, state_dir: Path | None = None, admin_token_ref: str | None = None,
                       probe_interval: float = 1.0, first_probe_after: float = 0.2,
                       probe_timeout: float = 2.0, connect_timeout: float = 3.0,
                       read_timeout: float = 600.0, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                       client_keys_ref: str | None = None,
                       tracer_provider: TracerProvider | None = None, bounds: Bounds | None = None) -> GatewayApp:
    """`state_dir` None keeps routes in memory only; `admin_token_ref` None refuses every admin call;
    `client_keys_ref` None leaves every endpoint open (see gateway/guard.py); `tracer_provider`
    None traces nothing (the client's trace context is still forwarded; gateway/tracing.py); `bounds`
    None takes the defaults (only its body deadline and bytes held apply here; the rest are the server's)."""
    bounds = bounds or Bounds()
    client_keys = ClientKeys(client_keys_ref)
    table = RouteTable(state_dir, first_probe_after=first_probe_after)
    metrics = GatewayMetrics(table)
    upstreams = Upstreams(connect_timeout=connect_timeout, read_timeout=read_timeout)
    tracer = RequestTracer(tracer_provider) if tracer_provider is not None else None
    names = ModelNames(table, client_keys)
    prober = Prober(table, upstreams, interval=probe_interval, timeout=probe_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(prober.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await upstreams.aclose()

    async def metrics_page(request: Request) -> Response:
        # Open like any exporter while the endpoints are open; once they need keys, the traffic by
        # endpoint and backend is the operator's: the admin token (Prometheus: `authorization`).
        if client_keys.on and (denied := admin.refused(request)):
            return denied
        return await metrics.page(request)

    app = GatewayApp(exception_handlers={HTTPException: _not_found}, lifespan=lifespan,
                     # Before routing, auth and parsing: no route reads more than this from a client.
                     middleware=[Middleware(BodyLimit, limit=max_body_bytes, refuse=too_large)])
    admin, health = Admin(app, table, upstreams, admin_token_ref), Health(app, table)
    for route in (
        Route("/v1/models", names.listed, methods=["GET"]),
        Route("/v1/models/{model:path}", names.one, methods=["GET"]),
        # Declared so that other methods get 405, not 404; their POSTs go to the proxy below.
        Route("/v1/chat/completions", _proxied_elsewhere, methods=["POST"]),
        Route("/v1/completions", _proxied_elsewhere, methods=["POST"]),
        Route("/admin/routes", admin.listed, methods=["GET"]),
        Route("/admin/routes/{model:path}", admin.route, methods=["GET", "PUT", "DELETE"]),
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ):
        app.router.routes.append(route)
    # The same body limit, in front of the proxy: no route reads more than it from a client.
    proxy = Proxy(table, upstreams, metrics, client_keys, tracer)
    app.proxy = BodyLimit(proxy, limit=max_body_bytes, refuse=too_large)
    app.bounds = BodyBounds(app.dispatch, body_timeout=bounds.body_timeout, max_held_bytes=bounds.max_held_bytes,
                            max_body_bytes=max_body_bytes)
    app.state.table = table
    app.state.routes_sync = None  # set by wingsmith.adapters.gateway.routes_sync.attach
    app.state.pushed = False
    app.state.metrics = metrics
    app.state.forget_unrouted = admin.forget_unrouted  # for routes that change by a pull (routes_sync)
    return app


def _model_card(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "wingsmith"}
