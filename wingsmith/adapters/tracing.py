"""OpenTelemetry tracing for the plane's processes: one journey is one trace, from the API request
through the workflows and activities (Temporal's TracingInterceptor carries the context in headers)
down to the Hub (httpx) and Kubernetes (urllib3) calls.

Every request, workflow and activity always gets a trace context (a trace id, continued from an
incoming `traceparent`), so log lines carry a trace id to follow a journey by. Spans are recorded only
while something reads them, that is while a span processor is attached to the provider: an exporter,
when the standard OTLP variables say where spans go (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, plus `..._HEADERS`, `..._PROTOCOL` as OpenTelemetry documents
them; HTTP/protobuf), or one a test attaches. Otherwise spans are dropped as they start (sampled out:
nothing is gathered that no one would read), and the context they pass on, through Temporal headers
and outgoing requests, says "not sampled", so a process that does export drops its part of that trace
too: give every process (API, worker) the same variables. `OTEL_SDK_DISABLED=true` turns all of it off.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.http import parse_excluded_urls
from opentelemetry.util.types import Attributes
from temporalio.contrib.opentelemetry import TracingInterceptor

_EXPORT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# Scrapes and probes would be most of the spans and say nothing about a journey.
UNTRACED_URLS = "metrics,healthz,readyz,livez"


def exporting() -> bool:
    return any(os.environ.get(name) for name in _EXPORT_VARIABLES)


def disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


class RecordWhenRead(Sampler):
    """`configured` (the OTEL_TRACES_SAMPLER choice, by default parent-based always-on) once `reading`,
    until then drop every span. A dropped span is still a span context with a trace id (a new one, or
    the incoming parent's), which is all log lines and propagation need; building, filling and ending
    a recording span nobody reads was a large part of a cached resolve's time in the API."""

    def __init__(self, configured: Sampler):
        self.configured = configured
        self.reading = False

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None, trace_state: TraceState | None = None) -> SamplingResult:
        sampler = self.configured if self.reading else ALWAYS_OFF
        return sampler.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"RecordWhenRead{{{self.configured.get_description()}}}"


class PlaneTracerProvider(TracerProvider):
    """A TracerProvider whose spans are recorded from the moment a span processor is attached (the
    exporter, or a test's in-memory one), and dropped at the start before that."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.recording = RecordWhenRead(self.sampler)  # the sampler the SDK chose from the environment
        self.sampler = self.recording

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        super().add_span_processor(span_processor)
        self.recording.reading = True


def configure_tracing(service_name: str) -> TracerProvider | None:
    """Install this process's tracer provider (once; later calls return it) and instrument httpx,
    httpx2 and urllib3, whose clients reach the gateway, the Hub and Kubernetes."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    if disabled():
        return None
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or service_name})
    provider = PlaneTracerProvider(resource=resource)
    if exporting():
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    from opentelemetry.instrumentation import httpx as otel_httpx
    from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor
    otel_httpx.HTTPXClientInstrumentor().instrument()
    # huggingface_hub 1.x/2.x speak httpx2, which the same package instruments separately.
    if hasattr(otel_httpx, "HTTPX2ClientInstrumentor"):
        otel_httpx.HTTPX2ClientInstrumentor().instrument()
    URLLib3Instrumentor().instrument()
    return provider


def instrument_fastapi(app: Any, provider: TracerProvider | None = None) -> None:
    """One server span per request (from `provider`, by default this process's). Not the
    instrumentation's span per ASGI message sent or received (`http send`, `http receive`): they say
    nothing about a journey, and opening and closing them was the largest part of a cached resolve's
    time in the API (bench/report.py). With a PlaneTracerProvider, the instrumentation runs only while
    spans are recorded (`_SpanWhenRead`)."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    plain = app.build_middleware_stack  # bound before the instrumentation replaces it: the app without it
    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider, excluded_urls=UNTRACED_URLS,
                                       exclude_spans=["receive", "send"])
    chosen = provider or trace.get_tracer_provider()
    if isinstance(chosen, PlaneTracerProvider):
        traced = app.build_middleware_stack
        app.build_middleware_stack = lambda: _SpanWhenRead(traced(), plain(), chosen)


class _SpanWhenRead:
    """ASGI app: requests go through the OpenTelemetry instrumentation (`traced`) while spans are
    recorded. Otherwise through the same middleware and routes without it (`plain`), under a server
    span that is only a context, continuing the incoming `traceparent` (or starting a trace), so log
    lines, Temporal headers and outgoing calls carry the trace as before. The instrumentation works out
    its span's name and attributes (matching the route a second time, redacting the URL) before the
    sampler drops the span: a quarter of a cached resolve's time in the API, for nothing. (Its HTTP
    metrics go to OpenTelemetry's meter provider, which the plane does not set: its metrics are
    Prometheus's, api/metrics.py.)"""

    def __init__(self, traced: Any, plain: Any, provider: PlaneTracerProvider):
        # `app` is what FastAPI's own telemetry walks to find the instrumentation (and, finding it,
        # adds no server spans of its own).
        self.app = traced
        self.plain = plain
        self._recording = provider.recording
        self._tracer = provider.get_tracer(__name__)
        self._untraced = parse_excluded_urls(UNTRACED_URLS)
        from opentelemetry.instrumentation.asgi import asgi_getter  # the instrumentation's header reader
        self._headers = asgi_getter

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._recording.reading or scope["type"] != "http":
            await self.app(scope, receive, send)
        elif self._untraced.url_disabled(scope["path"]):
            await self.plain(scope, receive, send)
        else:
            parent = extract(scope, getter=self._headers)
            span = self._tracer.start_span(scope["method"], context=parent, kind=SpanKind.SERVER)
            with trace.use_span(span, end_on_exit=True):
                await self.plain(scope, receive, send)


def temporal_interceptors() -> list[TracingInterceptor]:
    """For every client (and so every worker built on it): spans for starts, updates, workflows and
    activities, linked across processes through Temporal headers."""
    return [TracingInterceptor()]


def current_trace_ids() -> dict[str, str]:
    """The current span's ids as log fields, or nothing outside a span."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}
