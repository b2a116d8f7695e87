"""Real HTTP for every gateway test: the gateway, scripted backends and the simulated clusters each
serve on their own loopback port, from their own thread and event loop."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway import create_gateway_app
from gateway.app import GatewayApp
from gateway.bounds import Bounds
from gateway.serving import gateway_server
from sim.kube.clusters import ClusterSpec, SimulatedClusters, default_cluster_specs
from sim.kube.resources import DEFAULT_CRD_DIR
from wingsmith.adapters.gateway import LocalGatewayClient

MODEL = "kimi-k3"
ENVOY_CRDS = DEFAULT_CRD_DIR


class Served:
    """An ASGI app on 127.0.0.1:<free port> in a thread, until stop(). The gateway's app runs on its
    server (gateway/serving.py: uvicorn with the gateway's bounds), as `python -m gateway` runs
    it; every other app here on plain uvicorn."""

    def __init__(self, app, port: int = 0, bounds: Bounds | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        if isinstance(app, GatewayApp):
            self.server = gateway_server(app, bounds or Bounds(keep_alive_timeout=60))
        else:
            self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                                        timeout_keep_alive=60))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class ScriptedBackend:
    """An OpenAI-compatible frontend whose behaviour a test sets: `mode` is "ok", "error" (HTTP 500),
    "hang-up" (the connection closes before any byte) or "break-mid-stream" (a stream dies after two
    chunks); `chunk_delay` spaces streamed chunks."""

    def __init__(self, name: str, models: tuple[str, ...] = (MODEL,)):
        self.name = name
        self.models = models
        self.mode = "ok"
        self.chunk_delay = 0.0
        self.completions = 0
        self.streams_finished = 0  # streamed answers written to their end ([DONE])
        self.probes = 0
        self.last_headers: list[tuple[bytes, bytes]] = []  # of the last completion request
        self.served = Served(self.app())
        self.url = self.served.url

    def app(self) -> Starlette:
        async def list_models(request: Request) -> Response:
            self.probes += 1
            if self.mode != "ok":
                return JSONResponse({"error": {"message": "down"}}, status_code=503)
            return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

        async def complete(request: Request) -> Response:
            self.completions += 1
            self.last_headers = list(request.headers.raw)
            body = json.loads(await request.body())
            if self.mode == "error" or (self.mode == "break-mid-stream" and not body.get("stream")):
                return JSONResponse({"error": {"message": "engine died", "type": "server_error"}}, status_code=500)
            if self.mode == "hang-up":
                raise RuntimeError("simulated crash before any byte")  # uvicorn drops the connection
            text = f"reply from {self.name} for {body['model']}"
            chat = request.url.path.endswith("/chat/completions")
            if not body.get("stream"):
                choice = {"index": 0, "finish_reason": "stop"}
                choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
                return JSONResponse({"id": "x1", "object": "chat.completion" if chat else "text_completion",
                                     "created": 1, "model": body["model"], "choices": [choice]})

            async def events() -> AsyncIterator[bytes]:
                for i, word in enumerate(text.split(" ")):
                    piece = word if i == 0 else " " + word
                    delta = {"index": 0, "finish_reason": None}
                    delta.update({"delta": {"content": piece}} if chat else {"text": piece})
                    chunk = {"id": "x1", "object": "chat.completion.chunk", "created": 1, "model": body["model"],
                             "choices": [delta]}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                    if self.chunk_delay:
                        await asyncio.sleep(self.chunk_delay)
                    if self.mode == "break-mid-stream" and i == 1:
                        raise RuntimeError("simulated crash mid-stream")
                yield b"data: [DONE]\n\n"
                self.streams_finished += 1
            return StreamingResponse(events(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/models", list_models),
                                 Route("/v1/chat/completions", complete, methods=["POST"]),
                                 Route("/v1/completions", complete, methods=["POST"])])

    def stop(self) -> None:
        self.served.stop()


class RunningGateway:
    def __init__(self, state_dir: Path, token_file: Path, probe_interval: float = 0.1, bounds: Bounds | None = None,
                 **options):
        self.state_dir = state_dir
        self.token_ref = f"file:{token_file}"
        self.token = token_file.read_text().strip()
        self.app = create_gateway_app(state_dir=state_dir, admin_token_ref=self.token_ref,
                                      probe_interval=probe_interval, first_probe_after=0.1, bounds=bounds, **options)
        self.served = Served(self.app, bounds=bounds)
        self.url = self.served.url
        self.client = LocalGatewayClient(self.url, self.token_ref)

    @property
    def table(self):
        return self.app.state.table

    def stop(self) -> None:
        self.client.close()
        self.served.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "gateway-token"
    path.write_text("s3cret-admin-token-for-tests\n")
    return path


@pytest.fixture
def gateway(tmp_path: Path, token_file: Path) -> Iterator[RunningGateway]:
    gw = RunningGateway(tmp_path / "gateway-state", token_file)
    yield gw
    gw.stop()


@pytest.fixture
def backends() -> Iterator[list[ScriptedBackend]]:
    made = [ScriptedBackend("alpha"), ScriptedBackend("beta")]
    yield made
    for b in made:
        b.stop()


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedClusters]:
    """The simulated clusters plus a gateway cluster that also serves the Envoy kinds (sim/kube/crds
    holds the Dynamo CRDs next to the minimal Envoy ones)."""
    specs = [*default_cluster_specs()[:2],
             ClusterSpec(name="sim-gateway", region="us-east", node_pools=[], namespaces=["envoy-ai-gateway"])]
    with SimulatedClusters(specs, home=tmp_path_factory.mktemp("sim"), operator_delay=0.05,
                           crd_directory=ENVOY_CRDS) as clusters:
        yield clusters
