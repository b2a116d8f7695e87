"""The gateway's HTTP server: uvicorn with httptools (llhttp, C) on uvloop, and a small subclass of
uvicorn's httptools protocol for the bounds uvicorn has no setting for (issue 47).

The protocol itself (framing, keep-alive, pipelining, `Expect: 100-continue`, chunked bodies both ways,
HEAD, graceful shutdown) is uvicorn's. The subclass only adds, through uvicorn's own callbacks:
- a deadline for a request's head: armed when a connection opens and when a request's first byte
  arrives, disarmed when its last header has (uvicorn's `timeout_keep_alive` covers only the time
  between requests, so a head sent one byte a minute was held forever). A connection that sent part
  of a head gets 408; one that sent nothing is closed quietly;
- a cap on a head's bytes (64 KB, the URL and headers together) and on its headers (100): 431
  (httptools itself reads headers of any size);
- a cap on the connections one client address holds open (`--max-connections-per-client`); a
  connection past it is closed as it is accepted, before a byte of it is read. Counted here rather than
  in the ASGI app because an idle connection holds a socket without ever reaching the app;
- the gateway's error shape for what is not HTTP (400), and a protocol upgrade (WebSocket, h2c)
  answered as plain HTTP with its connection closed after the answer, as servers without the protocol do;
- one write for what uvicorn writes in one turn of the event loop (`_CoalescingTransport`): uvicorn
  writes an answer's head and its body in two system calls, two TCP segments the client wakes for; the
  proxy sends both in the same turn, so they leave together (bench/report.py, "gateway").

No TLS and no HTTP/2: in a cluster they end at the Service's or the ingress's proxy.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gateway.bounds import Bounds
from gateway.table import log

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100


class _HeadTooLarge(Exception):
    """Stops the parser at a head past the caps (httptools hands it on as a parser error)."""


def _error_bytes(status: int, message: str, code: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole answer in the gateway's error shape, closing its connection: for the protocol's own
    refusals, made before there is a request to hand an app. `default_headers`: the server's (date)."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    head = [STATUS_LINE[status]]
    for name, value in default_headers:
        head += (name, b": ", value, b"\r\n")
    return b"".join([*head, b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode(),
                     b"\r\nconnection: close\r\n\r\n", body])


class _CoalescingTransport:
    """The connection's transport as uvicorn's request cycles see it: writes made in one turn of the
    event loop are held and written together at the end of that turn (`call_soon`), so an answer's
    head and body leave in one system call. Closing writes what is held first; everything else is the
    real transport's. The bytes are uvicorn's, unchanged and in order."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport, self._loop = transport, loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            self._held.append(data)
            return
        self._held = [data]
        self._loop.call_soon(self.flush)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GatewayProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head's bounds (module docstring). `configured()` makes the
    class one server uses, holding its bounds and its count of connections per client address."""

    bounds: ClassVar[Bounds] = Bounds()
    per_client: ClassVar[dict[str, int]] = {}

    @classmethod
    def configured(cls, bounds: Bounds) -> type[GatewayProtocol]:
        return type("GatewayProtocol", (cls,), {"bounds": bounds, "per_client": {}})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # After uvicorn's own setup: its flow control pauses and resumes the real transport.
        self.transport = _CoalescingTransport(transport, self.loop)  # type: ignore[assignment]
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_too_large = False
        self._mid_head = False  # bytes of a request's head arrived, its last header has not
        self._address: str | None = None
        cap = self.bounds.max_connections_per_client
        if cap and self.client is not None:
            address = self.client[0]
            count = self.per_client.get(address, 0) + 1
            self.per_client[address] = count
            self._address = address
            if count > cap:
                if count == cap + 1:  # once per burst, not once per connection
                    log.warning("gateway refused connections past the cap per client address", cap=cap)
                transport.abort()
                return
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        if self._address is not None:
            left = self.per_client.get(self._address, 1) - 1
            if left > 0:
                self.per_client[self._address] = left
            else:
                self.per_client.pop(self._address, None)
            self._address = None
        super().connection_lost(exc)

    # ---- the head's deadline ---------------------------------------------------------------------

    def _arm_head(self) -> None:
        self._disarm_head()
        self._head_timer = self.loop.call_later(self.bounds.head_timeout, self._head_timed_out)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False  # a head trickling in behind an answer: close after that answer
            return
        if self._mid_head:
            self.transport.write(_error_bytes(408, f"The request's head did not arrive within "
                                                   f"{self.bounds.head_timeout:g} seconds.", "request_timeout",
                                                   self.server_state.default_headers))
        self.transport.close()

    # ---- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._mid_head = True
        self._arm_head()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        if len(self.headers) >= MAX_HEADERS:
            self._head_too_large = True
            raise _HeadTooLarge
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            self._head_too_large = True
            raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        self._disarm_head()
        self._mid_head = False
        super().on_headers_complete()

    # ---- what uvicorn answers itself -------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        self._disarm_head()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.abort()  # an answer is in flight on this connection: no room to say why
            return
        if self._head_too_large:
            out = _error_bytes(431, f"The request's line and headers pass the {MAX_HEAD_BYTES} bytes or "
                                    f"{MAX_HEADERS} headers this gateway reads.", "headers_too_large",
                               self.server_state.default_headers)
        else:
            out = _error_bytes(400, "The request is not valid HTTP/1.1.", "invalid_http",
                               self.server_state.default_headers)
        self.transport.write(out)
        self.transport.close()

    def _unsupported_upgrade_warning(self) -> None:
        # Served as a plain request (no switch); what follows it on the wire is the other protocol's,
        # so nothing more is read and the connection closes after the answer.
        if self.cycle is not None:
            self.cycle.keep_alive = False
        self.flow.pause_reading()


def listening_socket(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP;
    # without it small streamed chunks wait on Nagle and delayed ACKs (~40 ms each).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def gateway_server(app: Any, bounds: Bounds, *, log_level: str = "warning",
                   graceful_timeout: float | None = None) -> uvicorn.Server:
    """The uvicorn server for the gateway's app; `run(sockets=[listening_socket(...)])` serves it.
    SIGTERM or SIGINT: stop accepting, close idle connections, let answers in flight finish (at most
    `graceful_timeout` seconds when set), then end the app's lifespan; a second SIGINT closes everything."""
    config = uvicorn.Config(
        app, http=GatewayProtocol.configured(bounds), loop="uvloop", ws="none", lifespan="on", interface="asgi3",
        timeout_keep_alive=int(max(1, round(bounds.keep_alive_timeout))), limit_concurrency=bounds.max_connections,
        timeout_graceful_shutdown=int(graceful_timeout) if graceful_timeout else None, backlog=2048,
        server_header=False, date_header=True, access_log=False, log_level=log_level, log_config=None,
        # The client's address is the socket's: a forwarded header from a client is not believed (the
        # cap per client address counts sockets), and the middleware would cost every request.
        proxy_headers=False)
    return uvicorn.Server(config)
