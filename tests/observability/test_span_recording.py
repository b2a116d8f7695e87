"""Spans are recorded only while something reads them (a span processor is attached to the provider);
the trace context, and so the trace id on log lines, is there either way and continues an incoming
`traceparent`. Each test has a provider of its own: the process's global one may already have a
reader attached by another test."""

from __future__ import annotations

import logging

import httpx
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wingsmith.adapters.logs import _trace_ids
from wingsmith.adapters.tracing import PlaneTracerProvider, instrument_fastapi

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


def _reader(provider: PlaneTracerProvider) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_spans_are_dropped_until_a_processor_reads_them():
    provider = PlaneTracerProvider()
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("nobody reads this") as span:
        recording = span.is_recording()
        fields = _trace_ids(logging.getLogger("x"), "info", {"event": "hello"})
    assert not recording
    assert fields["trace_id"] == format(span.get_span_context().trace_id, "032x") != "0" * 32

    exporter = _reader(provider)
    with tracer.start_as_current_span("read") as span:
        recording = span.is_recording()
        fields = _trace_ids(logging.getLogger("x"), "info", {"event": "hello"})
    assert recording
    assert fields["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert [s.name for s in exporter.get_finished_spans()] == ["read"]


def _app(provider: PlaneTracerProvider) -> FastAPI:
    app = FastAPI()

    @app.get("/probe/{item}")
    async def probe(item: str) -> dict:
        span = trace.get_current_span()
        fields = _trace_ids(logging.getLogger("x"), "info", {"event": "probe"})
        return {"recording": span.is_recording(), "trace_id": fields.get("trace_id")}

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"trace_id": _trace_ids(logging.getLogger("x"), "info", {"event": "healthz"}).get("trace_id")}

    instrument_fastapi(app, provider)
    return app


async def _get(app: FastAPI, path: str, **headers: str) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        response = await client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_request_has_a_trace_id_but_no_recorded_span_while_nothing_reads():
    app = _app(PlaneTracerProvider())
    alone = await _get(app, "/probe/a")
    assert alone["recording"] is False and alone["trace_id"] and alone["trace_id"] != "0" * 32
    assert (await _get(app, "/probe/a", traceparent=TRACEPARENT)) == {"recording": False, "trace_id": CALLER_TRACE}
    assert (await _get(app, "/healthz"))["trace_id"] is None  # probes stay untraced


async def test_a_request_is_recorded_once_a_processor_reads():
    provider = PlaneTracerProvider()
    app = _app(provider)
    assert (await _get(app, "/probe/a"))["recording"] is False  # the app's stack is built now, unread
    exporter = _reader(provider)
    assert (await _get(app, "/probe/b", traceparent=TRACEPARENT)) == {"recording": True, "trace_id": CALLER_TRACE}
    assert (await _get(app, "/healthz"))["trace_id"] is None
    [span] = exporter.get_finished_spans()
    assert span.name == "GET /probe/{item}" and span.kind == trace.SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == CALLER_TRACE
    assert (span.attributes or {}).get("http.route") == "/probe/{item}"
