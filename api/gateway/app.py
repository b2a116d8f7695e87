"""The local gateway: an OpenAI-compatible router from one model name to the deployments serving it.

    /v1/models, /v1/models/{model}        the endpoint names it routes (with client keys on: a key)
    /v1/chat/completions, /v1/completions  proxied to one of the endpoint's backends, by weight
    /admin/routes[/{model}]                GET / PUT / DELETE, bearer token (read per call from a reference)
    /healthz
    /readyz                                with a routes source: 503 until the first pull or push landed
    /metrics                               Prometheus (api/gateway/metrics.py); with client keys on,
                                           the admin token (the traffic it shows is the operator's)

A request that fails before any byte reached the client (connection refused, timeout, a 5xx or
404 answer, a stream that broke before its first byte) is retried once on another backend, and
the failing backend cools down: it gets no new requests until a background probe of its
`/v1/models` lists the model again. Bodies are relayed chunk by chunk as they arrive.

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

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from api.body_limit import BodyLimit, RequestTooLarge
from api.gateway.guard import DEFAULT_MAX_BODY_BYTES, ClientKeys, Refusal, too_large_message
from api.gateway.metrics import ENDPOINT_KEY, GatewayMetrics
from api.gateway.table import BackendState, RouteTable, log
from api.gateway.upstream import UpstreamError, UpstreamResponse, Upstreams
from wingsmith.gateway.routes import EndpointRoutes
from wingsmith.secrets import SecretUnavailable, read_secret_ref

BACKEND_HEADER = "x-wingsmith-backend"
# Answers that say "this backend cannot serve this request now" rather than "the request is bad".
# A 404 counts: the route says the backend serves the model, so not finding it is the backend's fault.
RETRY_STATUSES = frozenset({404, 408, 429, 500, 502, 503, 504})
# 429 means busy, not broken: try elsewhere but keep sending it traffic.
NO_COOLDOWN_STATUSES = frozenset({429})
_FORWARD_REQUEST_HEADERS = frozenset({b"content-type", b"accept", b"accept-encoding", b"x-request-id", b"traceparent"})
# A non-streamed answer up to this size is read whole before it is relayed: one plain response, and
# a backend that dies mid-answer can still be retried. Larger or streamed answers are relayed as they come.
_BUFFER_UP_TO = 1 << 20
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
    saved_at_start = bool(table.models())
    metrics = GatewayMetrics(table, BACKEND_HEADER)
    created = int(time.time())
    upstreams = Upstreams(connect_timeout=connect_timeout, read_timeout=read_timeout)

    # ---- proxy -----------------------------------------------------------------------------------

    async def models(request: Request) -> Response:
        try:
            listed = client_keys.callable_models(request, table.models())
        except Refusal as refusal:
            return refused_by_door(refusal)
        return JSONResponse({"object": "list", "data": [_model_card(m, created) for m in listed]})

    async def model(request: Request) -> Response:
        name = request.path_params["model"]
        try:
            client_keys.check(request, name)
        except Refusal as refusal:
            return refused_by_door(refusal)
        if table.get(name) is None:
            return _unknown_model(name)
        return JSONResponse(_model_card(name, created))

    async def completions(request: Request) -> Response:
        try:
            raw = await request.body()  # at most max_body_bytes: BodyLimit counts what arrives
        except RequestTooLarge as exc:
            return too_large(exc.limit)
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
        request.scope[ENDPOINT_KEY] = name
        headers = _forwarded_headers(request.scope["headers"])
        tried: set[str] = set()
        failures: list[str] = []
        held: tuple[UpstreamResponse, BackendState, bytes | None] | None = None
        for _ in range(2):  # the first try and at most one retry on another backend
            state = table.pick(name, exclude=tried)
            if state is None:
                break
            if tried:
                metrics.retried(name)
            tried.add(state.backend.id)
            if held is not None:
                _release(held[0], held[1])
                held = None
            outcome = await _attempt(state, request.url.path, raw, body, name, headers)
            if isinstance(outcome, str):
                failures.append(f"{state.backend.id}: {outcome}")
                continue
            # The answer's bytes get their own name: `body` is the request, resent on a retry.
            resp, answer = outcome
            if resp.status in RETRY_STATUSES:
                failures.append(f"{state.backend.id}: HTTP {resp.status}")
                if resp.status not in NO_COOLDOWN_STATUSES:
                    table.failed(state, f"HTTP {resp.status}")
                held = (resp, state, answer)  # relayed as is if no other backend does better
                continue
            return _relay(resp, state, answer)
        if held is not None:
            return _relay(*held)
        if not tried:
            return openai_error(503, f"No backend is taking requests for model {name!r} right now.",
                                "service_unavailable", "no_backend")
        log.warning("gateway request failed on every backend tried", model=name, failures=failures)
        # Which backends and why is for the operator (the log above): a client learns no internal address.
        return openai_error(502, f"Every backend tried for model {name!r} failed ({len(failures)} tried); "
                                 "the gateway's log says why.", "api_error", "backend_failed")

    async def _attempt(state: BackendState, path: str, raw: bytes, body: dict[str, Any], name: str,
                       headers: list[tuple[bytes, bytes]]) -> tuple[UpstreamResponse, bytes | None] | str:
        """Send to one backend and read its answer: whole when it is small and not streamed, else up
        to its first body chunk (so a backend that answers 200 and dies is still retried). Returns the
        answer and its body (None: still to be streamed); a string says why it failed."""
        backend = state.backend
        payload = raw if backend.served_model is None else json.dumps({**body, "model": backend.served_model}).encode()
        state.in_flight += 1
        state.requests += 1
        resp: UpstreamResponse | None = None
        try:
            pool, prefix = upstreams.for_url(backend.url)
            resp = await pool.request("POST", prefix + path, headers, payload)
            if _small_and_whole(resp):
                return resp, await resp.read()
            return resp, None
        except UpstreamError as exc:
            if resp is not None:
                resp.release()
            state.in_flight -= 1
            table.failed(state, exc.reason)
            return exc.reason

    def _release(resp: UpstreamResponse, state: BackendState) -> None:
        state.in_flight -= 1
        resp.release()

    def _relay(resp: UpstreamResponse, state: BackendState, body: bytes | None) -> Response:
        if body is not None:
            _release(resp, state)
            whole = Response(body, status_code=resp.status)
            # The backend's headers as they came (bytes, no decoding and re-encoding), but our own length.
            whole.raw_headers = [(k, v) for k, v in _relayed_headers(resp, state) if k != b"content-length"]
            whole.raw_headers.append((b"content-length", str(len(body)).encode()))
            return whole
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in _relayed_headers(resp, state)}

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in resp.chunks():
                    yield chunk
            except UpstreamError as exc:
                # Bytes already went out: no retry is possible; abort so the client sees the break.
                table.failed(state, f"stream broke: {exc.reason}")
                raise
            finally:
                _release(resp, state)

        return StreamingResponse(chunks(), status_code=resp.status, headers=headers)

    # ---- probing cooled-down backends ------------------------------------------------------------

    async def probe(model_name: str, state: BackendState) -> None:
        backend = state.backend
        state.next_probe = time.monotonic() + probe_interval
        wanted = backend.model_for(model_name)
        try:
            pool, prefix = upstreams.for_url(backend.url)
            resp = await pool.request("GET", prefix + "/v1/models", [], read_timeout=probe_timeout)
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
            table.recovered(state)
        else:
            state.last_error = (f"probe: HTTP {resp.status}" if resp.status != 200
                                else f"probe: {wanted!r} not listed")

    async def prober() -> None:
        tick = min(0.05, probe_interval)
        while True:
            due = table.due_probes(time.monotonic())
            if due:
                await asyncio.gather(*(probe(m, s) for m, s in due), return_exceptions=True)
            await asyncio.sleep(tick)

    # ---- admin -----------------------------------------------------------------------------------

    async def forget_unrouted() -> None:
        """Close the connections to backends no route names any more (in-flight answers finish first:
        their connections are closed when released)."""
        await upstreams.forget({b.url for routes in table.all() for b in routes.backends})

    def refused(request: Request) -> Response | None:
        if admin_token_ref is None:
            return openai_error(503, "The admin API is disabled: no admin token reference is configured.",
                                "service_unavailable", "admin_disabled")
        try:
            expected = read_secret_ref(admin_token_ref)
        except SecretUnavailable as exc:
            log.error("gateway admin token unavailable", reason=str(exc))
            return openai_error(503, "The admin token cannot be read; the gateway's log says why.",
                                "service_unavailable", "admin_token_unavailable")
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return _unauthorized("Missing bearer token for the gateway admin API.", "missing_token")
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            return _unauthorized("Wrong bearer token for the gateway admin API.", "wrong_token")
        return None

    async def admin_list(request: Request) -> Response:
        if denied := refused(request):
            return denied
        return JSONResponse({"data": [status.model_dump(mode="json") for status in table.statuses()]})

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
            deleted = table.delete(name)
            app.state.pushed = True
            await forget_unrouted()
            return JSONResponse({"model_name": name, "deleted": deleted})
        try:
            body = json.loads(await request.body() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return openai_error(400, "The request body is not valid JSON.", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return openai_error(400, "The routes must be a JSON object with model_name and backends.",
                                "invalid_request_error", "invalid_routes")
        body.setdefault("model_name", name)
        if body["model_name"] != name:
            return openai_error(400,
                                f"model_name {body['model_name']!r} in the body differs from {name!r} in the path.",
                                "invalid_request_error", "model_name_mismatch", "model_name")
        try:
            routes = EndpointRoutes.model_validate(body)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
            return openai_error(422, f"Invalid routes: {problems}", "invalid_request_error", "invalid_routes")
        status = table.set(routes)
        app.state.pushed = True
        await forget_unrouted()
        log.info("gateway routes set", model=name, backends={b.id: b.weight for b in routes.backends})
        return JSONResponse(status.model_dump(mode="json"))

    async def metrics_page(request: Request) -> Response:
        # Open like any exporter while the endpoints are open; once they need keys, the traffic by
        # endpoint and backend is the operator's: the admin token (Prometheus: `authorization`).
        if client_keys.on and (denied := refused(request)):
            return denied
        return await metrics.page(request)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "endpoints": len(table.models())})

    async def readyz(request: Request) -> Response:
        # A new replica that pulls its routes knows none until its first pull: it would answer 404 for
        # every model, so it takes no traffic until a pull or a push landed. A table saved by an
        # earlier run of this replica (its state dir) is served as after a pull: the one it last had.
        sync = app.state.routes_sync
        if sync is None or sync.last_pulled is not None or app.state.pushed or saved_at_start:
            return JSONResponse({"status": "ready", "endpoints": len(table.models())})
        return openai_error(503, "The gateway has not received its routes yet: its first pull from the route "
                                 "source has not been answered.", "service_unavailable", "routes_not_loaded")

    async def not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, RequestTooLarge):  # a body read by a handler other than completions
            return too_large(exc.limit)
        status = getattr(exc, "status_code", 404)
        message = "Unknown URL." if status == 404 else f"Method {request.method} is not allowed here."
        return openai_error(status, f"{message} ({request.method} {request.url.path})", "invalid_request_error",
                            "unknown_url" if status == 404 else "method_not_allowed")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(prober())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await upstreams.aclose()

    app = Starlette(routes=[
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", metrics.observed(completions), methods=["POST"]),
        Route("/v1/completions", metrics.observed(completions), methods=["POST"]),
        Route("/admin/routes", admin_list, methods=["GET"]),
        Route("/admin/routes/{model:path}", admin_route, methods=["GET", "PUT", "DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ], exception_handlers={HTTPException: not_found}, lifespan=lifespan,
        # Before routing, auth and parsing: no route reads more than this from a client.
        middleware=[Middleware(BodyLimit, limit=max_body_bytes, refuse=too_large)])
    app.state.table = table
    app.state.routes_sync = None  # set by wingsmith.gateway.routes_sync.attach
    app.state.pushed = False
    app.state.metrics = metrics
    app.state.forget_unrouted = forget_unrouted  # for routes that change by a pull (routes_sync)
    return app


_HOP_BY_HOP_BYTES = frozenset(h.encode() for h in _HOP_BY_HOP)


def _forwarded_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request headers a backend gets, as the server parsed them (ASGI lower-cases names): the
    raw bytes, first occurrence of each, none empty. One pass, no decoding and re-encoding."""
    picked: dict[bytes, bytes] = {}
    for name, value in raw:
        if name in _FORWARD_REQUEST_HEADERS and value and name not in picked:
            picked[name] = value
    return list(picked.items())


def _relayed_headers(resp: UpstreamResponse, state: BackendState) -> list[tuple[bytes, bytes]]:
    """The backend's answer headers minus hop-by-hop ones, names lower-cased, plus which backend answered."""
    headers = [(k.lower(), v) for k, v in resp.headers if k.lower() not in _HOP_BY_HOP_BYTES]
    headers.append((BACKEND_HEADER.encode(), state.backend.id.encode()))
    return headers


def _small_and_whole(resp: UpstreamResponse) -> bool:
    """A non-streamed answer of known, small size (or one already read to its end)."""
    if resp.complete:
        return True
    length = None
    for name, value in resp.headers:
        lowered = name.lower()
        if lowered == b"content-type" and value.startswith(b"text/event-stream"):
            return False
        if lowered == b"content-length":
            length = int(value) if value.isdigit() else None
    return length is not None and length <= _BUFFER_UP_TO


def _model_card(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "wingsmith"}


def _unknown_model(name: str) -> JSONResponse:
    return openai_error(404, f"The model `{name}` does not exist or is not routed by this gateway.",
                        "invalid_request_error", "model_not_found", "model")


def too_large(limit: int) -> JSONResponse:
    return openai_error(413, too_large_message(limit), "invalid_request_error", "request_too_large")


def refused_by_door(refusal: Refusal) -> JSONResponse:
    resp = openai_error(refusal.status, refusal.message, refusal.kind, refusal.code)
    if refusal.status == 401:
        resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


def _unauthorized(message: str, code: str) -> JSONResponse:
    resp = openai_error(401, message, "authentication_error", code)
    resp.headers["WWW-Authenticate"] = "Bearer"
    return resp
