"""The local gateway's added latency, and how fast it stops sending traffic to a failed backend.

    python bench/gateway_speed.py [--requests N] [--failover-clients N]

Each piece runs in its own process, as on a real machine: two simulated frontends (sim.kube's
frontend code, one per "cluster"), the gateway (`python -m gateway`), and this client.

latency:  the same non-streaming chat completion, N times in a row, straight to the frontend and
          through the gateway (a route with only that frontend); plus time to first streamed byte.
failover: clients send continuously to a route of two frontends, weight 1:1; one frontend process is
          killed. Reported: time from the kill until the gateway marks it cooling down (no new
          requests), requests that reached the dead frontend, client errors, the slowest request
          around the failure; then the time until the restarted frontend gets traffic again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from stats import pct  # bench/stats.py (scripts run with bench/ on the path)

from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process

MODEL = "kimi-k3"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello"}]}


def wait_http(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


# ---- the frontend process ------------------------------------------------------------------------

def serve_frontend(port: int, cluster: str) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Route

    from gateway.__main__ import listening_socket
    from sim.kube import frontend

    frontends = frontend.Frontends()
    frontends.publish(cluster, "default", MODEL, [MODEL])

    async def front(request):
        return await frontend.handle(frontends, request)

    app = Starlette(routes=[Route("/frontends/{cluster}/{namespace}/{name}/{path:path}", front,
                                  methods=["GET", "POST"])])
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(
        sockets=[listening_socket("127.0.0.1", port)])


class FrontendProcess:
    def __init__(self, cluster: str, port: int | None = None):
        self.cluster = cluster
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/frontends/{cluster}/default/{MODEL}"
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--frontend", str(self.port), self.cluster])
        wait_http(self.url + "/v1/models")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def serve_pipe(port: int, backend_port: int) -> None:
    """A byte pipe to the frontend: every client connection gets its own backend connection and bytes
    are copied both ways as they come, no HTTP parsed, no routing, no metrics. No proxy does less, so
    its added latency is the floor of the extra hop on this machine (uvloop and the gateway's short
    scheduler slice, as the gateway runs)."""
    import socket

    import uvloop

    from gateway.scheduling import DEFAULT_SLICE_US, ask_for_slice

    ask_for_slice(DEFAULT_SLICE_US)

    class Back(asyncio.Protocol):
        def __init__(self, front: asyncio.Transport) -> None:
            self.front = front

        def data_received(self, data: bytes) -> None:
            self.front.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.front.close()

    class Front(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: asyncio.Transport = transport  # type: ignore[assignment]
            self.back: asyncio.Transport | None = None
            self.early: list[bytes] = []
            self.connecting = asyncio.ensure_future(self.connect())  # held: the loop keeps tasks weakly

        async def connect(self) -> None:
            back, _ = await asyncio.get_running_loop().create_connection(
                lambda: Back(self.transport), "127.0.0.1", backend_port)
            back.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.back = back
            for data in self.early:
                back.write(data)

        def data_received(self, data: bytes) -> None:
            if self.back is None:
                self.early.append(data)
            else:
                self.back.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.back is not None:
                self.back.close()

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Front, "127.0.0.1", port)
        await server.serve_forever()
    uvloop.run(serve())


class PipeProcess:
    """`serve_pipe` in its own process, in front of one frontend: `url` is the frontend's URL through it."""

    def __init__(self, frontend: FrontendProcess):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, __file__, "--pipe", str(self.port), str(frontend.port)])
        self.url = frontend.url.replace(f":{frontend.port}/", f":{self.port}/", 1)
        try:
            wait_http(self.url + "/v1/models")
        except RuntimeError:
            self.close()
            raise

    def close(self) -> None:
        stop_process(self.proc, 10)

    def __enter__(self) -> PipeProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# ---- measurements --------------------------------------------------------------------------------

def paired_latency(http: httpx.Client, direct_url: str, via_url: str, n: int,
                   via_headers: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    """The same request straight to the frontend and through the gateway, alternately, so both series
    see the same machine: (direct, via) latencies in seconds."""
    direct, via = interleaved_latency(http, [(direct_url, None), (via_url, via_headers)], n)
    return direct, via


def rotated(count: int, rounds: int) -> list[int]:
    """The order in which `count` series take turns over `rounds` rounds: each round starts one later.
    They share one frontend, which is still finishing an answer (its server's bookkeeping) when the
    next request reaches it: in a fixed order the series after direct always met that and measured
    ~0.1× worse at p99, the one after it never. Rotated, each follows each other as often."""
    return [(i + k) % count for i in range(rounds) for k in range(count)]


def interleaved_latency(http: httpx.Client, targets: list[tuple[str, dict[str, str] | None]], n: int
                        ) -> list[list[float]]:
    """The same request to each (base URL, headers) in turn (`rotated`), `n` rounds, so every series
    sees the same machine: one list of latencies (seconds) per target."""
    for _ in range(50):  # warm the connection pools
        for url, headers in targets:
            http.post(url + "/v1/chat/completions", json=BODY, headers=headers)
    out: list[list[float]] = [[] for _ in targets]
    for j in rotated(len(targets), n):
        url, headers = targets[j]
        t = time.perf_counter()
        r = http.post(url + "/v1/chat/completions", json=BODY, headers=headers)
        out[j].append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
    return out


class GatewayRig:
    """Two frontend processes (sim-east, sim-west) and a gateway process, stopped on exit."""

    def __init__(self, probe_interval: float = 0.5):
        from wingsmith.adapters.gateway import LocalGatewayClient

        tmp = Path(tempfile.mkdtemp(prefix="wingsmith-bench-gateway-"))
        token = tmp / "token"
        token.write_text(os.urandom(16).hex())
        self.east, self.west = FrontendProcess("sim-east"), FrontendProcess("sim-west")
        port = free_port()
        self.gateway = subprocess.Popen([sys.executable, "-m", "gateway", "--port", str(port), "--state-dir",
                                         str(tmp / "state"), "--admin-token-ref", f"file:{token}", "--probe-interval",
                                         str(probe_interval), "--log-level", "ERROR"])
        self.url = f"http://127.0.0.1:{port}"
        try:
            wait_http(self.url + "/healthz")
        except RuntimeError:
            self.close()
            raise
        self.admin = LocalGatewayClient(self.url, f"file:{token}")

    def route(self, *frontends: FrontendProcess) -> None:
        from wingsmith.domain.gateway import Backend, EndpointRoutes
        self.admin.set_routes(EndpointRoutes(model_name=MODEL, backends=[
            Backend(id=f"{f.cluster}/{MODEL}", cluster=f.cluster, workload_id="bench", url=f.url, weight=1)
            for f in frontends]))

    def close(self) -> None:
        if getattr(self, "admin", None) is not None:
            self.admin.close()
        self.gateway.terminate()
        self.gateway.wait(10)
        for f in (self.east, self.west):
            if f.proc.poll() is None:
                f.proc.terminate()
                f.proc.wait(10)

    def __enter__(self) -> GatewayRig:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class LiteLLMProxy:
    """The LiteLLM proxy (`litellm[proxy]` from the package index, in its own virtualenv: `python` is
    that virtualenv's interpreter) routing the model to one frontend, as the gateway does; stopped on exit."""

    def __init__(self, python: str, frontend: FrontendProcess):
        self.dir = Path(tempfile.mkdtemp(prefix="wingsmith-bench-litellm-"))
        config = self.dir / "config.yaml"
        config.write_text(json.dumps({"model_list": [{"model_name": MODEL, "litellm_params": {
            "model": f"openai/{MODEL}", "api_base": frontend.url + "/v1", "api_key": "none"}}],
            "litellm_settings": {"telemetry": False}}))  # JSON is YAML
        port = free_port()
        # It refuses to start without a master key, and then wants it on every request.
        key = "sk-" + os.urandom(16).hex()
        self.headers = {"authorization": f"Bearer {key}"}
        self.proc = subprocess.Popen([python, "-m", "litellm.proxy.proxy_cli", "--config", str(config), "--port",
                                      str(port), "--host", "127.0.0.1", "--num_workers", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False",
                                          "LITELLM_MASTER_KEY": key})
        self.url = f"http://127.0.0.1:{port}"
        try:
            wait_http(self.url + "/health/liveliness", timeout=120)
        except RuntimeError:
            self.close()
            raise

    def close(self) -> None:
        stop_process(self.proc, 10)

    def __enter__(self) -> LiteLLMProxy:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def first_byte(http: httpx.Client, url: str) -> float:
    """Seconds from sending a streamed chat completion to its first body bytes (the rest is read out)."""
    t = time.perf_counter()
    with http.stream("POST", url + "/v1/chat/completions", json={**BODY, "stream": True}) as r:
        chunks = r.iter_raw()
        next(chunks)
        took = time.perf_counter() - t
        for _ in chunks:
            pass
    return took


def paired_first_byte(http: httpx.Client, direct_url: str, via_url: str, n: int) -> tuple[list[float], list[float]]:
    """Time to the first streamed byte straight to the frontend and through the gateway, in turn
    (`rotated`, as `paired_latency`, so both series see the same moments of the machine's load): (direct, via)."""
    for _ in range(10):
        first_byte(http, direct_url)
        first_byte(http, via_url)
    out: tuple[list[float], list[float]] = ([], [])
    for j in rotated(2, n):
        out[j].append(first_byte(http, (direct_url, via_url)[j]))
    return out


def throughput(url: str, seconds: float, connections: int, headers: dict[str, str] | None = None) -> dict[str, float]:
    """Requests per second `url` answers to `connections` keep-alive connections sending the chat
    completion back to back for `seconds`, and their latency. The client is raw asyncio sockets with
    the request's bytes built once, so the client's own cost stays far below the server's."""
    return asyncio.run(_throughput(url, seconds, connections, headers or {}))


async def _throughput(url: str, seconds: float, connections: int, headers: dict[str, str]) -> dict[str, float]:
    parts = urlsplit(url)
    body = json.dumps(BODY).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (f"POST {parts.path}/v1/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n{extra}"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                writer.write(request)
                await read_answer(reader)
                latencies.append(time.perf_counter() - started)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - started
    ms = [x * 1000 for x in latencies]
    return {"connections": connections, "seconds": round(elapsed, 3), "requests": len(ms),
            "rps": round(len(ms) / elapsed, 1), "p50_ms": round(pct(ms, 50), 3), "p99_ms": round(pct(ms, 99), 3)}


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 answer of known length from a kept-alive connection, its body returned; anything but a
    200 with a Content-Length is an error (the raw-socket clients of the benches)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    if not head.startswith(b"HTTP/1.1 200") or length is None:
        raise RuntimeError(f"unexpected answer: {head[:200]!r}")
    return await reader.readexactly(int(length.group(1)))


def rss_mb(pid: int) -> float:
    """Resident memory of a process, MB (what the server holds, children not counted)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def show(name: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(f"  {name:<28} n={len(ms):<5} p50={pct(ms, 50):7.3f} ms  p99={pct(ms, 99):7.3f} ms  "
          f"mean={statistics.fmean(ms):7.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--failover-clients", type=int, default=4)
    parser.add_argument("--probe-interval", type=float, default=0.5)
    parser.add_argument("--frontend", nargs=2, metavar=("PORT", "CLUSTER"), help=argparse.SUPPRESS)
    parser.add_argument("--pipe", nargs=2, type=int, metavar=("PORT", "BACKEND_PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.frontend:
        serve_frontend(int(args.frontend[0]), args.frontend[1])
        return 0
    if args.pipe:
        serve_pipe(*args.pipe)
        return 0

    with GatewayRig(args.probe_interval) as rig:
        east, gw_url, admin = rig.east, rig.url, rig.admin
        print(f"gateway latency, {args.requests} non-streaming chat completions each way, alternating "
              "(one client, keep-alive)")
        rig.route(east)
        with httpx.Client(timeout=10, trust_env=False) as http:
            direct, via = paired_latency(http, east.url, gw_url, args.requests)
            show("direct to the frontend", direct)
            show("through the gateway", via)
            print(f"  added latency: p50 {1000 * (pct(via, 50) - pct(direct, 50)):.3f} ms, "
                  f"p99 {1000 * (pct(via, 99) - pct(direct, 99)):.3f} ms; "
                  f"p99 ratio {pct(via, 99) / pct(direct, 99):.2f}")
            d_fb, g_fb = paired_first_byte(http, east.url, gw_url, max(100, args.requests // 10))
            show("first streamed byte, direct", d_fb)
            show("first streamed byte, gateway", g_fb)
            print(f"  added time to first byte: p50 {1000 * (pct(g_fb, 50) - pct(d_fb, 50)):.3f} ms")

        print(f"\nfailover: {args.failover_clients} clients in a loop, route {{sim-east: 1, sim-west: 1}}, "
              "sim-east's frontend process is killed (SIGKILL)")
        rig.route(east, rig.west)
        stop = threading.Event()
        results: list[tuple[float, float, int]] = []  # (start, end, status)
        lock = threading.Lock()

        def client() -> None:
            with httpx.Client(timeout=10, trust_env=False) as http:
                while not stop.is_set():
                    t = time.monotonic()
                    try:
                        status = http.post(gw_url + "/v1/chat/completions", json=BODY).status_code
                    except httpx.HTTPError:
                        status = -1
                    with lock:
                        results.append((t, time.monotonic(), status))

        threads = [threading.Thread(target=client) for _ in range(args.failover_clients)]
        for th in threads:
            th.start()
        time.sleep(1.0)
        before = admin.status(MODEL).backends[0].requests
        killed_at = time.monotonic()
        east.kill()
        while not admin.status(MODEL).backends[0].cooling_down:
            time.sleep(0.0005)
        detected = time.monotonic() - killed_at
        time.sleep(1.0)
        east_status = admin.status(MODEL).backends[0]
        dead_hits = east_status.requests - before
        east.start()  # same port: the probe finds it again
        restarted_at = time.monotonic()
        while admin.status(MODEL).backends[0].cooling_down:
            time.sleep(0.005)
        back = time.monotonic() - restarted_at
        time.sleep(0.3)
        stop.set()
        for th in threads:
            th.join()
        around = [end - start for start, end, _ in results if end >= killed_at and start <= killed_at + 1.0]
        errors = sum(1 for *_, status in results if status != 200)
        print(f"  time from the kill to no new requests for sim-east: {1000 * detected:.2f} ms")
        print(f"  requests that reached the dead frontend (each retried on sim-west): {dead_hits}")
        print(f"  client errors: {errors} of {len(results)} requests")
        print(f"  slowest request in the second after the kill: {1000 * max(around):.2f} ms "
              f"(p50 {1000 * pct(around, 50):.2f} ms)")
        print(f"  time from the frontend's restart to taking traffic again (probe every "
              f"{args.probe_interval} s): {1000 * back:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
