"""The gateway's HTTP/1.1 server: a small ASGI server made for a proxy's hot path.

Why not uvicorn, which served the gateway before: a proxied chat is one small request and one small
answer, and most of the time the gateway added to it was the server's own per-request work, not the
proxying: a request object, a task, a keep-alive timer and an event per request, a regular expression
per answer header, and the answer's head and body written in two system calls (two TCP segments the
client wakes for). Here a request is parsed by httptools (C) as its bytes arrive, its scope is built
once, and an answer's head goes out in the same write as its first body bytes (bench/report.py,
"gateway": the measure this is judged by). A chat whose whole body is in hand, within the body limit,
goes straight to the proxy (`Proxy.serve`), and an answer it read whole is written in one piece without
ASGI messages; every other request goes through the ASGI app.

What it does, as HTTP/1.1 servers do (the gateway's tests run on it: tests/gateway):
- Keep-alive, HTTP/1.0 (closed after the answer unless it asked for keep-alive), pipelined requests
  (answered in order, one at a time), `Expect: 100-continue` (answered when the app first reads the body).
- Request bodies are handed to the app as they arrive; reading pauses while more than `_BODY_BUFFER`
  bytes wait to be read. The body limit is the app's (api/body_limit.py): a request the app answered
  before reading its whole body closes its connection after the answer.
- Answers without a length are sent chunked; writing waits while the client's socket is full.
- A client that sends no valid HTTP gets 400 (431 for headers past `_MAX_HEADER_BYTES`), in the
  gateway's error shape, and its connection is closed.
- A connection idle for `keep_alive_timeout` seconds is closed, and every answer carries a `date`: both
  kept by a sweep every second: no timer per request, no date formatted per answer.
- SIGTERM or SIGINT: stop accepting, close idle connections, let answers in flight finish (each
  connection closes after its answer), then the app's lifespan ends. A second signal closes everything.
- No TLS, no HTTP/2, no upgrades (WebSocket: the request is answered as plain HTTP, then closed): in
  a cluster TLS ends before the gateway, and the OpenAI API is HTTP/1.1 requests and server-sent events.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections import deque
from collections.abc import Awaitable
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote

import httptools
import structlog
from starlette.types import ASGIApp, Message

from api.gateway.answers import openai_error
from api.gateway.proxy import Proxy, proxied

log = structlog.get_logger("wingsmith.gateway.server")

# A request's line and headers together; past it the request is refused (431) and its connection closed.
_MAX_HEADER_BYTES = 64 * 1024
_MAX_HEADERS = 100
# Request body bytes held for the app before the socket stops being read.
_BODY_BUFFER = 256 * 1024
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_CHUNKED_END = b"0\r\n\r\n"
_DISCONNECT: Message = {"type": "http.disconnect"}
_STATUS_LINES = {code: f"HTTP/1.1 {code} {phrase}\r\n".encode()
                 for code, phrase in [(100, "Continue"), (200, "OK"), (201, "Created"), (202, "Accepted"),
                                      (204, "No Content"), (301, "Moved Permanently"), (302, "Found"),
                                      (304, "Not Modified"), (307, "Temporary Redirect"), (400, "Bad Request"),
                                      (401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found"),
                                      (405, "Method Not Allowed"), (408, "Request Timeout"), (409, "Conflict"),
                                      (413, "Content Too Large"), (415, "Unsupported Media Type"),
                                      (422, "Unprocessable Content"), (429, "Too Many Requests"),
                                      (431, "Request Header Fields Too Large"), (500, "Internal Server Error"),
                                      (501, "Not Implemented"), (502, "Bad Gateway"),
                                      (503, "Service Unavailable"), (504, "Gateway Timeout")]}


def _status_line(code: int) -> bytes:
    line = _STATUS_LINES.get(code)
    return line if line is not None else f"HTTP/1.1 {code} \r\n".encode()  # the reason phrase is optional


class _Exchange:
    """One request and its answer: the ASGI `receive` and `send` the app gets for it."""

    __slots__ = ("conn", "scope", "body", "body_size", "complete", "waiter", "expect_continue", "keep_alive",
                 "head", "chunked", "started", "finished", "head_only", "delivered", "running")

    def __init__(self, conn: _Connection, scope: dict[str, Any], keep_alive: bool, expect_continue: bool):
        self.conn, self.scope = conn, scope
        self.body: list[bytes] = []
        self.body_size = 0
        self.complete = False  # the whole request body arrived
        self.delivered = False  # ... and was handed to the app
        self.running = False  # the app was called for it
        self.waiter: asyncio.Future[None] | None = None
        self.expect_continue = expect_continue
        self.keep_alive = keep_alive
        self.head: list[bytes] | None = None  # the answer's status line and headers, until written
        self.chunked = False
        self.started = self.finished = False
        self.head_only = scope["method"] == "HEAD"

    # ---- the request side -------------------------------------------------------------------------

    def arrived(self, data: bytes) -> None:
        self.body.append(data)
        self.body_size += len(data)
        if self.body_size > self.conn.server.start_app_past and not self.running and self.conn.current is self:
            self.conn._start(self)  # a large body: the app reads it as it comes (and refuses it past its limit)
        if self.body_size > _BODY_BUFFER:
            self.conn.pause_reading()
        self._wake()

    def ended(self) -> None:
        self.complete = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self) -> Message:
        conn = self.conn
        while not self.delivered:
            if self.body or self.complete:
                body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
                self.body, self.body_size = [], 0
                self.delivered = self.complete
                conn.resume_reading()
                return {"type": "http.request", "body": body, "more_body": not self.complete}
            if conn.lost or self.finished:
                return _DISCONNECT
            if self.expect_continue:  # the client waits for this before it sends the body
                self.expect_continue = False
                conn.write(_CONTINUE)
            await self._wait()
        # After the body nothing more comes: the next call waits until the client goes away or the
        # answer is done, as ASGI servers do (a streamed answer listens for the disconnect).
        while not (conn.lost or self.finished):
            await self._wait()
        return _DISCONNECT

    async def _wait(self) -> None:
        self.waiter = self.conn.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    # ---- the answer side --------------------------------------------------------------------------

    def _head(self, status: int, headers: Any) -> tuple[list[bytes], bool]:
        """The answer's status line and headers (without the end of the head), and whether they say its
        length."""
        if self.started:
            raise RuntimeError("the answer's head was already sent")
        self.started = True
        head = [_status_line(status)]
        length_known = False
        # Names and values are the app's or a backend's as httptools parsed them; a line break in one
        # would let it write headers of its own (response splitting). One scan over them all.
        fields = b"".join(b"".join(pair) for pair in headers)
        if b"\n" in fields or b"\r" in fields:
            raise RuntimeError("a header with a line break")
        for name, value in headers:
            name = name.lower()
            if name == b"content-length":
                length_known = True
            elif name == b"transfer-encoding" or name == b"connection" or name == b"date":
                continue  # this server frames the answer, says whether the connection stays, and dates it
            head += (name, b": ", value, b"\r\n")
        return head, length_known

    def _end_head(self, head: list[bytes], whole: bool) -> None:
        """Close the head: whether the connection stays (not when the request's body was not read to
        its end: what follows on the wire is unknown), and the date."""
        if not self.keep_alive or (whole and not self.complete) or self.conn.closing:
            self.keep_alive = False
            head.append(b"connection: close\r\n")
        head += (self.conn.server.date, b"\r\n")

    def write_whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A whole answer whose headers say its length, in one write, without ASGI messages (the
        proxy's answers read whole: api/gateway/proxy.py)."""
        head, length_known = self._head(status, headers)
        if not length_known:
            raise RuntimeError("a whole answer without its length")
        self._end_head(head, True)
        if not self.head_only:
            head.append(body)
        self.conn.write(b"".join(head))
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        self._wake()
        self.conn.answered(self)

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            head, length_known = self._head(message["status"], message.get("headers", ()))
            self.chunked = not length_known and message["status"] not in (204, 304) and not self.head_only
            self.head = head
            return
        if kind != "http.response.body":
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        if self.finished:
            raise RuntimeError("the answer was already complete")
        body = message.get("body", b"")
        more = message.get("more_body", False)
        out: list[bytes] = []
        if self.head is not None:
            head, self.head = self.head, None
            if self.chunked and not more:  # the whole answer in one message: give it a length instead
                self.chunked = False
                head += (b"content-length: ", str(len(body)).encode(), b"\r\n")
            if self.chunked:
                head.append(b"transfer-encoding: chunked\r\n")
            self._end_head(head, not more)
            out = head
        if not self.head_only:
            if self.chunked:
                if body:
                    out += (b"%x\r\n" % len(body), body, b"\r\n")
                if not more:
                    out.append(_CHUNKED_END)
            elif body:
                out.append(body)
        if out:
            self.conn.write(out[0] if len(out) == 1 else b"".join(out))
        if more:
            await self.conn.drained()
            return
        self._finish()


class _Connection(asyncio.Protocol):
    """One client connection: its parser, the exchange being answered and those waiting behind it."""

    def __init__(self, server: GatewayServer):
        self.server, self.app, self.loop = server, server.app, server.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.current: _Exchange | None = None  # being answered
        self.parsing: _Exchange | None = None  # whose body is arriving (the current one or a pipelined one)
        self.waiting: deque[_Exchange] = deque()  # pipelined, not yet answered
        self.lost = False
        self.closing = False  # the server is stopping: close after the answer in flight
        self.paused_reading = False
        self.paused_writing: asyncio.Future[None] | None = None
        self.idle_since = time.monotonic()
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._expect = False  # the request asked for `100 Continue` before it sends its body
        self._base: dict[str, Any] = {}

    # ---- asyncio protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer, here = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        self._base = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "scheme": "http",
                      "root_path": "", "client": tuple(peer[:2]) if peer else None,
                      "server": tuple(here[:2]) if here else None}
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        for exchange in (self.current, self.parsing):
            if exchange is not None:
                exchange._wake()
        if self.paused_writing is not None and not self.paused_writing.done():
            self.paused_writing.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.idle_since = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Served as a plain request (no switch), as servers without the protocol do; what follows
            # it on the wire is the other protocol's, so nothing more is read and the answer closes.
            asked = self.waiting[-1] if self.waiting else self.current
            if asked is not None:
                asked.keep_alive = False
                self.pause_reading()
        except httptools.HttpParserError:
            if self._header_bytes > _MAX_HEADER_BYTES or len(self._headers) > _MAX_HEADERS:
                # Raised from a callback below; httptools hands it on as a callback error.
                self._refuse(431, f"The request's line and headers pass the {_MAX_HEADER_BYTES} bytes or "
                                  f"{_MAX_HEADERS} headers this gateway reads.", "headers_too_large")
            else:
                self._refuse(400, "The request is not valid HTTP/1.1.", "invalid_http")

    def pause_writing(self) -> None:
        self.paused_writing = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.paused_writing is not None and not self.paused_writing.done():
            self.paused_writing.set_result(None)
        self.paused_writing = None

    # ---- httptools callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url, self._headers, self._header_bytes, self._expect = b"", [], 0, False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._header_bytes += len(url)
        if self._header_bytes > _MAX_HEADER_BYTES:
            raise _HeadersTooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self._headers.append((name, value))
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > _MAX_HEADER_BYTES or len(self._headers) > _MAX_HEADERS:
            raise _HeadersTooLarge
        if name == b"expect" and value.lower() == b"100-continue":
            self._expect = True

    def on_headers_complete(self) -> None:
        parser = self.parser
        url = httptools.parse_url(self._url)
        raw_path = url.path
        path = raw_path.decode("ascii", "replace")
        if "%" in path:
            path = unquote(path)
        scope = {**self._base, "http_version": parser.get_http_version(), "method": parser.get_method().decode(),
                 "path": path, "raw_path": raw_path, "query_string": url.query or b"", "headers": self._headers}
        if self.server.state is not None:
            scope["state"] = self.server.state.copy()
        exchange = _Exchange(self, scope, parser.should_keep_alive() and not self.closing, self._expect)
        self.parsing = exchange
        if self.current is None:
            self._next(exchange)
        else:  # pipelined behind the answer in flight: read no further until it is answered
            self.waiting.append(exchange)
            self.pause_reading()

    def on_body(self, body: bytes) -> None:
        if self.parsing is not None:
            self.parsing.arrived(body)

    def on_message_complete(self) -> None:
        exchange = self.parsing
        if exchange is not None:
            exchange.ended()
            self.parsing = None
            if exchange is self.current and not exchange.running:
                self._start(exchange)

    # ---- running the app ----------------------------------------------------------------------------

    def _next(self, exchange: _Exchange) -> None:
        """Make `exchange` the one being answered. The app is called once its body is whole: most
        clients (httpx, so OpenAI's SDK) send a request's head and body in two writes, and an app
        started on the head alone would only wait for the rest, a task switch and a wake-up more.
        It is called at once when the client waits for `100 Continue`, and once a body passes the
        app's body limit (arrived() then), so the app still refuses a large body as it comes."""
        self.current = exchange
        if exchange.complete or exchange.expect_continue:
            self._start(exchange)

    def _start(self, exchange: _Exchange) -> None:
        exchange.running = True
        scope, proxy = exchange.scope, self.server.proxy
        call: Awaitable[None]
        if (proxy is not None and exchange.complete and exchange.body_size <= self.server.body_limit
                and proxied(scope)):
            # A chat whose whole body is in hand, within the limit: straight to the proxy, its answer
            # written in one piece. Anything else (a body past the limit among it) goes through the app.
            raw = exchange.body[0] if len(exchange.body) == 1 else b"".join(exchange.body)
            exchange.body, exchange.body_size, exchange.delivered = [], 0, True
            call = proxy.serve(scope, exchange.receive, exchange.send, raw, exchange.write_whole)
        else:
            call = self.app(scope, exchange.receive, exchange.send)
        task = self.loop.create_task(self._run(exchange, call))
        self.server.in_flight.add(task)
        task.add_done_callback(self.server.in_flight.discard)

    async def _run(self, exchange: _Exchange, call: Awaitable[None]) -> None:
        try:
            await call
        except Exception:
            if exchange.finished:  # the whole answer went out first: only the log needs to know
                log.exception("gateway request failed after its answer", path=exchange.scope["path"])
                return
            if exchange.started:
                # Part of the answer went out: abort, so the client sees the break, never a quiet cut.
                log.warning("gateway answer broke off", path=exchange.scope["path"], exc_info=True)
                self.abort()
                return
            log.exception("gateway request failed", path=exchange.scope["path"])
            exchange.keep_alive = False
            await _answer(exchange, openai_error(500, "The gateway failed this request; its log says why.",
                                                 "api_error", "gateway_error"))
            return
        if not exchange.finished and not self.lost:
            if exchange.started:  # the app returned mid-answer
                self.abort()
            else:
                log.error("gateway app returned without an answer", path=exchange.scope["path"])
                exchange.keep_alive = False
                await _answer(exchange, openai_error(500, "The gateway gave no answer; its log says why.",
                                                     "api_error", "gateway_error"))

    def answered(self, exchange: _Exchange) -> None:
        """The answer's last byte was written: close, or go on with the next request."""
        self.current = None
        self.idle_since = time.monotonic()
        if not exchange.keep_alive or self.closing:
            self.close()
            return
        if self.waiting:
            self._next(self.waiting.popleft())
        if not self.waiting:
            self.resume_reading()

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answer a request that cannot be read, then close: where its bytes end is unknown."""
        self.parsing = None
        if self.current is not None or self.waiting:
            self.abort()  # an answer is in flight on this connection: no room to say why
            return
        response = openai_error(status, message, "invalid_request_error", code)
        head = [_status_line(status)]
        for name, value in response.raw_headers:
            head += (name, b": ", value, b"\r\n")
        head += (b"connection: close\r\n", self.server.date, b"\r\n", bytes(response.body))
        self.write(b"".join(head))
        self.close()

    # ---- the socket ---------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.lost and self.transport is not None:
            self.transport.write(data)

    async def drained(self) -> None:
        if self.paused_writing is not None:
            await self.paused_writing

    def pause_reading(self) -> None:
        if not self.paused_reading and self.transport is not None and not self.lost:
            self.paused_reading = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.paused_reading and self.transport is not None and not self.lost and not self.waiting:
            self.paused_reading = False
            self.transport.resume_reading()

    def idle(self) -> bool:
        """Nothing is being answered: no request, or only one whose body is still coming."""
        return (self.current is None or not self.current.running) and not self.waiting

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _date_line() -> bytes:
    return b"date: " + formatdate(usegmt=True).encode() + b"\r\n"


class _HeadersTooLarge(Exception):
    """Stops the parser at a request's headers past the limits (data_received says so)."""


async def _answer(exchange: _Exchange, response: Any) -> None:
    """One of the server's own answers (a Starlette response) to `exchange`."""
    await response(exchange.scope, exchange.receive, exchange.send)


class GatewayServer:
    """Serves an ASGI app (the gateway's) on a bound socket until stopped. `run()` takes the thread
    (uvloop when installed) and stops on SIGTERM/SIGINT; `stop()` may be called from any thread."""

    def __init__(self, app: ASGIApp, *, keep_alive_timeout: float = 120.0):
        self.app = app
        self.keep_alive_timeout = keep_alive_timeout
        # Past this many bytes of a body the app is called before the body is whole: the gateway's body
        # limit (its app refuses more), else as much as is buffered before reading pauses.
        state = getattr(app, "state", None)
        limit = getattr(state, "max_body_bytes", None)
        self.body_limit = limit if isinstance(limit, int) else _BODY_BUFFER
        self.start_app_past = min(self.body_limit, _BODY_BUFFER)
        # The gateway's proxy (api/gateway/proxy.py), called directly for chats whose body is whole.
        self.proxy: Proxy | None = getattr(state, "proxy", None)
        self.connections: set[_Connection] = set()
        self.in_flight: set[asyncio.Task[None]] = set()
        self.state: dict[str, Any] | None = None  # what the app's lifespan yielded, copied into each scope
        self.started = False
        self.date = _date_line()  # every answer's `date` (HTTP wants one from a server with a clock), per second
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by serve()
        self._stop: asyncio.Event | None = None
        self._force = False

    def run(self, sock: socket.socket, *, handle_signals: bool = True) -> None:
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
            asyncio.run(self.serve(sock, handle_signals=handle_signals))
        else:
            uvloop.run(self.serve(sock, handle_signals=handle_signals))

    def stop(self) -> None:
        """Stop as SIGTERM does (thread-safe); calling it again closes every connection at once."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._signalled)

    def _signalled(self) -> None:
        if self._stop is None:
            return
        if self._stop.is_set():
            self._force = True
            for conn in list(self.connections):
                conn.abort()
        self._stop.set()

    async def serve(self, sock: socket.socket, *, handle_signals: bool = True) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self.loop.add_signal_handler(sig, self._signalled)
        lifespan = self.app.router.lifespan_context(self.app)  # type: ignore[attr-defined]
        async with lifespan as state:
            self.state = dict(state) if state else None
            sock.listen(1024)
            server = await self.loop.create_server(lambda: _Connection(self), sock=sock, backlog=1024)
            sweeper = self.loop.create_task(self._sweep())
            self.started = True
            try:
                await self._stop.wait()
            finally:
                server.close()
                sweeper.cancel()
                await self._drain()
                await server.wait_closed()

    async def _drain(self) -> None:
        """Close idle connections now; the others after the answer in flight (or at a second signal)."""
        for conn in list(self.connections):
            conn.closing = True
            if conn.idle():
                conn.close()
        while self.in_flight and not self._force:
            await asyncio.wait(list(self.in_flight), timeout=0.1)
        for conn in list(self.connections):
            conn.close()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.date = _date_line()
            too_old = time.monotonic() - self.keep_alive_timeout
            for conn in list(self.connections):
                if conn.idle() and conn.idle_since < too_old:
                    conn.close()
