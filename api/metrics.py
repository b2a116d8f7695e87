"""The API's Prometheus metrics: requests and their durations by method, route template and status,
and `GET /metrics` to scrape them.

`/metrics` takes no token, as Prometheus exporters conventionally do: it holds counts by route
template and status only (no ids, no bodies, no principals), and scrapers rarely carry bearer
tokens. Put it behind your network policy, or turn it off with WINGSMITH_API_METRICS=false.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

API_REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter("http_requests", "HTTP requests answered, by method, route template and status code.",
                   ["method", "route", "code"], registry=API_REGISTRY)
DURATION = Histogram("http_request_duration_seconds", "Time to answer an HTTP request (to the last body byte).",
                     ["method", "route", "code"], registry=API_REGISTRY,
                     buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
# A client may send any method; only these become label values.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"

router = APIRouter()


@router.get("/metrics", include_in_schema=False, response_class=Response, response_model=None)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(API_REGISTRY), media_type=CONTENT_TYPE_LATEST)


class RequestMetrics:
    """ASGI middleware: the route template comes from the router's match (`scope["route"]`), so
    `/v1/workloads/{workload_id}` is one series however many workloads there are."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}  # an exception that escapes every handler is answered as a 500

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            if route != "/metrics":
                method = scope["method"] if scope["method"] in _METHODS else "other"
                labels = (method, route, str(status["code"]))
                REQUESTS.labels(*labels).inc()
                DURATION.labels(*labels).observe(time.perf_counter() - start)
