"""The gateway's hot path: `POST /v1/chat/completions` and `POST /v1/completions`, proxied to one of
the endpoint's backends, as a plain ASGI app.

Plain ASGI because this path is all the gateway's traffic and a framework's per-request layers
(routing, request and response objects, exception middleware, a task group per streamed answer)
cost more than the proxying: here a request is its body read from `receive`, one JSON parse for the
model name, a weighted pick, one request on a kept-alive backend connection (aiohttp,
gateway/upstream.py) and two `send`s back. Everything else the gateway serves goes through
Starlette (gateway/app.py).

With client keys on, the caller's key is checked before a byte of the body is read (no `100 Continue`
is sent to a caller the door turns away): a key that opens no routed endpoint is refused there, unless
some routed endpoint is open to all (the body names the model, so it is read, and the key checked again
against that model).

A request that fails before any byte reached the client (connection refused, timeout, a 5xx or
404 answer) is retried once on another backend, and the failing backend cools down (table.py).
Streamed answers are relayed as each read from the backend arrives: no buffering, one `send` per
read. A stream that breaks after bytes went out cannot be retried: the client's connection is
aborted so the client sees the break, never a quiet truncation. A client that goes away mid-stream
closes the backend connection, which ends the generation there.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from opentelemetry.trace import Span
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from gateway.answers import openai_error, refused_by_door, too_large, unknown_model
from gateway.bounds import BodyRefused
from gateway.guard import ClientKeys, Refusal
from gateway.metrics import NO_BACKEND, UNROUTED, GatewayMetrics
from gateway.table import BackendState, RouteTable, log
from gateway.tracing import RequestTracer
from gateway.upstream import UpstreamError, UpstreamResponse, Upstreams
from wingsmith.adapters.body_limit import RequestTooLarge

BACKEND_HEADER = "x-wingsmith-backend"
PROXY_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})


def proxied(scope: Scope) -> bool:
    """A request the proxy answers: a POST to one of its paths."""
    return scope["type"] == "http" and scope["path"] in PROXY_PATHS and scope["method"] == "POST"

# Answers that say "this backend cannot serve this request now" rather than "the request is bad".
# A 404 counts: the route says the backend serves the model, so not finding it is the backend's fault.
RETRY_STATUSES = frozenset({404, 408, 429, 500, 502, 503, 504})
# 429 means busy, not broken: try elsewhere but keep sending it traffic.
NO_COOLDOWN_STATUSES = frozenset({429})
_FORWARD_REQUEST_HEADERS = frozenset({b"content-type", b"accept", b"accept-encoding", b"x-request-id",
                                      b"traceparent", b"tracestate"})
# A non-streamed answer up to this size is read whole before it is relayed: one plain response, and
# a backend that dies mid-answer can still be retried. Larger or streamed answers are relayed as they come.
_BUFFER_UP_TO = 1 << 20
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                         b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"date", b"server"})
_BACKEND_HEADER = BACKEND_HEADER.encode()
_END = {"type": "http.response.body", "body": b"", "more_body": False}


class _Outcome:
    """What one request came to, for its metrics and span: set as the proxy decides."""

    __slots__ = ("endpoint", "backend", "code", "started")

    def __init__(self) -> None:
        self.endpoint, self.backend = UNROUTED, NO_BACKEND
        self.code: int | None = None  # None: the client went away before anything was answered
        self.started = False  # the answer's head went out: it can no longer be replaced


class Proxy:
    def __init__(self, table: RouteTable, upstreams: Upstreams, metrics: GatewayMetrics, client_keys: ClientKeys,
                 tracer: RequestTracer | None = None):
        self.table, self.upstreams, self.metrics = table, upstreams, metrics
        self.client_keys, self.tracer = client_keys, tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request, ASGI: the body is read from `receive`."""
        start = time.perf_counter()
        span = self.tracer.start(scope["method"], scope["path"], scope["headers"]) if self.tracer else None
        out = _Outcome()
        try:
            await self._proxy(scope, receive, send, start, span, out)
        except Exception:
            if out.started:
                raise  # the server aborts the client's connection: it sees the break
            log.exception("gateway request failed", path=scope["path"])
            out.code = 500
            await openai_error(500, "The gateway failed this request; its log says why.", "api_error",
                               "gateway_error")(scope, receive, send)
        finally:
            if out.code is not None:
                self.metrics.answered(out.endpoint, out.backend, out.code, start)
            if span is not None:
                RequestTracer.end(span, out.code, out.endpoint, out.backend)

    async def _proxy(self, scope: Scope, receive: Receive, send: Send, start: float, span: Span | None,
                     out: _Outcome) -> None:
        admitted = await self._admit(scope, receive)
        if admitted is None:
            return  # the client went away before its request was whole
        if isinstance(admitted, JSONResponse):
            return await _answer(admitted, scope, receive, send, out)
        raw, body, name = admitted
        out.endpoint = name
        headers = _forwarded_headers(scope["headers"])
        if span is not None:
            headers = RequestTracer.forwarded(span, headers)
        await self._route(name, raw, body, headers, scope, receive, send, start, out)

    async def _admit(self, scope: Scope, receive: Receive) -> tuple[bytes, dict[str, Any], str] | JSONResponse | None:
        """The request's body, parsed, and the endpoint it names; or the gateway's answer refusing it;
        None when the client went away first."""
        if self.client_keys.on:
            try:  # before the body: a caller the door turns away sends none of it
                self.client_keys.check_caller(_header(scope, b"authorization"), self.table.models())
            except Refusal as refusal:
                return refused_by_door(refusal)
        try:
            raw = await _body(receive)  # at most the body limit: BodyLimit counts what arrives
        except RequestTooLarge as exc:
            return too_large(exc.limit)
        except BodyRefused as refusal:  # too slow, or past the bytes the gateway may hold
            return refusal.answer()
        if raw is None:
            return None
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not text, or nested past the parser's depth
            return openai_error(400, "The request body is not valid JSON.", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return openai_error(400, "The request body must be a JSON object.", "invalid_request_error",
                                "invalid_json")
        name = body.get("model")
        if not isinstance(name, str) or not name:
            return openai_error(400, "You must provide a model parameter.", "invalid_request_error",
                                "missing_model", "model")
        try:
            self.client_keys.check(_header(scope, b"authorization") if self.client_keys.on else "", name)
        except Refusal as refusal:
            return refused_by_door(refusal)
        if self.table.get(name) is None:
            return unknown_model(name)
        return raw, body, name

    async def _route(self, name: str, raw: bytes, body: dict[str, Any], headers: list[tuple[bytes, bytes]],
                     scope: Scope, receive: Receive, send: Send, start: float, out: _Outcome) -> None:
        """To one of the endpoint's backends by weight, and at most once more to another when the first
        fails before answering or answers a status worth retrying elsewhere."""
        tried: set[str] = set()
        failures: list[str] = []
        held: tuple[UpstreamResponse, BackendState, bytes | None] | None = None
        for _ in range(2):  # the first try and at most one retry on another backend
            state = self.table.pick(name, exclude=tried)
            if state is None:
                break
            if tried:
                self.metrics.retried(name)
            tried.add(state.backend.id)
            if held is not None:
                _release(held[0], held[1])
                held = None
            outcome = await self._attempt(state, scope["path"], raw, body, headers)
            if isinstance(outcome, str):
                failures.append(f"{state.backend.id}: {outcome}")
                continue
            # The answer's bytes get their own name: `body` is the request, resent on a retry.
            resp, answer = outcome
            if resp.status in RETRY_STATUSES:
                failures.append(f"{state.backend.id}: HTTP {resp.status}")
                if resp.status not in NO_COOLDOWN_STATUSES:
                    self.table.failed(state, f"HTTP {resp.status}")
                held = (resp, state, answer)  # relayed as is if no other backend does better
                continue
            return await self._relay(resp, state, answer, receive, send, start, out)
        if held is not None:
            return await self._relay(*held, receive, send, start, out)
        if not tried:
            return await _answer(openai_error(503, f"No backend is taking requests for model {name!r} right now.",
                                              "service_unavailable", "no_backend"), scope, receive, send, out)
        log.warning("gateway request failed on every backend tried", model=name, failures=failures)
        # Which backends and why is for the operator (the log above): a client learns no internal address.
        return await _answer(openai_error(502, f"Every backend tried for model {name!r} failed ({len(failures)} "
                                               "tried); the gateway's log says why.", "api_error", "backend_failed"),
                             scope, receive, send, out)

    async def _attempt(self, state: BackendState, path: str, raw: bytes, body: dict[str, Any],
                       headers: list[tuple[bytes, bytes]]) -> tuple[UpstreamResponse, bytes | None] | str:
        """Send to one backend and read its answer: whole when it is small and not streamed, else up
        to its head. Returns the answer and its body (None: still to be streamed); a string says why
        it failed."""
        backend = state.backend
        payload = raw if backend.served_model is None else json.dumps({**body, "model": backend.served_model}).encode()
        state.in_flight += 1
        state.requests += 1
        resp: UpstreamResponse | None = None
        try:
            pool, prefix = self.upstreams.for_url(backend.url)
            resp = await pool.request("POST", prefix + path, headers, payload, whole_up_to=_BUFFER_UP_TO)
            # Small answers come whole (or a stream that was already over); the rest is relayed as it comes.
            return (resp, await resp.read()) if resp.complete else (resp, None)
        except UpstreamError as exc:
            if resp is not None:
                resp.release()
            state.in_flight -= 1
            self.table.failed(state, exc.reason)
            return exc.reason

    async def _relay(self, resp: UpstreamResponse, state: BackendState, body: bytes | None, receive: Receive,
                     send: Send, start: float, out: _Outcome) -> None:
        out.backend, out.code = state.backend.id, resp.status
        headers = _relayed_headers(resp, state, None if body is None else len(body))
        if body is not None:
            # The answer first, the bookkeeping after: the client is waiting, the pool and metrics are not.
            out.started = True
            try:
                await send({"type": "http.response.start", "status": resp.status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
            finally:
                _release(resp, state)
            self.metrics.first_byte(out.endpoint, out.backend, start)  # it left with the head
            return
        gone = asyncio.ensure_future(_abort_when_gone(receive, resp))
        try:
            out.started = True
            await send({"type": "http.response.start", "status": resp.status, "headers": headers})
            first = True
            while chunk := await resp.next_chunk():
                if first:
                    self.metrics.first_byte(out.endpoint, out.backend, start)
                    first = False
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send(_END)
        except UpstreamError as exc:
            if gone.done() and not gone.cancelled():
                return  # the client left and its backend connection was closed for it: nobody's fault
            # Bytes already went out: no retry is possible; abort so the client sees the break.
            self.table.failed(state, f"stream broke: {exc.reason}")
            raise
        finally:
            gone.cancel()
            _release(resp, state)


async def _abort_when_gone(receive: Receive, resp: UpstreamResponse) -> None:
    """Close the backend connection of a streamed answer once its client disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass
    resp.abort()


async def _answer(response: Any, scope: Scope, receive: Receive, send: Send, out: _Outcome) -> None:
    """One of the gateway's own answers (a Starlette response)."""
    out.code = response.status_code
    out.started = True
    await response(scope, receive, send)


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    message = await receive()
    if message["type"] != "http.request":
        return None
    if not message.get("more_body", False):
        return message.get("body", b"")
    parts = [message.get("body", b"")]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return ""


def _release(resp: UpstreamResponse, state: BackendState) -> None:
    state.in_flight -= 1
    resp.release()


def _forwarded_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request headers a backend gets, as the server parsed them (ASGI lower-cases names): the
    raw bytes, first occurrence of each, none empty. One pass, no decoding and re-encoding."""
    picked: dict[bytes, bytes] = {}
    for name, value in raw:
        if name in _FORWARD_REQUEST_HEADERS and value and name not in picked:
            picked[name] = value
    return list(picked.items())


def _relayed_headers(resp: UpstreamResponse, state: BackendState, length: int | None) -> list[tuple[bytes, bytes]]:
    """The backend's answer headers minus hop-by-hop ones, names lower-cased, plus which backend answered;
    with `length` (an answer read whole), that length instead of the backend's. The bytes as they came:
    no decoding and re-encoding."""
    headers = []
    for name, value in resp.headers:
        lowered = name.lower()
        if lowered not in _HOP_BY_HOP and (length is None or lowered != b"content-length"):
            headers.append((lowered, value))
    headers.append((_BACKEND_HEADER, state.backend.id.encode()))
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return headers

