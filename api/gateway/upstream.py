"""The gateway's client for its backends: one pool of kept-alive HTTP/1.1 connections per backend
origin, a request written in one piece, the answer parsed by httptools (C) as it arrives.

Why not a general HTTP client: the gateway's hot path is one POST per request to a known origin,
and a general client's per-request machinery (request and response objects, URL parsing, timeouts as
tasks, a pure-Python parser) cost more than the proxying itself. Here a request costs a dictionary
lookup, a write and the reads of its answer.

A connection taken from the pool may have been closed by the backend meanwhile (its keep-alive
timeout): a request whose reused connection fails before any byte of the answer arrives is sent once
more on a new connection, as HTTP clients do, and is not the backend's fault.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

_READ = 65536


class UpstreamError(Exception):
    """The backend could not be reached or did not answer in HTTP; `reason` names what failed (in the
    words an operator knows: ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError...)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Connection:
    """One TCP (or TLS) connection and the parser of the answer being read on it."""

    __slots__ = ("reader", "writer", "parser", "status", "headers", "body", "headers_done", "complete", "reused",
                 "keep_alive")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.reused = False
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headers_done = self.complete = self.keep_alive = False

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        # Asked here: once the message is complete the parser has moved on and no longer knows.
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    async def feed(self, seconds: float) -> None:
        """Read once and parse; raises UpstreamError on a timeout, a close or bytes that are not HTTP."""
        try:
            async with asyncio.timeout(seconds):
                data = await self.reader.read(_READ)
        except TimeoutError:
            raise UpstreamError("ReadTimeout") from None
        except OSError as exc:
            raise UpstreamError(f"ReadError ({type(exc).__name__})") from None
        if not data:
            raise UpstreamError("RemoteProtocolError (connection closed by the backend)")
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise UpstreamError(f"RemoteProtocolError ({type(exc).__name__})") from None

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class UpstreamResponse:
    """An answer whose status and headers have arrived; its body is read with `chunks()` (as it
    arrives) or `read()` (whole). `release()` gives the connection back, or closes it when the answer
    was not read to its end."""

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

    async def chunks(self) -> AsyncIterator[bytes]:
        conn = self._live()
        while True:
            if conn.body:
                pending, conn.body = conn.body, []
                for chunk in pending:
                    yield chunk
            if conn.complete:
                return
            await conn.feed(self._timeout)

    async def read(self) -> bytes:
        conn = self._live()
        while not conn.complete:  # most answers of the hot path arrive whole with their headers
            await conn.feed(self._timeout)
        body, conn.body = conn.body, []
        return b"".join(body)

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
        self._closed = False

    async def request(self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes = b"",
                      *, read_timeout: float | None = None) -> UpstreamResponse:
        """Send one request and wait for its status and headers."""
        timeout = self.read_timeout if read_timeout is None else read_timeout
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"host: ", self._host_header,
                b"\r\ncontent-length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in headers:
            head += [name, b": ", value, b"\r\n"]
        head.append(b"\r\n")
        payload = b"".join(head) + body
        while True:
            conn = await self._connection()
            try:
                conn.writer.write(payload)
                while not conn.headers_done:
                    await conn.feed(timeout)
                return UpstreamResponse(conn, self, timeout)
            except UpstreamError:
                conn.close()
                # A kept-alive connection the backend closed meanwhile: nothing was answered, so the
                # request goes again on a new connection. A new connection failing is the backend's.
                if conn.reused and not conn.status and not conn.body:
                    continue
                raise
            except OSError as exc:
                conn.close()
                if conn.reused:
                    continue
                raise UpstreamError(f"WriteError ({type(exc).__name__})") from None

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have timed out
            if not conn.writer.is_closing() and not conn.reader.at_eof():
                conn.reused = True
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl,
                                                               limit=_READ)
        except TimeoutError:
            raise UpstreamError("ConnectTimeout") from None
        except OSError as exc:
            raise UpstreamError(f"ConnectError ({type(exc).__name__})") from None
        return _Connection(reader, writer)

    def _give_back(self, conn: _Connection) -> None:
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
