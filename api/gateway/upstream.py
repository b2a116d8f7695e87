"""The gateway's client for its backends: one pool of kept-alive HTTP/1.1 connections per backend
origin, a request written in one piece, the answer parsed by httptools (C) as it arrives.

Why not a general HTTP client: the gateway's hot path is one POST per request to a known origin,
and a general client's per-request machinery (request and response objects, URL parsing, timeouts as
tasks, a pure-Python parser) cost more than the proxying itself. Here a request costs a dictionary
lookup, a write and one wake-up per read of its answer: each connection is an asyncio protocol that
feeds the bytes straight to the parser (no stream reader, no timeout object per read).

A connection taken from the pool may have been closed by the backend meanwhile (its keep-alive
timeout): a request whose reused connection is closed before any byte of the answer arrives is sent
once more on a new connection, as HTTP clients do, and is not the backend's fault. A reused
connection that merely stays silent is not resent to: the backend may be working on the request.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

# A streamed answer the client reads more slowly than the backend writes is held up to this much
# before the backend's socket stops being read (its own send buffer then slows it down).
_PAUSE_AT = 256 * 1024
_CLOSED_BY_BACKEND = "RemoteProtocolError (connection closed by the backend)"
_READ_TIMEOUT = "ReadTimeout"


class UpstreamError(Exception):
    """The backend could not be reached or did not answer in HTTP; `reason` names what failed (in the
    words an operator knows: ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError...)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamError(_READ_TIMEOUT))


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection, the parser of the answer being read on it, and the one coroutine
    (at most) waiting for that answer's next bytes."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.busy = False  # a request was sent and its answer is not yet given back
        self.received = False  # any byte of the current answer
        self.failure: str | None = None  # why this connection can carry nothing more
        self.waiter: asyncio.Future[None] | None = None
        # Set by a request that reads an answer whole when it is small and not a stream (`whole_up_to`):
        # its waiter is not woken for a head whose body is still coming.
        self.whole_up_to: int | None = None
        self.paused = False
        self.parser = httptools.HttpResponseParser(self)
        self._reset()

    def _reset(self) -> None:
        # The parser goes on to the next answer by itself: a connection is reused only after its
        # answer was read to the end (reusable()).
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.buffered = 0
        self.headers_done = self.complete = self.keep_alive = self.received = False
        self.small = False  # the head says: not a stream, and a length up to `whole_up_to`

    # ---- asyncio protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # bytes nobody asked for: the connection's framing can no longer be trusted
            self._fail("RemoteProtocolError (bytes outside an answer)")
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"RemoteProtocolError ({type(exc).__name__})")
            self.close()
            return
        if self.small and not self.complete:
            return  # the rest of a small answer is still coming: a wake-up now would only wait again
        self._wake()

    def eof_received(self) -> bool:
        self._fail(_CLOSED_BY_BACKEND)
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"ReadError ({type(exc).__name__})" if exc is not None else _CLOSED_BY_BACKEND)

    # ---- httptools callbacks -------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        # Asked here: once the message is complete the parser has moved on and no longer knows.
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True
        if self.whole_up_to is not None:
            self.small = _small(self.headers, self.whole_up_to)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        # A small answer is read whole (bounded by `whole_up_to`); a stream the client reads slowly pauses.
        if self.buffered > _PAUSE_AT and not self.small and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        self.complete = True

    # ---- the waiting side ----------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, seconds: float) -> None:
        """Until more of the answer arrived or the connection failed; raises UpstreamError if it had
        already failed, or when nothing comes for `seconds`. Callers loop on what they wait for."""
        if self.failure is not None:
            raise UpstreamError(self.failure)
        waiter = self.waiter = self.loop.create_future()
        timer = self.loop.call_later(seconds, _time_out, waiter)
        try:
            await waiter
        except UpstreamError as exc:
            self.failure = self.failure or exc.reason
            raise
        finally:
            timer.cancel()
            self.waiter = None

    def take(self) -> bytes:
        """The body bytes that arrived and were not taken yet, as one piece."""
        body, self.body, self.buffered = self.body, [], 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return body[0] if len(body) == 1 else b"".join(body)

    def usable(self) -> bool:
        return self.failure is None and self.transport is not None and not self.transport.is_closing()

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and self.usable()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _small(headers: list[tuple[bytes, bytes]], up_to: int) -> bool:
    """A non-streamed answer of known length, at most `up_to` bytes."""
    length = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-type" and value.startswith(b"text/event-stream"):
            return False
        if lowered == b"content-length":
            length = int(value) if value.isdigit() else None
    return length is not None and length <= up_to


class UpstreamResponse:
    """An answer whose status and headers have arrived; its body is read with `next_chunk()` or
    `chunks()` (as it arrives) or `read()` (whole). `release()` gives the connection back, or closes
    it when the answer was not read to its end."""

    __slots__ = ("_conn", "_pool", "_timeout", "status", "headers")

    def __init__(self, conn: _Connection, pool: Upstream, timeout: float):
        self._conn: _Connection | None = conn
        self._pool, self._timeout = pool, timeout
        self.status = conn.status
        self.headers = conn.headers

    def _live(self) -> _Connection:
        if self._conn is None:
            raise RuntimeError("this answer was released: its connection may serve another request now")
        return self._conn

    @property
    def complete(self) -> bool:
        return self._live().complete

    async def next_chunk(self) -> bytes:
        """What arrived of the body since the last call (waiting for it if nothing did); b"" at its end."""
        conn = self._live()
        while not conn.body:
            if conn.complete:
                return b""
            await conn.wait(self._timeout)
        return conn.take()

    async def chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self.next_chunk():
            yield chunk

    async def read(self) -> bytes:
        conn = self._live()
        parts = []
        while not conn.complete:
            if conn.body:  # taken as it comes: a large answer held whole would pause its own socket
                parts.append(conn.take())
            await conn.wait(self._timeout)
        parts.append(conn.take())
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def abort(self) -> None:
        """Close the connection now (the client went away): a wait on it ends at once."""
        conn = self._conn
        if conn is not None:
            conn._fail("aborted")
            conn.close()

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._give_back(conn)


class Upstream:
    """The kept-alive connections to one origin (scheme://host:port). Not thread-safe: one event loop."""

    def __init__(self, origin: str, *, connect_timeout: float = 3.0, read_timeout: float = 600.0,
                 max_idle: int = 64):
        parts = urlsplit(origin)
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._host_header = (parts.netloc.rpartition("@")[2]).encode("latin-1")
        self.connect_timeout, self.read_timeout, self.max_idle = connect_timeout, read_timeout, max_idle
        self._idle: list[_Connection] = []
        self._heads: dict[tuple[str, str], bytes] = {}  # request line and host, per method and target
        self._closed = False

    async def request(self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes = b"",
                      *, read_timeout: float | None = None, whole_up_to: int | None = None) -> UpstreamResponse:
        """Send one request and wait for its status and headers; with `whole_up_to`, for the whole answer
        when it is not a stream and its length is known and at most that (`complete` says which)."""
        timeout = self.read_timeout if read_timeout is None else read_timeout
        head = self._heads.get((method, target))
        if head is None:
            head = self._heads[(method, target)] = (f"{method} {target} HTTP/1.1\r\nhost: ".encode("latin-1")
                                                    + self._host_header + b"\r\n")
        parts = [head, b"content-length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in headers:
            parts += (name, b": ", value, b"\r\n")
        parts += (b"\r\n", body)
        payload = b"".join(parts)
        while True:
            conn = await self._connection()
            conn.busy = True
            conn.whole_up_to = whole_up_to
            assert conn.transport is not None
            conn.transport.write(payload)
            try:
                while not conn.headers_done or (conn.small and not conn.complete):
                    await conn.wait(timeout)
            except UpstreamError as exc:
                conn.close()
                # A kept-alive connection the backend closed meanwhile: nothing was answered, so the
                # request goes again on a new connection. A new connection failing is the backend's.
                if conn.reused and not conn.received and exc.reason != _READ_TIMEOUT:
                    continue
                raise
            return UpstreamResponse(conn, self, timeout)

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have timed out
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(lambda: _Connection(loop), self.host, self.port, ssl=self._ssl)
        except TimeoutError:
            raise UpstreamError("ConnectTimeout") from None
        except OSError as exc:
            raise UpstreamError(f"ConnectError ({type(exc).__name__})") from None
        return conn

    def _give_back(self, conn: _Connection) -> None:
        conn.busy = False
        if self._closed or not conn.reusable() or len(self._idle) >= self.max_idle:
            conn.close()
            return
        conn._reset()
        self._idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Upstreams:
    """One `Upstream` per backend origin, made on first use: a request allocates no client."""

    def __init__(self, *, connect_timeout: float = 3.0, read_timeout: float = 600.0, max_idle: int = 64):
        self._connect_timeout, self._read_timeout, self._max_idle = connect_timeout, read_timeout, max_idle
        self._pools: dict[str, Upstream] = {}
        self._by_url: dict[str, tuple[Upstream, str]] = {}

    def for_url(self, url: str) -> tuple[Upstream, str]:
        """The pool for a backend's base URL and the path prefix to put before request paths."""
        found = self._by_url.get(url)
        if found is None:
            parts = urlsplit(url)
            origin = f"{parts.scheme}://{parts.netloc}"
            pool = self._pools.get(origin)
            if pool is None:
                pool = self._pools[origin] = Upstream(origin, connect_timeout=self._connect_timeout,
                                                      read_timeout=self._read_timeout, max_idle=self._max_idle)
            found = self._by_url[url] = (pool, parts.path.rstrip("/"))
        return found

    async def forget(self, keep: set[str]) -> None:
        """Close the pools of origins none of the `keep` backend URLs names."""
        self._by_url = {url: found for url, found in self._by_url.items() if url in keep}
        origins = {f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in keep}
        for origin in [o for o in self._pools if o not in origins]:
            await self._pools.pop(origin).aclose()

    async def aclose(self) -> None:
        pools, self._pools, self._by_url = self._pools, {}, {}
        for pool in pools.values():
            await pool.aclose()
