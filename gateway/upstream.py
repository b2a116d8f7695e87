"""The gateway's client for its backends: aiohttp, one session and pool of kept-alive connections per
backend origin, behind the few calls the proxy and the prober make.

Why aiohttp: the protocol is a well-kept library's, not ours (issue 47: the hand-written client took a
backend's `103 Early Hints` for the final answer and gave the real one to the next request on the
pooled connection). aiohttp reads past every 1xx to the final answer, frames bodies with llhttp (C),
and pools per origin. On this machine a kept-alive POST round trip measured p50 0.5 ms with aiohttp
against 1.75 ms with httpx's AsyncClient (docs/design-choices.md).

What this module adds to it: the errors named in an operator's words (ConnectError, ConnectTimeout,
ReadTimeout, RemoteProtocolError...), a small non-streamed answer read whole before the proxy relays it
(so a backend dying mid-answer can still be retried), and pools closed only once the answers in flight
on them are done when their origin leaves the routes.

A kept-alive connection is dropped by us before a backend's usual keep-alive timeout (uvicorn's 5 s,
`KEEPALIVE_SECONDS` below it), so a request rarely meets a connection the backend is closing; when it
does, the proxy retries it on another backend like any failure before an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

# Below the keep-alive timeout of the servers a backend usually runs on (uvicorn: 5 s).
KEEPALIVE_SECONDS = 4.0
_STREAM = "text/event-stream"


class UpstreamError(Exception):
    """The backend could not be reached or did not answer in HTTP; `reason` names what failed (in the
    words an operator knows: ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError...)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _reason(exc: BaseException) -> str:
    """What failed, for the log and the backend's status: never an address or a message a backend wrote."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "ConnectTimeout"
    if isinstance(exc, aiohttp.SocketTimeoutError | asyncio.TimeoutError):
        return "ReadTimeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"ConnectError ({type(exc.os_error).__name__})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "RemoteProtocolError (connection closed by the backend)"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "RemoteProtocolError (the answer's body broke off)"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"RemoteProtocolError ({type(exc).__name__})"
    if isinstance(exc, aiohttp.ClientOSError):
        return f"ReadError ({type(exc).__name__})"
    return type(exc).__name__


_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class UpstreamResponse:
    """An answer whose status and headers have arrived (`headers`: the raw (name, value) bytes as the
    backend sent them); `complete` when its body was read whole already. Its body is read with
    `next_chunk()` or `chunks()` (as it arrives) or `read()` (whole). `release()` gives the connection
    back, or closes it when the answer was not read to its end."""

    __slots__ = ("_resp", "_pool", "_body", "status", "headers")

    def __init__(self, resp: aiohttp.ClientResponse, pool: Upstream, body: bytes | None):
        self._resp: aiohttp.ClientResponse | None = resp
        self._pool = pool
        self._body = body
        self.status = resp.status
        self.headers = resp.raw_headers

    @property
    def complete(self) -> bool:
        return self._body is not None

    def _live(self) -> aiohttp.ClientResponse:
        if self._resp is None:
            raise RuntimeError("this answer was released: its connection may serve another request now")
        return self._resp

    async def read(self) -> bytes:
        if self._body is not None:
            return self._body
        try:
            return await self._live().read()
        except _FAILURES as exc:
            raise UpstreamError(_reason(exc)) from None

    async def next_chunk(self) -> bytes:
        """What arrived of the body since the last call (waiting for it if nothing did); b"" at its end."""
        if self._body is not None:
            body, self._body = self._body, b""
            return body
        try:
            return await self._live().content.readany()
        except _FAILURES as exc:
            raise UpstreamError(_reason(exc)) from None

    async def chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self.next_chunk():
            yield chunk

    def abort(self) -> None:
        """Close the connection now (the client went away): a read waiting on it ends at once."""
        if self._resp is not None:
            self._resp.close()

    def release(self) -> None:
        resp, self._resp = self._resp, None
        if resp is not None:
            resp.release()  # aiohttp closes the connection itself when the body was not read to its end
            self._pool._done()


class Upstream:
    """The kept-alive connections to one origin (scheme://host:port): an aiohttp session made on first
    use, in the event loop that uses it."""

    def __init__(self, origin: str, *, connect_timeout: float = 3.0, read_timeout: float = 600.0):
        self.origin = origin
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}  # parsed once per path: the hot path asks for the same few
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._in_flight = 0
        self.closed = False
        self._closing: asyncio.Task[None] | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS,
                                             ttl_dns_cache=60)
            # No decompression (the answer's bytes are relayed as they came, with their content-encoding),
            # no headers of the client's own beyond what HTTP needs.
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent", "Content-Type", "Accept-Encoding"),
                timeout=self._timeout(self.read_timeout))
        return self._session

    def _timeout(self, read: float) -> aiohttp.ClientTimeout:
        found = self._timeouts.get(read)
        if found is None:
            found = self._timeouts[read] = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout,
                                                                 sock_read=read)
        return found

    async def request(self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes = b"",
                      *, read_timeout: float | None = None, whole_up_to: int | None = None) -> UpstreamResponse:
        """Send one request and wait for its final status and headers (a 1xx is never that); with
        `whole_up_to`, for the whole answer when it is not a stream and its length is known and at most
        that (`complete` says which)."""
        if self.closed:
            raise UpstreamError("ConnectError (the backend left the routes)")
        session = self._client()
        url = self._urls.get(target)
        if url is None:
            url = self._urls[target] = URL(self.origin + target, encoded=True)
        sent = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
        timeout = self._timeout(self.read_timeout if read_timeout is None else read_timeout)
        self._in_flight += 1
        resp: aiohttp.ClientResponse | None = None
        try:
            resp = await session.request(method, url, data=body if method != "GET" else None, headers=sent,
                                         timeout=timeout, allow_redirects=False)
            whole = None
            if whole_up_to is not None and _small(resp, whole_up_to):
                whole = await resp.read()
            return UpstreamResponse(resp, self, whole)
        except _FAILURES as exc:
            if resp is not None:
                resp.close()
            self._done()
            raise UpstreamError(_reason(exc)) from None
        except BaseException:
            if resp is not None:
                resp.close()
            self._done()
            raise

    def _done(self) -> None:
        self._in_flight -= 1
        if self.closed and self._in_flight == 0 and self._closing is None:
            self._closing = asyncio.ensure_future(self._close_session())

    async def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def aclose(self) -> None:
        """No new requests; the connections close once the answers in flight on them are released."""
        self.closed = True
        if self._in_flight == 0:
            await self._close_session()


def _small(resp: aiohttp.ClientResponse, up_to: int) -> bool:
    """A non-streamed answer of known length, at most `up_to` bytes."""
    length = resp.content_length
    return length is not None and length <= up_to and not resp.content_type.startswith(_STREAM)


class Upstreams:
    """One `Upstream` per backend origin, made on first use."""

    def __init__(self, *, connect_timeout: float = 3.0, read_timeout: float = 600.0):
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
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
                                                      read_timeout=self._read_timeout)
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
