"""Simulated OpenAI-compatible frontends, one per DynamoGraphDeployment, served at
`<cluster frontend base URL>/<namespace>/<dgd name>` (`/v1/models`, `/v1/chat/completions`,
`/v1/completions`, `/health`, `/metrics`, `/sim/load`). Replies are deterministic and name the
cluster and deployment, so a test or the gateway can tell which deployment answered; how long they
take is the load model's (`load_model.py`, `serving.py`): at once by default, like a loaded engine
when the deployment has a load profile."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from sim.kube.faults import Faults
from sim.kube.load_model import (
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROFILE,
    MAX_OUTPUT_TOKENS,
    PROFILE_ANNOTATION,
    LoadSettings,
    input_tokens,
    parse_profile,
)
from sim.kube.serving import Engine, EngineConfig, EngineGone, Run

log = logging.getLogger(__name__)
_WINDOW = (1.0, 3600.0)  # bounds of `/sim/load?window=` (seconds); 60 by default


@dataclass(frozen=True)
class Frontend:
    cluster: str
    namespace: str
    name: str
    models: tuple[str, ...]  # empty until each worker component has a ready replica: nothing registered
    replicas: int = 1  # whole ready replicas of the engine components: what the load is spread over
    max_num_seqs: int | None = None  # the engine's own `--max-num-seqs`, if its command line sets one
    load_profile: str | None = None  # the DGD's `wingsmith.dev/sim-load-profile` annotation, as written

    def reply(self, model: str, prompt: str) -> str:
        key = f"{self.cluster}/{self.namespace}/{self.name}/{model}/{prompt}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        return f"Hello from {self.name} in {self.namespace} on {self.cluster}, serving {model} ({digest})."


class Frontends:
    """Which frontends run, per cluster, with the engine behind each; the operator publishes and
    removes them, each cluster registers its load settings (`use_settings`)."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str, str], Frontend] = {}
        self._engines: dict[tuple[str, str, str], Engine] = {}
        self._settings: dict[str, LoadSettings] = {}
        self._warned: dict[tuple[str, str, str], str] = {}  # the bad annotation last logged, per deployment
        self._lock = threading.Lock()
        self.created = int(time.time())

    def use_settings(self, cluster: str, settings: LoadSettings) -> None:
        self._settings[cluster] = settings

    def publish(self, cluster: str, namespace: str, name: str, models: list[str], *, replicas: int = 1,
                max_num_seqs: int | None = None, load_profile: str | None = None) -> None:
        frontend = Frontend(cluster, namespace, name, tuple(models), replicas, max_num_seqs, load_profile)
        with self._lock:
            self._running[(cluster, namespace, name)] = frontend
        self.engine(frontend)  # a new replica count lets waiting requests in now, not at the next arrival

    def remove(self, cluster: str, namespace: str, name: str) -> None:
        with self._lock:
            self._running.pop((cluster, namespace, name), None)
            engine = self._engines.pop((cluster, namespace, name), None)
            self._warned.pop((cluster, namespace, name), None)
        if engine is not None:
            engine.stop()

    def engine(self, frontend: Frontend) -> Engine:
        """The frontend's engine, configured by its current profile and replicas."""
        key = (frontend.cluster, frontend.namespace, frontend.name)
        config = self._config(frontend)
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = Engine(config)
                if key in self._running:  # not for a request that raced its frontend's removal
                    self._engines[key] = engine
        engine.configure(config)
        return engine

    def _config(self, frontend: Frontend) -> EngineConfig:
        """The profile in force: the admin's for this deployment, else its annotation, else the
        cluster's default, else the built-in one (instantaneous). A bad annotation is logged once."""
        settings = self._settings.get(frontend.cluster) or LoadSettings()
        profile, source, error = settings.profile_for(frontend.namespace, frontend.name), "admin", None
        if profile is None and frontend.load_profile is not None:
            profile, error = parse_profile(frontend.load_profile)
            source = "annotation"
            if error is not None:
                self._warn(frontend, error)
        if profile is None:
            profile, source = ((settings.default, "cluster") if settings.default is not None
                               else (DEFAULT_PROFILE, "default"))
        slots = profile.max_num_seqs or frontend.max_num_seqs or DEFAULT_MAX_NUM_SEQS
        return EngineConfig(profile, source, frontend.replicas, slots, error)

    def _warn(self, frontend: Frontend, error: str) -> None:
        key = (frontend.cluster, frontend.namespace, frontend.name)
        text = frontend.load_profile or ""
        with self._lock:
            if self._warned.get(key) == text:
                return
            self._warned[key] = text
        log.warning("simulated deployment %s/%s on %s: annotation %s ignored (%s); the default load profile "
                    "applies", frontend.namespace, frontend.name, frontend.cluster, PROFILE_ANNOTATION, error)

    def get(self, cluster: str, namespace: str, name: str) -> Frontend | None:
        with self._lock:
            return self._running.get((cluster, namespace, name))

    def running(self, cluster: str | None = None) -> list[Frontend]:
        with self._lock:
            return [f for (c, _, _), f in sorted(self._running.items()) if cluster in (None, c)]


def _error(status: int, message: str, kind: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def _text_chars(content: Any) -> int:
    """How much text a message's content or a prompt carries (string, list of text parts, or other JSON)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return sum(len(p["text"]) if isinstance(p.get("text"), str) else len(json.dumps(p)) for p in content)
    return len(json.dumps(content)) if content is not None else 0


def _input_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        messages = body["messages"] if isinstance(body["messages"], list) else []
        return input_tokens(sum(_text_chars(m.get("content")) for m in messages if isinstance(m, dict)))
    return input_tokens(_text_chars(body.get("prompt", "")))


def _output_tokens(body: dict[str, Any]) -> int | str:
    """`max_completion_tokens` or `max_tokens` (clamped), the default when neither; or what is wrong."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{key} must be a positive integer"
        return min(value, MAX_OUTPUT_TOKENS)
    return DEFAULT_OUTPUT_TOKENS


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
    if route in ("/sim/load", "/metrics") and request.method == "GET":
        return _measured(frontends, frontend, route, request)
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
        output = _output_tokens(body)
        if isinstance(output, str):
            return _error(400, output, "invalid_request_error", "invalid_max_tokens")
        injected = faults.frontends.get(frontend.name) if faults else None
        if injected is not None:
            if injected.latency:
                await asyncio.sleep(injected.latency)
            if faults is not None and faults.draw(injected.error_rate, "frontend_error"):
                return _error(500, "injected fault: the engine failed this request", "server_error", "engine_error")
        engine = frontends.engine(frontend)
        return await _completion(frontend, engine, (_input_tokens(body), output), route == "/v1/chat/completions",
                                 model, body)
    return _error(404, f"no route {request.method} {route}", "not_found_error", "route_not_found")


def _measured(frontends: Frontends, frontend: Frontend, route: str, request: Request) -> Response:
    """What the deployment's engine sees: `/metrics` (Prometheus) or `/sim/load` (JSON, `?window=`)."""
    engine = frontends.engine(frontend)
    if route == "/metrics":
        return Response(engine.metrics(frontend.models[0] if frontend.models else frontend.name),
                        media_type=CONTENT_TYPE_LATEST)
    window = _window(request.query_params.get("window"))
    if window is None:
        return _error(400, f"window must be a number of seconds from {_WINDOW[0]:g} to {_WINDOW[1]:g}",
                      "invalid_request_error", "invalid_window")
    return JSONResponse({"deployment": f"{frontend.namespace}/{frontend.name}", "cluster": frontend.cluster,
                         **engine.report(window)})


def _window(text: str | None) -> float | None:
    if text is None:
        return 60.0
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and _WINDOW[0] <= value <= _WINDOW[1] else None


def _stopped() -> JSONResponse:
    return _error(503, "the deployment stopped serving while the request waited", "service_unavailable",
                  "deployment_stopped")


async def _completion(frontend: Frontend, engine: Engine, tokens: tuple[int, int], chat: bool, model: str,
                      body: dict[str, Any]) -> Response:
    """The reply, paced by the engine: the first token after the wait and the prefill, then one token
    per decode step; streamed as SSE chunks as their tokens come out, or all at the end. A streamed
    request joins the engine when its body starts, so a client gone before that holds no slot."""
    prompt = _prompt(body)
    text = frontend.reply(model, prompt)
    ident = ("chatcmpl-" if chat else "cmpl-") + hashlib.sha256(text.encode()).hexdigest()[:16]
    created = int(time.time())
    isl, osl = tokens
    usage = {"prompt_tokens": isl, "completion_tokens": osl, "total_tokens": isl + osl}
    kind = "chat.completion" if chat else "text_completion"
    if not body.get("stream"):
        try:
            await _through(engine.request(isl, osl))
        except EngineGone:
            return _stopped()
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return JSONResponse({"id": ident, "object": kind, "created": created, "model": model,
                             "choices": [choice], "usage": usage})

    async def events() -> AsyncIterator[bytes]:
        words = text.split(" ")
        run: Run | None = None
        try:
            run = engine.request(isl, osl)
            await run.first_token()
            for i, word in enumerate(words):
                # The words are spread over the tokens: the first with the first token, the last with the last.
                await run.token(i * (run.output_tokens - 1) // max(len(words) - 1, 1))
                piece = word if i == 0 else " " + word
                delta: dict[str, Any] = {"index": 0, "finish_reason": None}
                if chat:
                    delta["delta"] = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                else:
                    delta["text"] = piece
                yield _sse({"id": ident, "object": f"{kind}.chunk", "created": created, "model": model,
                            "choices": [delta]})
            await run.token(run.output_tokens - 1)
        except EngineGone:
            yield _sse({"error": {"message": "the deployment stopped serving while the request waited",
                                  "type": "service_unavailable", "code": "deployment_stopped"}})
            return
        finally:
            if run is not None:
                run.close()
        last: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        last.update({"delta": {}} if chat else {"text": ""})
        final = {"id": ident, "object": f"{kind}.chunk", "created": created, "model": model, "choices": [last]}
        if (body.get("stream_options") or {}).get("include_usage"):
            final["usage"] = usage
        yield _sse(final)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _through(run: Run) -> None:
    """Run a request to its last token (and out of the engine, however it ends)."""
    try:
        await run.first_token()
        await run.token(run.output_tokens - 1)
    finally:
        run.close()


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()
