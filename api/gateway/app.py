"""The local gateway: an OpenAI-compatible router from one model name to the deployments serving it.

    /v1/models, /v1/models/{model}        the endpoint names it routes
    /v1/chat/completions, /v1/completions  proxied to one of the endpoint's backends, by weight
    /admin/routes[/{model}]                GET / PUT / DELETE, bearer token (read per call from a reference)
    /healthz
    /metrics                               Prometheus (api/gateway/metrics.py)

A request that fails before any byte reached the client (connection refused, timeout, a 5xx or
404 answer, a stream that broke before its first byte) is retried once on another backend, and
the failing backend cools down: it gets no new requests until a background probe of its
`/v1/models` lists the model again. Bodies are relayed chunk by chunk as they arrive.
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

import httpx
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from api.gateway.guard import DEFAULT_MAX_BODY_BYTES, ClientKeys, Refusal, read_body
from api.gateway.metrics import GatewayMetrics
from api.gateway.table import BackendState, RouteTable, log
from wingsmith.gateway.routes import EndpointRoutes
from wingsmith.secrets import SecretUnavailable, read_secret_ref

BACKEND_HEADER = "x-wingsmith-backend"
# Answers that say "this backend cannot serve this request now" rather than "the request is bad".
# A 404 counts: the route says the backend serves the model, so not finding it is the backend's fault.
RETRY_STATUSES = frozenset({404, 408, 429, 500, 502, 503, 504})
# 429 means busy, not broken: try elsewhere but keep sending it traffic.
NO_COOLDOWN_STATUSES = frozenset({429})
_FORWARD_REQUEST_HEADERS = ("content-type", "accept", "accept-encoding", "x-request-id", "traceparent")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "trailers", "transfer-encoding", "upgrade", "date", "server"})


def openai_error(status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)


def create_gateway_app(*, state_dir: Path | None = None, admin_token_ref: str | None = None,
                       probe_interval: float = 1.0, first_probe_after: float = 0.2,
                       probe_timeout: float = 2.0, connect_timeout: float = 3.0,
                       read_timeout: float = 600.0, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                       client_keys_ref: str | None = None) -> Starlette:
    """`state_dir` None keeps routes in memory only; `admin_token_ref` None refuses every admin call;
    `client_keys_ref` None leaves every endpoint open (see api/gateway/guard.py)."""
    client_keys = ClientKeys(client_keys_ref)
    table = RouteTable(state_dir, first_probe_after=first_probe_after)
    metrics = GatewayMetrics(table, BACKEND_HEADER)
    created = int(time.time())
    clients: dict[str, httpx.AsyncClient] = {}

    def http() -> httpx.AsyncClient:
        return clients["http"]

    # ---- proxy -----------------------------------------------------------------------------------

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_card(m, created) for m in table.models()]})

    async def model(request: Request) -> Response:
        name = request.path_params["model"]
        if table.get(name) is None:
            return _unknown_model(name)
        return JSONResponse(_model_card(name, created))

    async def completions(request: Request) -> Response:
        try:
            raw = await read_body(request, max_body_bytes)
        except Refusal as refusal:
            return refused_by_door(refusal)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return openai_error(400, "The request body is not valid JSON.", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return openai_error(400, "The request body must be a JSON object.", "invalid_request_error", "invalid_json")
        name = body.get("model")
        if not isinstance(name, str) or not name:
            return openai_error(400, "You must provide a model parameter.", "invalid_request_error",
                                "missing_model", "model")
        try:
            client_keys.check(request, name)
        except Refusal as refusal:
            return refused_by_door(refusal)
        if table.get(name) is None:
            return _unknown_model(name)
        request.state.endpoint = name
        headers = {k: v for k in _FORWARD_REQUEST_HEADERS if (v := request.headers.get(k))}
        tried: set[str] = set()
        failures: list[str] = []
        held: tuple[httpx.Response, AsyncIterator[bytes], BackendState, bytes] | None = None
        for _ in range(2):  # the first try and at most one retry on another backend
            state = table.pick(name, exclude=tried)
            if state is None:
                break
            if tried:
                metrics.retried(name)
            tried.add(state.backend.id)
            if held is not None:
                await _release(held[0], held[2])
                held = None
            outcome = await _attempt(state, request.url.path, raw, body, name, headers)
            if isinstance(outcome, str):
                failures.append(f"{state.backend.id}: {outcome}")
                continue
            resp, rest, first = outcome
            if resp.status_code in RETRY_STATUSES:
                failures.append(f"{state.backend.id}: HTTP {resp.status_code}")
                if resp.status_code not in NO_COOLDOWN_STATUSES:
                    table.failed(state, f"HTTP {resp.status_code}")
                held = (resp, rest, state, first)  # relayed as is if no other backend does better
                continue
            return _relay(resp, rest, state, first)
        if held is not None:
            return _relay(*held)
        if not tried:
            return openai_error(503, f"No backend is taking requests for model {name!r} right now.",
                                "service_unavailable", "no_backend")
        log.warning("gateway request failed on every backend tried", model=name, failures=failures)
        return openai_error(502, f"The backends for model {name!r} failed: {'; '.join(failures)}.",
                            "api_error", "backend_failed")

    async def _attempt(state: BackendState, path: str, raw: bytes, body: dict[str, Any], name: str,
                       headers: dict[str, str]) -> tuple[httpx.Response, AsyncIterator[bytes], bytes] | str:
        """Send to one backend and read up to its first body chunk. A string says why it failed."""
        backend = state.backend
        payload = raw if backend.served_model is None else json.dumps({**body, "model": backend.served_model}).encode()
        state.in_flight += 1
        state.requests += 1
        resp: httpx.Response | None = None
        try:
            resp = await http().send(http().build_request("POST", backend.url + path, content=payload,
                                                          headers=headers), stream=True)
            # Holding the headers back until the first body chunk keeps "nothing sent yet" true for
            # a backend that answers 200 and then dies, so that request can still be retried.
            rest = resp.aiter_raw()
            first = await anext(rest, b"")
            return resp, rest, first
        except httpx.HTTPError as exc:
            if resp is not None:
                await resp.aclose()
            state.in_flight -= 1
            reason = f"{type(exc).__name__}"
            table.failed(state, reason)
            return reason

    async def _release(resp: httpx.Response, state: BackendState) -> None:
        state.in_flight -= 1
        await resp.aclose()

    def _relay(resp: httpx.Response, rest: AsyncIterator[bytes], state: BackendState,
               first: bytes) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                if first:
                    yield first
                async for chunk in rest:
                    yield chunk
            except httpx.HTTPError as exc:
                # Bytes already went out: no retry is possible; abort so the client sees the break.
                table.failed(state, f"stream broke: {type(exc).__name__}")
                raise
            finally:
                state.in_flight -= 1
                await resp.aclose()

        headers = {k: v for k, v in resp.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers[BACKEND_HEADER] = state.backend.id
        return StreamingResponse(chunks(), status_code=resp.status_code, headers=headers)

    # ---- probing cooled-down backends ------------------------------------------------------------

    async def probe(model_name: str, state: BackendState) -> None:
        backend = state.backend
        state.next_probe = time.monotonic() + probe_interval
        wanted = backend.model_for(model_name)
        try:
            resp = await http().get(backend.url + "/v1/models", timeout=probe_timeout)
            listed = {m.get("id") for m in resp.json().get("data", []) if isinstance(m, dict)} \
                if resp.status_code == 200 else set()
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            state.last_error = f"probe: {type(exc).__name__}"
            return
        if wanted in listed:
            table.recovered(state)
        else:
            state.last_error = (f"probe: HTTP {resp.status_code}" if resp.status_code != 200
                                else f"probe: {wanted!r} not listed")

    async def prober() -> None:
        tick = min(0.05, probe_interval)
        while True:
            due = table.due_probes(time.monotonic())
            if due:
                await asyncio.gather(*(probe(m, s) for m, s in due), return_exceptions=True)
            await asyncio.sleep(tick)

    # ---- admin -----------------------------------------------------------------------------------

    def refused(request: Request) -> Response | None:
        if admin_token_ref is None:
            return openai_error(503, "The admin API is disabled: no admin token reference is configured.",
                                "service_unavailable", "admin_disabled")
        try:
            expected = read_secret_ref(admin_token_ref)
        except SecretUnavailable as exc:
            return openai_error(503, f"The admin token is unavailable: {exc}.", "service_unavailable",
                                "admin_token_unavailable")
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return _unauthorized("Missing bearer token for the gateway admin API.", "missing_token")
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            return _unauthorized("Wrong bearer token for the gateway admin API.", "wrong_token")
        return None

    async def admin_list(request: Request) -> Response:
        if denied := refused(request):
            return denied
        return JSONResponse({"data": [table.status(m).model_dump(mode="json") for m in table.models()]})

    async def admin_route(request: Request) -> Response:
        if denied := refused(request):
            return denied
        name = request.path_params["model"]
        if request.method == "GET":
            status = table.status(name)
            if status is None:
                return openai_error(404, f"The gateway has no routes for model {name!r}.",
                                    "invalid_request_error", "routes_not_found", "model")
            return JSONResponse(status.model_dump(mode="json"))
        if request.method == "DELETE":
            return JSONResponse({"model_name": name, "deleted": table.delete(name)})
        try:
            body = json.loads(await request.body() or b"null")
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
            routes = EndpointRoutes.model_validate(body)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
            return openai_error(422, f"Invalid routes: {problems}", "invalid_request_error", "invalid_routes")
        table.set(routes)
        log.info("gateway routes set", model=name, backends={b.id: b.weight for b in routes.backends})
        return JSONResponse(table.status(name).model_dump(mode="json"))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "endpoints": len(table.models())})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        message = "Unknown URL." if status == 404 else f"Method {request.method} is not allowed here."
        return openai_error(status, f"{message} ({request.method} {request.url.path})", "invalid_request_error",
                            "unknown_url" if status == 404 else "method_not_allowed")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        clients["http"] = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=30.0, pool=10.0),
            limits=httpx.Limits(max_connections=1024, max_keepalive_connections=256, keepalive_expiry=60),
            # Environment proxies must not capture traffic to cluster frontends.
            trust_env=False, follow_redirects=False)
        task = asyncio.create_task(prober())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await clients.pop("http").aclose()

    app = Starlette(routes=[
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", metrics.observed(completions), methods=["POST"]),
        Route("/v1/completions", metrics.observed(completions), methods=["POST"]),
        Route("/admin/routes", admin_list, methods=["GET"]),
        Route("/admin/routes/{model:path}", admin_route, methods=["GET", "PUT", "DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics.page, methods=["GET"]),
    ], exception_handlers={HTTPException: not_found}, lifespan=lifespan)
    app.state.table = table
    app.state.metrics = metrics
    return app


def _model_card(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "wingsmith"}


def _unknown_model(name: str) -> JSONResponse:
    return openai_error(404, f"The model `{name}` does not exist or is not routed by this gateway.",
                        "invalid_request_error", "model_not_found", "model")


def refused_by_door(refusal: Refusal) -> JSONResponse:
    resp = openai_error(refusal.status, refusal.message, refusal.kind, refusal.code)
    if refusal.status == 401:
        resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


def _unauthorized(message: str, code: str) -> JSONResponse:
    resp = openai_error(401, message, "authentication_error", code)
    resp.headers["WWW-Authenticate"] = "Bearer"
    return resp
