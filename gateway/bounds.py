"""How much a slow or hostile client can hold of the gateway, and for how long (issue 47).

The server side (uvicorn, gateway/serving.py) bounds a request's head: its bytes, its count of
headers, the time it may take to arrive, and the connections one client address may keep open.
This module bounds the body, in ASGI middleware around the whole app, counting the bytes of
`receive()`, since uvicorn has no deadline for a body and holds no account of bytes across connections:

- a deadline for the whole body, from the moment its head is complete (so `Expect: 100-continue`
  followed by nothing, or a body that stops at 99 %, is answered 408 and its connection closed);
- a budget of body bytes held across all requests at once: a request that would take the gateway past
  it is answered 503 (`gateway_busy`, `Retry-After: 1`), before a byte is read when its declared length
  does not fit. The bytes a request read count until its answer is done (the proxy keeps its body to
  retry it on another backend);
- an answer given before its request's body was read to its end closes the connection
  (`connection: close`): what follows on the wire is the rest of a body nobody will read.

Per connection, a request holds at most the body limit (wingsmith/adapters/body_limit.py, `--max-body-bytes`) plus
what uvicorn buffers before it pauses reading (64 KB); a pipelined request waits, unread, behind the
answer in flight.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.answers import openai_error

HEAD_TIMEOUT_ENV = "WINGSMITH_GATEWAY_HEAD_TIMEOUT"
BODY_TIMEOUT_ENV = "WINGSMITH_GATEWAY_BODY_TIMEOUT"
MAX_HELD_ENV = "WINGSMITH_GATEWAY_MAX_HELD_BYTES"
PER_CLIENT_ENV = "WINGSMITH_GATEWAY_MAX_CONNECTIONS_PER_CLIENT"
MAX_CONNECTIONS_ENV = "WINGSMITH_GATEWAY_MAX_CONNECTIONS"
KEEP_ALIVE_ENV = "WINGSMITH_GATEWAY_KEEP_ALIVE_TIMEOUT"

_CLOSE = (b"connection", b"close")


@dataclass(frozen=True)
class Bounds:
    """The gateway's bounds on clients, each a setting (docs/configuration.md says why each default)."""

    head_timeout: float = 10.0  # seconds from a request's first byte (or a new connection) to its last header
    body_timeout: float = 60.0  # seconds from a request's head to its body's last byte
    max_held_bytes: int = 32 * 1024 * 1024  # request body bytes held across all connections at once
    max_connections_per_client: int = 256  # open connections from one client address; 0: no cap
    max_connections: int = 8192  # open connections and requests in flight; past it uvicorn answers 503
    keep_alive_timeout: float = 120.0  # seconds an idle kept-alive connection stays open

    @classmethod
    def from_env(cls) -> Bounds:
        """The defaults, each replaced by its environment variable when set."""
        default = cls()

        def number(env: str, fallback: float) -> float:
            text = os.environ.get(env)
            return float(text) if text else fallback

        return cls(head_timeout=number(HEAD_TIMEOUT_ENV, default.head_timeout),
                   body_timeout=number(BODY_TIMEOUT_ENV, default.body_timeout),
                   max_held_bytes=int(number(MAX_HELD_ENV, default.max_held_bytes)),
                   max_connections_per_client=int(number(PER_CLIENT_ENV, default.max_connections_per_client)),
                   max_connections=int(number(MAX_CONNECTIONS_ENV, default.max_connections)),
                   keep_alive_timeout=number(KEEP_ALIVE_ENV, default.keep_alive_timeout))

    def __post_init__(self) -> None:
        for name in ("head_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {getattr(self, name)!r}")
        if self.max_held_bytes < 1 or self.max_connections < 1 or self.max_connections_per_client < 0:
            raise ValueError("max_held_bytes and max_connections must be at least 1, "
                             "max_connections_per_client at least 0")


class BodyRefused(HTTPException):
    """Raised from `receive()` when a body is late or does not fit; an HTTPException, so that
    Starlette's body readers pass it on to the app's error handler unchanged (as wingsmith/adapters/body_limit.py's)."""

    def __init__(self, status: int, message: str, kind: str, code: str, headers: dict[str, str] | None = None):
        super().__init__(status, detail=message)
        self.message, self.kind, self.code, self.extra = message, kind, code, headers or {}

    def answer(self) -> JSONResponse:
        resp = openai_error(self.status_code, self.message, self.kind, self.code)
        resp.headers.update(self.extra)
        return resp


def body_too_slow(seconds: float) -> BodyRefused:
    return BodyRefused(408, f"The request body did not arrive within {seconds:g} seconds.",
                       "invalid_request_error", "request_timeout")


def gateway_busy() -> BodyRefused:
    return BodyRefused(503, "The gateway holds as many request bodies as it may right now; retry shortly.",
                       "service_unavailable", "gateway_busy", {"Retry-After": "1"})


class BodyBounds:
    """ASGI middleware: the body deadline and the budget of bytes held (module docstring)."""

    def __init__(self, app: ASGIApp, *, body_timeout: float, max_held_bytes: int, max_body_bytes: int | None = None):
        self.app = app
        self.body_timeout, self.max_held_bytes = body_timeout, max_held_bytes
        # A body declared past the per-request limit is the body limit's to refuse (413: never, not "busy").
        self.max_body_bytes = max_body_bytes
        self.held = 0  # body bytes read by requests still being answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, body_follows = _framing(scope)
        too_large = declared is not None and self.max_body_bytes is not None and declared > self.max_body_bytes
        if declared is not None and not too_large and declared > self.max_held_bytes - self.held:
            await _refuse(gateway_busy(), scope, receive, send)
            return
        held = 0
        whole = not body_follows  # the request's body was read to its end (or it has none)
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        started = False

        async def bounded_receive() -> Message:
            nonlocal held, whole
            if whole:  # after the body: only a disconnect can come, and waiting for it is not holding
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise body_too_slow(self.body_timeout) from None
            if message["type"] == "http.request":
                size = len(message.get("body", b""))
                if self.held + size > self.max_held_bytes:
                    raise gateway_busy()
                self.held += size
                held += size
                whole = not message.get("more_body", False)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not whole:
                    message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
            await send(message)

        try:
            await self.app(scope, bounded_receive, closing_send)
        except BodyRefused as refusal:  # raised past an app that did not answer it itself
            if started:
                raise
            await refusal.answer()(scope, receive, closing_send)
        finally:
            self.held -= held


async def _refuse(refusal: BodyRefused, scope: Scope, receive: Receive, send: Send) -> None:
    resp = refusal.answer()
    resp.headers["connection"] = "close"
    await resp(scope, receive, send)


def _framing(scope: Scope) -> tuple[int | None, bool]:
    """The declared body length (None: not declared) and whether a body follows the head at all."""
    declared: int | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            declared = int(value) if value.isdigit() else None
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked or bool(declared)
