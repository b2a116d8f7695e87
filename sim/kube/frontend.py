"""Simulated OpenAI-compatible frontends, one per DynamoGraphDeployment, served at
`<cluster frontend base URL>/<namespace>/<dgd name>` (`/v1/models`, `/v1/chat/completions`,
`/v1/completions`, `/health`). Replies are deterministic and name the cluster and deployment, so a
test or the gateway can tell which deployment answered."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from sim.kube.faults import Faults


@dataclass(frozen=True)
class Frontend:
    cluster: str
    namespace: str
    name: str
    models: tuple[str, ...]  # empty until each worker component has a ready replica: nothing registered

    def reply(self, model: str, prompt: str) -> str:
        key = f"{self.cluster}/{self.namespace}/{self.name}/{model}/{prompt}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        return f"Hello from {self.name} in {self.namespace} on {self.cluster}, serving {model} ({digest})."


class Frontends:
    """Which frontends run, per cluster; the operator publishes and removes them."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str, str], Frontend] = {}
        self._lock = threading.Lock()
        self.created = int(time.time())

    def publish(self, cluster: str, namespace: str, name: str, models: list[str]) -> None:
        with self._lock:
            self._running[(cluster, namespace, name)] = Frontend(cluster, namespace, name, tuple(models))

    def remove(self, cluster: str, namespace: str, name: str) -> None:
        with self._lock:
            self._running.pop((cluster, namespace, name), None)

    def get(self, cluster: str, namespace: str, name: str) -> Frontend | None:
        with self._lock:
            return self._running.get((cluster, namespace, name))

    def running(self, cluster: str | None = None) -> list[Frontend]:
        with self._lock:
            return [f for (c, _, _), f in sorted(self._running.items()) if cluster in (None, c)]


def _error(status: int, message: str, kind: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def _prompt(body: dict[str, Any]) -> str:
    if "messages" in body:
        users = [m.get("content") for m in body.get("messages") or []
                 if isinstance(m, dict) and m.get("role") == "user"]
        last = users[-1] if users else ""
        return last if isinstance(last, str) else json.dumps(last)
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


async def handle(frontends: Frontends, request: Request, faults: Faults | None = None) -> Response:
    params = request.path_params
    frontend = frontends.get(params["cluster"], params["namespace"], params["name"])
    if frontend is None:
        return _error(404, f"no frontend for deployment {params['namespace']}/{params['name']} on "
                           f"{params['cluster']}", "not_found_error", "deployment_not_found")
    route = "/" + params["path"].strip("/")
    if route == "/health":
        return JSONResponse({"status": "healthy" if frontend.models else "starting"})
    if route == "/v1/models" and request.method == "GET":
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": frontends.created, "owned_by": "nvidia-dynamo"}
            for m in frontend.models]})
    if route in ("/v1/chat/completions", "/v1/completions") and request.method == "POST":
        try:
            body = json.loads(await request.body() or b"{}")
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object", "invalid_request_error", "invalid_json")
        model = body.get("model")
        if not frontend.models:
            return _error(503, "no model is ready yet on this deployment", "service_unavailable", "model_not_ready")
        if model not in frontend.models:
            return _error(404, f"model {model!r} not found; this deployment serves {list(frontend.models)}",
                          "invalid_request_error", "model_not_found")
        injected = faults.frontends.get(frontend.name) if faults else None
        if injected is not None:
            if injected.latency:
                await asyncio.sleep(injected.latency)
            if faults is not None and faults.draw(injected.error_rate, "frontend_error"):
                return _error(500, "injected fault: the engine failed this request", "server_error", "engine_error")
        return _completion(frontend, route == "/v1/chat/completions", model, body)
    return _error(404, f"no route {request.method} {route}", "not_found_error", "route_not_found")


def _completion(frontend: Frontend, chat: bool, model: str, body: dict[str, Any]) -> Response:
    prompt = _prompt(body)
    text = frontend.reply(model, prompt)
    ident = ("chatcmpl-" if chat else "cmpl-") + hashlib.sha256(text.encode()).hexdigest()[:16]
    created = int(time.time())
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
             "total_tokens": len(prompt.split()) + len(text.split())}
    kind = "chat.completion" if chat else "text_completion"
    if not body.get("stream"):
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return JSONResponse({"id": ident, "object": kind, "created": created, "model": model,
                             "choices": [choice], "usage": usage})

    async def events() -> AsyncIterator[bytes]:
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            delta: dict[str, Any] = {"index": 0, "finish_reason": None}
            if chat:
                delta["delta"] = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            else:
                delta["text"] = piece
            yield _sse({"id": ident, "object": f"{kind}.chunk", "created": created, "model": model, "choices": [delta]})
        last: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        last.update({"delta": {}} if chat else {"text": ""})
        final = {"id": ident, "object": f"{kind}.chunk", "created": created, "model": model, "choices": [last]}
        if (body.get("stream_options") or {}).get("include_usage"):
            final["usage"] = usage
        yield _sse(final)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()
