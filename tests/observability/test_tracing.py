"""One journey is one trace: the API request that registers an artifact, the workflow it starts, the
resolve activity the workflow runs and that activity's request to the Hub, all under one trace id,
each span a descendant of the API's. Real API app, real Temporal dev server, real Postgres, the real
huggingface_hub client against the offline Hub; spans caught by an in-memory exporter."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.app import create_app
from api.auth import TokenTable
from sim.hub import start_hub_server
from tests.conftest import unique_queue
from tests.support import running_worker, wait_until
from wingsmith.adapters.logs import _trace_ids
from wingsmith.adapters.tracing import configure_tracing
from wingsmith.domain.config import Settings
from worker.registry import WorkerDeps

TOKENS = {"tok-olga": {"name": "olga", "roles": ["operator"]}}


@pytest.fixture(scope="module")
def spans():
    provider = configure_tracing("wingsmith-test")
    assert provider is not None, "tracing is off in this environment (OTEL_SDK_DISABLED?)"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.fixture(scope="module")
def hub():
    handle = start_hub_server()
    yield handle
    handle.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def api_and_worker(spans, hub, tmp_path, pg_pool, temporal_client):
    settings = Settings(home=tmp_path / "api", hf_endpoint=hub.url, task_queue=unique_queue("trace"),
                        auth_tokens=json.dumps(TOKENS), log_format="json")
    # The worker gets a home of its own, so its resolver cannot answer from a cache the API filled.
    deps = WorkerDeps(settings=settings.model_copy(update={"home": tmp_path / "worker"}), db=pg_pool)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    async with running_worker(temporal_client, deps), \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        yield api


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def test_register_is_one_trace_from_api_to_the_hub(api_and_worker, spans, hub):
    spans.clear()
    r = await api_and_worker.post("/v1/artifacts", json={"source": "hf:moonshotai/Kimi-K3"},
                                  headers={"Authorization": "Bearer tok-olga"})
    assert r.status_code == 202, r.text

    def finished() -> list[ReadableSpan]:
        return [s for s in spans.get_finished_spans() if s.name == "RunActivity:save_draft"]

    async def saved():
        return finished()
    await wait_until(saved, timeout=60, what="the draft to be saved")

    request = next(s for s in spans.get_finished_spans() if s.name == "POST /v1/artifacts")
    trace = [s for s in spans.get_finished_spans() if s.context.trace_id == request.context.trace_id]
    by_id = {s.context.span_id: s for s in trace}
    names = {s.name for s in trace}
    for expected in ("StartWorkflow:ArtifactWorkflow", "RunWorkflow:ArtifactWorkflow",
                     "StartActivity:resolve_artifact", "RunActivity:resolve_artifact"):
        assert expected in names, sorted(names)
        span = next(s for s in trace if s.name == expected)
        assert "POST /v1/artifacts" in _ancestors(span, by_id), (expected, _ancestors(span, by_id))

    # The Hub request made by the resolve activity (huggingface_hub speaks httpx) hangs under it.
    hub_calls = [s for s in trace if s.kind.name == "CLIENT" and str(
        (s.attributes or {}).get("url.full") or (s.attributes or {}).get("http.url", "")).startswith(hub.url)]
    under_activity = [s for s in hub_calls if "RunActivity:resolve_artifact" in _ancestors(s, by_id)]
    assert under_activity, [(s.name, dict(s.attributes or {}), _ancestors(s, by_id)) for s in hub_calls]
    # TracingInterceptor hangs the workflow's run and its activities side by side under the start.
    assert {"StartActivity:resolve_artifact", "StartWorkflow:ArtifactWorkflow"} <= set(
        _ancestors(under_activity[0], by_id))


def test_log_lines_carry_the_trace_id(spans):
    from opentelemetry import trace
    with trace.get_tracer("test").start_as_current_span("a step") as span:
        fields = _trace_ids(logging.getLogger("x"), "info", {"event": "hello"})
    assert fields["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert fields["span_id"] == format(span.get_span_context().span_id, "016x")
    assert "trace_id" not in _trace_ids(logging.getLogger("x"), "info", {"event": "outside a span"})
