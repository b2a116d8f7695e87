"""The gateway's backend client (aiohttp behind gateway/upstream.py) against real sockets: raw
HTTP/1.1 servers scripted per test."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from gateway.upstream import Upstream, UpstreamError, Upstreams

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + await reader.readexactly(length)


@asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server; yields its origin and the number of requests each accepted connection served."""
    served: list[int] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(0)
        index = len(served) - 1
        try:
            await handler(reader, writer, index)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        srv.close()
        await srv.wait_closed()


async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int,
                     served: list[int]) -> None:
    while True:
        await read_request(reader)
        served[index] += 1
        writer.write(OK)
        await writer.drain()


async def test_one_connection_serves_request_after_request():
    served_ref: list[list[int]] = []
    async with server(lambda r, w, i: keep_alive(r, w, i, served_ref[0])) as (origin, served):
        served_ref.append(served)
        pool = Upstream(origin)
        for _ in range(5):
            resp = await pool.request("POST", "/v1/chat/completions", [(b"content-type", b"application/json")], b"{}")
            assert (resp.status, await resp.read()) == (200, b"{}")
            resp.release()
        assert served == [5]
        await pool.aclose()


async def test_a_kept_alive_connection_the_backend_closed_is_replaced_quietly():
    async def one_then_close(reader, writer, index):  # says keep-alive, then closes: an idle timeout
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
    async with server(one_then_close) as (origin, served):
        pool = Upstream(origin)
        for _ in range(3):
            resp = await pool.request("POST", "/x", [], b"{}")
            assert await resp.read() == b"{}"
            resp.release()
            await asyncio.sleep(0.05)  # the close arrives before the next request: a new connection
        assert len(served) == 3
        await pool.aclose()


async def test_connection_close_is_not_reused():
    async def closing(reader, writer, index):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
    async with server(closing) as (origin, served):
        pool = Upstream(origin)
        for _ in range(2):
            resp = await pool.request("GET", "/", [])
            assert await resp.read() == b"{}"
            resp.release()
        assert len(served) == 2
        await pool.aclose()


async def test_streamed_chunks_arrive_as_sent_and_an_unfinished_answer_is_not_reused():
    gates = [asyncio.Event(), asyncio.Event()]

    async def streaming(reader, writer, index):
        for gate in gates:  # kept alive: one streamed answer per request, the rest after its gate opens
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                         b"\r\n7\r\ndata: 1\r\n")
            await writer.drain()
            await gate.wait()
            writer.write(b"7\r\ndata: 2\r\n0\r\n\r\n")
            await writer.drain()
    async with server(streaming) as (origin, served):
        pool = Upstream(origin)
        resp = await pool.request("POST", "/", [], b"{}")
        chunks = resp.chunks()
        assert await anext(chunks) == b"data: 1"  # before the server sent the rest
        gates[0].set()
        assert [c async for c in chunks] == [b"data: 2"]
        resp.release()
        second = await pool.request("POST", "/", [], b"{}")
        assert await anext(second.chunks()) == b"data: 1"
        assert len(served) == 1  # the same connection carried both
        second.release()  # the client went away mid-answer: that connection cannot carry another request
        gates[1].set()
        await asyncio.sleep(0.05)
        third = await pool.request("POST", "/", [], b"{}")
        assert len(served) == 2  # a new connection
        third.release()
        await pool.aclose()


async def test_failures_are_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with pytest.raises(UpstreamError, match="ConnectError"):
        await Upstream(f"http://127.0.0.1:{free}").request("GET", "/", [])

    async def silent(reader, writer, index):
        await read_request(reader)
        await asyncio.sleep(5)
    async with server(silent) as (origin, _served):
        with pytest.raises(UpstreamError, match="ReadTimeout"):
            await Upstream(origin, read_timeout=0.2).request("GET", "/", [])

    async def garbage(reader, writer, index):
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
    async with server(garbage) as (origin, _served):
        with pytest.raises(UpstreamError, match="RemoteProtocolError"):
            await Upstream(origin).request("GET", "/", [])


async def test_pools_are_per_origin_and_forgotten_with_their_routes():
    upstreams = Upstreams()
    east, prefix = upstreams.for_url("http://127.0.0.1:9001/frontends/east/default/kimi")
    assert prefix == "/frontends/east/default/kimi"
    assert upstreams.for_url("http://127.0.0.1:9001/frontends/west/default/kimi")[0] is east
    west, _ = upstreams.for_url("http://127.0.0.1:9002")
    await upstreams.forget({"http://127.0.0.1:9002"})
    assert east.closed and not west.closed
    assert upstreams.for_url("http://127.0.0.1:9002")[0] is west
    await upstreams.aclose()
    assert west.closed


async def test_a_small_answer_comes_whole_and_a_stream_at_its_head():
    """With `whole_up_to`, request() returns a small non-streamed answer whole, even one larger than the
    buffer at which a slow stream stops being read, and an answer sent in pieces; a stream, and an
    answer past the bound, come back at their head."""
    big = b"x" * 600_000  # past the 256 KB at which reading pauses for a stream

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        while True:
            request = await read_request(reader)
            if b"/stream" in request:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 11\r\n\r\n")
                await writer.drain()
                await asyncio.sleep(0.3)
                writer.write(b"data: one\n\n")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n" % len(big))
                await writer.drain()
                for i in range(0, len(big), 100_000):  # the body in pieces, after the head
                    await asyncio.sleep(0.01)
                    writer.write(big[i:i + 100_000])
            await writer.drain()

    async with server(answer) as (origin, _):
        pool = Upstream(origin, read_timeout=5)
        whole = await pool.request("POST", "/whole", [], b"{}", whole_up_to=1 << 20)
        assert whole.complete and await whole.read() == big
        whole.release()
        bounded = await pool.request("POST", "/whole", [], b"{}", whole_up_to=1000)
        assert not bounded.complete  # past the bound: at its head, read as it comes
        assert await bounded.read() == big
        bounded.release()
        started = asyncio.get_running_loop().time()
        stream = await pool.request("POST", "/stream", [], b"{}", whole_up_to=1 << 20)
        assert not stream.complete and asyncio.get_running_loop().time() - started < 0.25
        assert await stream.read() == b"data: one\n\n"
        stream.release()
        await pool.aclose()


async def test_an_early_hint_is_never_the_answer_and_never_left_for_the_next_request():
    """A backend that answers `103 Early Hints` before each final answer (issue 47: the hand-written
    client took the 103 as the answer and handed the real one to the next request on the connection)."""
    async def hinting(reader, writer, index):
        n = 0
        while True:
            await read_request(reader)
            n += 1
            body = b'{"answer": %d}' % n
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            await writer.drain()
    async with server(hinting) as (origin, served):
        pool = Upstream(origin)
        for n in (1, 2, 3):
            resp = await pool.request("POST", "/v1/chat/completions", [], b"{}", whole_up_to=1 << 20)
            assert (resp.status, await resp.read()) == (200, b'{"answer": %d}' % n)
            resp.release()
        assert len(served) == 1  # one pooled connection carried all three
        await pool.aclose()
