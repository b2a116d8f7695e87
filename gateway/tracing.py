"""Spans for proxied requests, when the gateway traces (`python -m gateway` turns it on when spans
leave the process: `OTEL_EXPORTER_OTLP_ENDPOINT` or `..._TRACES_ENDPOINT`, see wingsmith/adapters/tracing.py).

A client's W3C trace context (`traceparent`, `tracestate`) is continued, not replaced: the gateway's
span is a child of the client's span, in the client's trace, and the backend receives a
`traceparent` naming the gateway's span, so the backend's own spans hang under it. Without an
incoming context the gateway's span starts a trace. When the gateway does not trace, it forwards the
client's headers untouched (gateway/proxy.py).
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span, SpanKind, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_CONTEXT_HEADERS = frozenset({b"traceparent", b"tracestate"})
_W3C = TraceContextTextMapPropagator()


class _AsgiHeaders(Getter[list[tuple[bytes, bytes]]]):
    """Reads the ASGI scope's raw headers (names already lower-case) as the propagator asks."""

    def get(self, carrier: list[tuple[bytes, bytes]], key: str) -> list[str] | None:
        name = key.lower().encode("latin-1")
        values = [v.decode("latin-1") for k, v in carrier if k == name]
        return values or None

    def keys(self, carrier: list[tuple[bytes, bytes]]) -> list[str]:
        return [k.decode("latin-1") for k, _ in carrier]


_GETTER = _AsgiHeaders()


class RequestTracer:
    def __init__(self, provider: TracerProvider):
        self._tracer = provider.get_tracer("wingsmith.gateway")

    def start(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> Span:
        """A server span for one request, continuing the trace its headers carry (if any)."""
        parent = _W3C.extract(headers, getter=_GETTER)
        return self._tracer.start_span(f"{method} {path}", context=parent, kind=SpanKind.SERVER,
                                       attributes={"http.request.method": method, "url.path": path,
                                                   "http.route": path})

    @staticmethod
    def forwarded(span: Span, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """`headers` for the backend with the trace context replaced by one naming `span`."""
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        kept = [(k, v) for k, v in headers if k not in _CONTEXT_HEADERS]
        return kept + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in carrier.items()]

    @staticmethod
    def end(span: Span, code: int | None, endpoint: str, backend: str) -> None:
        span.set_attributes({"wingsmith.endpoint": endpoint, "wingsmith.backend": backend})
        if code is not None:
            span.set_attribute("http.response.status_code", code)
            if code >= 500:
                span.set_status(StatusCode.ERROR)
        span.end()
