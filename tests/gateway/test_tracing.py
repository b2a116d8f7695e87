"""The gateway continues its clients' traces (W3C trace context): its span is the client's span's
child in the client's trace, and the backend is told the gateway's span as its parent. Real HTTP
everywhere; spans caught by an in-memory exporter, and once, from the real `python -m gateway`
process, by a loopback OTLP/HTTP collector."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.gateway.conftest import MODEL, RunningGateway
from tests.gateway.test_local_gateway import MESSAGES, routes
from wingsmith.adapters.gateway import LocalGatewayClient
from wingsmith.local.ports import free_port

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def traced(tmp_path: Path, token_file: Path, spans: InMemorySpanExporter) -> Iterator[RunningGateway]:
    provider = TracerProvider()  # this gateway's own: the test process's global provider stays untouched
    provider.add_span_processor(SimpleSpanProcessor(spans))
    gw = RunningGateway(tmp_path / "state", token_file, tracer_provider=provider)
    yield gw
    gw.stop()


def post(url: str, body: dict, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A chat completion over the standard library's HTTP client: httpx may be instrumented in this
    process (the API app sets tracing up), and would put its own span's context in place of ours."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"content-type": "application/json", **(headers or {})})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def sent_traceparent(backend) -> str:
    return dict((k.decode(), v.decode()) for k, v in backend.last_headers)["traceparent"]


def the_request_span(spans: InMemorySpanExporter) -> ReadableSpan:
    found = [s for s in spans.get_finished_spans() if s.name == "POST /v1/chat/completions"]
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


def test_the_clients_trace_is_continued_and_handed_on(traced, backends, spans):
    traced.client.set_routes(routes((backends[0], 1)))
    status, text = post(traced.url, {"model": MODEL, "messages": MESSAGES},
                        {"traceparent": TRACEPARENT, "tracestate": "vendor=opaque"})
    assert status == 200, text
    span = the_request_span(spans)
    assert format(span.context.trace_id, "032x") == CLIENT_TRACE  # the client's trace, not a new one
    assert span.parent is not None and span.parent.is_remote
    assert format(span.parent.span_id, "016x") == CLIENT_SPAN
    assert span.kind == SpanKind.SERVER
    assert (span.attributes or {})["http.response.status_code"] == 200
    assert (span.attributes or {})["wingsmith.backend"] == f"sim-alpha/{MODEL}"
    # The backend's parent is the gateway's span, in the same trace; the vendors' state goes along.
    assert sent_traceparent(backends[0]) == f"00-{CLIENT_TRACE}-{span.context.span_id:016x}-01"
    assert dict((k.decode(), v.decode()) for k, v in backends[0].last_headers)["tracestate"] == "vendor=opaque"


def test_without_a_client_trace_the_gateway_starts_one(traced, backends, spans):
    traced.client.set_routes(routes((backends[0], 1)))
    assert post(traced.url, {"model": MODEL, "messages": MESSAGES})[0] == 200
    span = the_request_span(spans)
    assert span.parent is None
    flags = int(span.context.trace_flags)  # sampled, and (W3C level 2) a random trace id
    assert sent_traceparent(backends[0]) == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-{flags:02x}"


def test_a_streamed_answer_is_one_span_to_its_last_byte(traced, backends, spans):
    alpha = backends[0]
    alpha.chunk_delay = 0.1
    traced.client.set_routes(routes((alpha, 1)))
    status, text = post(traced.url, {"model": MODEL, "messages": MESSAGES, "stream": True},
                        {"traceparent": TRACEPARENT})
    assert status == 200 and text.rstrip().endswith(b"data: [DONE]"), text
    span = the_request_span(spans)
    assert format(span.context.trace_id, "032x") == CLIENT_TRACE
    assert span.end_time is not None and span.start_time is not None
    assert (span.end_time - span.start_time) / 1e9 >= 0.45  # five words, 0.1 s apart: ended with the stream


def test_an_answer_the_gateway_gives_itself_is_traced_too(traced, backends, spans):
    traced.client.set_routes(routes(("http://127.0.0.1:9", 1)))  # nothing listens: every backend fails
    assert post(traced.url, {"model": MODEL, "messages": MESSAGES}, {"traceparent": TRACEPARENT})[0] == 502
    span = the_request_span(spans)
    assert format(span.context.trace_id, "032x") == CLIENT_TRACE
    assert (span.attributes or {})["http.response.status_code"] == 502
    assert span.status.status_code == StatusCode.ERROR


def test_without_tracing_the_clients_context_is_forwarded_untouched(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    assert post(gateway.url, {"model": MODEL, "messages": MESSAGES}, {"traceparent": TRACEPARENT})[0] == 200
    assert sent_traceparent(backends[0]) == TRACEPARENT


class _Collector(BaseHTTPRequestHandler):
    """OTLP/HTTP (protobuf) on POST /v1/traces: keeps every span it is sent."""

    received: list = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server protocol's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                for scoped in resource.scope_spans:
                    _Collector.received.extend(scoped.spans)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_gateway_process_exports_its_spans_in_the_clients_trace(tmp_path, token_file, backends):
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    _Collector.received = []
    port = free_port()
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
           "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_SDK_DISABLED": "false"}
    gateway = subprocess.Popen([sys.executable, "-m", "gateway", "--port", str(port), "--state-dir",
                                str(tmp_path / "state"), "--admin-token-ref", f"file:{token_file}"], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and gateway.poll() is None, "the gateway did not start"
                time.sleep(0.05)
        with LocalGatewayClient(url, f"file:{token_file}") as admin:
            admin.set_routes(routes((backends[0], 1)))
        assert post(url, {"model": MODEL, "messages": MESSAGES}, {"traceparent": TRACEPARENT})[0] == 200
        deadline = time.monotonic() + 10
        while not [s for s in _Collector.received if s.name == "POST /v1/chat/completions"]:
            assert time.monotonic() < deadline, "no span of the request reached the collector"
            time.sleep(0.05)
        span = next(s for s in _Collector.received if s.name == "POST /v1/chat/completions")
        assert span.trace_id.hex() == CLIENT_TRACE and span.parent_span_id.hex() == CLIENT_SPAN
        assert sent_traceparent(backends[0]) == f"00-{CLIENT_TRACE}-{span.span_id.hex()}-01"
    finally:
        gateway.terminate()
        gateway.wait(10)
        collector.shutdown()
        collector.server_close()
