"""The backend client the gateway should use, by measurement: a kept-alive POST round trip to a local
uvicorn backend, aiohttp against httpx's AsyncClient, in turn, on uvloop (docs/design-choices.md).

    .venv/bin/python bench/gateway_clients.py [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time

import aiohttp
import httpx
import uvicorn
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ANSWER = json.dumps({"id": "x", "choices": [{"message": {"content": "hello"}}]}).encode()
REQUEST = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
HEADERS = {"content-type": "application/json"}


async def chat(request: Request) -> Response:
    await request.body()
    return Response(ANSWER, media_type="application/json")


def serve() -> tuple[uvicorn.Server, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]),
                                           log_level="warning", access_log=False))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions"


async def measure(url: str, n: int, rounds: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False) as session, \
            httpx.AsyncClient() as client:
        for _ in range(rounds):
            for name in ("aiohttp", "httpx"):
                took = []
                for _ in range(n):
                    started = time.perf_counter()
                    if name == "aiohttp":
                        async with session.post(url, data=REQUEST, headers=HEADERS) as resp:
                            await resp.read()
                    else:
                        await client.post(url, content=REQUEST, headers=HEADERS)
                    took.append(time.perf_counter() - started)
                took.sort()
                print(f"{name:<8} p50 {took[n // 2] * 1000:.3f} ms  p99 {took[int(n * 0.99)] * 1000:.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server, url = serve()
    try:
        uvloop.run(measure(url, args.requests, args.rounds))
    finally:
        server.should_exit = True
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
