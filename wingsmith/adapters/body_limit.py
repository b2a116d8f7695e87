"""A cap on the size of request bodies, enforced where the bytes arrive: in ASGI middleware, before
authentication and routing.

FastAPI reads a whole body before it resolves a route's dependencies (the token check among them),
so without a cap anyone could make the API hold hundreds of megabytes in memory without a token. A
body that declares a larger `Content-Length` is refused before a byte of it is read; a body that
does not declare its size (chunked) is counted as it is read and refused the moment it passes the
limit. Either way the caller gets 413 in the app's own error shape.

Both the API and the gateway use it, each with its own limit and its own way of saying no.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class RequestTooLarge(HTTPException):
    """Raised from `receive()` when a body that did not declare its size passes the limit. It is an
    HTTPException so that the frameworks' own body readers pass it on unchanged to the app's error
    handlers (FastAPI turns any other exception met while reading a body into a 400)."""

    def __init__(self, limit: int):
        super().__init__(413, detail=f"the request body is larger than the {limit} bytes this server accepts")
        self.limit = limit


class BodyLimit:
    """ASGI middleware: at most `limit` bytes of request body (`larger` lifts it for path prefixes
    whose handlers read the body themselves, after checking who calls). `refuse(limit)` is the app's
    413 answer for a body refused by its declared size."""

    def __init__(self, app: ASGIApp, *, limit: int, refuse: Callable[[int], ASGIApp],
                 larger: dict[str, int] | None = None):
        self.app = app
        self.limit = limit
        self.refuse = refuse
        self.larger = larger or {}

    def limit_for(self, path: str) -> int:
        if not self.larger:  # the gateway's case, on every proxied request
            return self.limit
        return max([self.limit, *(n for prefix, n in self.larger.items() if path.startswith(prefix))])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await self.refuse(limit)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestTooLarge(limit)
            return message

        await self.app(scope, counted, send)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None  # the HTTP server refuses a malformed one
    return None
