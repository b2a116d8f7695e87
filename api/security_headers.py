"""Headers that tell a browser what a response may do, on every response the API sends.

The console shows text that comes from outside the plane (model cards from the Hub, upstream
recipes, cluster names), so even a mistake in escaping must not run script: its pages allow scripts
and styles from the plane's own files only (no inline script, no `on*=` handlers, no inline
styles), can be framed by no one (clickjacking on the approve button) and send no referrer to
other sites. JSON answers may load nothing at all. The interactive API reference (/docs, /redoc)
is FastAPI's page, built with inline script, so it keeps only the framing and sniffing rules.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
API_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
DOCS_CSP = "frame-ancestors 'none'"
DOCS_PATHS = ("/docs", "/redoc")

_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"referrer-policy", b"same-origin")]


def policy_for(path: str) -> str:
    if path == "/console" or path.startswith("/console/"):
        return CONSOLE_CSP
    if path.startswith(DOCS_PATHS):
        return DOCS_CSP
    return API_CSP


class SecurityHeaders:
    """ASGI middleware: adds the headers above to every HTTP response (a handler's own value wins)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = [*_ALWAYS, (b"content-security-policy", policy_for(scope.get("path", "")).encode())]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in added if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
