"""What the gateway's HTTP libraries cost before any of its own code: the gateway beside bare forwarders
made of the same libraries, a byte pipe and the frontend itself, measured in turn (issue 47).

    .venv/bin/python bench/gateway_floor.py [--requests N] [--seconds S] [--runs R]

A bare forwarder reads a request's body, sends it to the frontend on a kept-alive connection, reads the
whole answer and sends it back: no routing, no keys, no bounds, no metrics, no retries. Two are always
measured, on this project's own dependencies:
- uvicorn + aiohttp: the gateway's pair (uvicorn with httptools on uvloop; an aiohttp client);
- aiohttp + aiohttp: aiohttp's low-level web server and its client, on uvloop;
and a third when pyreqwest (Rust's reqwest and hyper) is importable: uvicorn + pyreqwest.

Each forwarder runs in its own process and asks for the gateway's scheduler slice, as the byte pipe does
(bench/gateway_speed.py). Reported per series: p50 and p99 of one chat completion at a time, the series
taking turns in a rotating order (as bench/report.py measures the gateway), p99 over the byte pipe's,
and the requests per second each answers to 8 kept-alive connections with the process CPU per request.
Every process started here is stopped on the way out, also when a measurement fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib.util import find_spec
from pathlib import Path

import httpx
from gateway_speed import GatewayRig, PipeProcess, interleaved_latency, throughput, wait_http
from stats import pct

from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process

THROUGHPUT_CONNECTIONS = 8
FORWARDERS = ("uvicorn+aiohttp", "aiohttp+aiohttp", "uvicorn+pyreqwest")
JSON = "application/json"


# ---- the bare forwarders, each in its own process --------------------------------------------------

def _bound_socket(port: int):  # noqa: ANN202  (a socket.socket; imported in the child only)
    from gateway.__main__ import listening_socket
    return listening_socket("127.0.0.1", port)


def _uvicorn_forwarder(port: int, backend: str, client: str) -> None:
    import uvicorn

    send_to_backend = None

    async def app(scope, receive, send) -> None:  # noqa: ANN001  (plain ASGI)
        nonlocal send_to_backend
        if scope["type"] == "lifespan":  # the client is made in the server's loop, and closed with it
            await receive()  # startup
            send_to_backend = _Backend(client, backend)
            await send({"type": "lifespan.startup.complete"})
            await receive()  # shutdown
            await send_to_backend.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        parts, more = [], True
        while more:
            message = await receive()
            parts.append(message.get("body", b""))
            more = message.get("more_body", False)
        assert send_to_backend is not None
        status, answer = await send_to_backend(scope["path"], b"".join(parts))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", JSON.encode()), (b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.Server(uvicorn.Config(app, loop="uvloop", http="httptools", ws="none", lifespan="on", access_log=False,
                                  log_level="warning", log_config=None, proxy_headers=False,
                                  server_header=False)).run(sockets=[_bound_socket(port)])


def _aiohttp_forwarder(port: int, backend: str) -> None:
    import uvloop
    from aiohttp import web

    async def serve() -> None:
        send_to_backend = _Backend("aiohttp", backend)

        async def handler(request: web.BaseRequest) -> web.Response:
            status, answer = await send_to_backend(request.path, await request.read())
            return web.Response(body=answer, status=status, content_type=JSON)

        await asyncio.get_running_loop().create_server(web.Server(handler), sock=_bound_socket(port))
        try:
            await asyncio.Event().wait()  # until the process is stopped
        finally:
            await send_to_backend.close()

    uvloop.run(serve())


class _Backend:
    """A kept-alive client to the frontend, as bare as the library allows: `await it(path, body)` sends
    one POST and gives (status, answer); `close()` ends its pool."""

    def __init__(self, kind: str, backend: str):
        self.kind, self.backend = kind, backend
        if kind == "pyreqwest":
            from pyreqwest.client import ClientBuilder
            self.reqwest = ClientBuilder().http1_only().build()
        else:
            import aiohttp
            self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                                                 cookie_jar=aiohttp.DummyCookieJar())

    async def __call__(self, path: str, body: bytes) -> tuple[int, bytes]:
        url = self.backend + path
        if self.kind == "pyreqwest":
            answer = await self.reqwest.post(url).header("content-type", JSON).body_bytes(body).build().send()
            return answer.status, bytes(await answer.bytes())
        async with self.session.post(url, data=body, headers={"content-type": JSON}) as got:
            return got.status, await got.read()

    async def close(self) -> None:
        await (self.reqwest if self.kind == "pyreqwest" else self.session).close()


def serve_forwarder(kind: str, port: int, backend: str) -> None:
    from gateway.scheduling import DEFAULT_SLICE_US, ask_for_slice
    ask_for_slice(DEFAULT_SLICE_US)  # as the gateway and the byte pipe
    server, client = kind.split("+")
    if server == "aiohttp":
        _aiohttp_forwarder(port, backend)
    else:
        _uvicorn_forwarder(port, backend, client)


@contextmanager
def forwarder(kind: str, backend: str) -> Iterator[tuple[str, int]]:
    """A bare forwarder in its own process: its URL (the frontend's routes under it) and pid."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port), backend])
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/v1/models")
        yield url, proc.pid
    finally:
        stop_process(proc, 10)


# ---- measurements ----------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(requests: int, seconds: float, kinds: list[str]) -> list[dict]:
    with ExitStack() as stack:
        rig = stack.enter_context(GatewayRig())
        rig.route(rig.east)
        pipe = stack.enter_context(PipeProcess(rig.east))
        series = [("direct", rig.east.url, rig.east.proc.pid), ("byte pipe", pipe.url, pipe.proc.pid),
                  ("gateway", rig.url, rig.gateway.pid)]
        series += [(kind, *stack.enter_context(forwarder(kind, rig.east.url))) for kind in kinds]
        http = stack.enter_context(httpx.Client(timeout=10, trust_env=False))
        latencies = interleaved_latency(http, [(url, None) for _, url, _ in series], requests)
        pipe_p99 = pct(latencies[1], 99)
        rows = []
        for (name, url, pid), samples in zip(series, latencies, strict=True):
            before = cpu_seconds(pid)
            rate = throughput(url, seconds, THROUGHPUT_CONNECTIONS)
            cpu_us = (cpu_seconds(pid) - before) / rate["requests"] * 1e6
            rows.append({"series": name, "p50_ms": round(pct(samples, 50) * 1000, 3),
                         "p99_ms": round(pct(samples, 99) * 1000, 3),
                         "p99_vs_pipe": round(pct(samples, 99) / pipe_p99, 3), "rps": rate["rps"],
                         "cpu_us_per_request": round(cpu_us, 1)})
        return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="rounds of the latency series (default 4000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of load for each throughput (default 5)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "PORT", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forwarder(args.serve[0], int(args.serve[1]), args.serve[2])
        return 0
    kinds = [k for k in FORWARDERS if not k.endswith("pyreqwest") or find_spec("pyreqwest") is not None]
    if len(kinds) < len(FORWARDERS):
        print("pyreqwest is not installed: uvicorn+pyreqwest not measured")
    worst: dict[str, float] = {}
    for run in range(1, args.runs + 1):
        load = os.getloadavg()
        started = time.monotonic()
        rows = one_run(args.requests, args.seconds, kinds)
        print(f"\nrun {run} of {args.runs} ({time.monotonic() - started:.0f} s, 1-min load {load[0]:.2f} at its start; "
              f"latency: {args.requests} rounds, one request at a time; throughput: {THROUGHPUT_CONNECTIONS} "
              f"connections, {args.seconds:g} s each)")
        print(f"  {'series':<18} {'p50 ms':>8} {'p99 ms':>8} {'p99/pipe':>9} {'req/s':>8} {'CPU µs/req':>11}")
        for row in rows:
            print(f"  {row['series']:<18} {row['p50_ms']:8.3f} {row['p99_ms']:8.3f} {row['p99_vs_pipe']:8.2f}× "
                  f"{row['rps']:8.0f} {row['cpu_us_per_request']:11.1f}")
            worst[row["series"]] = max(worst.get(row["series"], 0.0), row["p99_vs_pipe"])
    if args.runs > 1:
        print("\nworst p99 over the byte pipe's: " + ", ".join(f"{k} {v:.2f}×" for k, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
