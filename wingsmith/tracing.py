"""OpenTelemetry tracing for the plane's processes: one journey is one trace, from the API request
through the workflows and activities (Temporal's TracingInterceptor carries the context in headers)
down to the Hub (httpx) and Kubernetes (urllib3) calls.

Spans are always recorded in-process, so log lines carry a trace id to follow a journey by; they
leave the process only when the standard OTLP variables say where to (`OTEL_EXPORTER_OTLP_ENDPOINT`
or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, plus `..._HEADERS`, `..._PROTOCOL` as OpenTelemetry
documents them; HTTP/protobuf). `OTEL_SDK_DISABLED=true` turns all of it off.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.contrib.opentelemetry import TracingInterceptor

_EXPORT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# Scrapes and probes would be most of the spans and say nothing about a journey.
UNTRACED_URLS = "metrics,healthz,readyz,livez"


def exporting() -> bool:
    return any(os.environ.get(name) for name in _EXPORT_VARIABLES)


def disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def configure_tracing(service_name: str) -> TracerProvider | None:
    """Install this process's tracer provider (once; later calls return it) and instrument httpx,
    httpx2 and urllib3, whose clients reach the gateway, the Hub and Kubernetes."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    if disabled():
        return None
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)
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


def instrument_fastapi(app: Any) -> None:
    """One server span per request. Not the instrumentation's span per ASGI message sent or received
    (`http send`, `http receive`): they say nothing about a journey, and opening and closing them was
    the largest part of a cached resolve's time in the API (bench/report.py)."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    FastAPIInstrumentor.instrument_app(app, excluded_urls=UNTRACED_URLS, exclude_spans=["receive", "send"])


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
