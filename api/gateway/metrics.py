"""The local gateway's Prometheus metrics, on its own `GET /metrics` (no token, as exporters go; it
holds counts per endpoint and backend, both set by the plane, never anything a client sent).

    wingsmith_gateway_requests_total{endpoint,backend,code}         answers, by the backend that gave them
    wingsmith_gateway_request_duration_seconds{endpoint,backend}    to the last byte relayed
    wingsmith_gateway_time_to_first_byte_seconds{endpoint,backend}  to the first body byte relayed
    wingsmith_gateway_retries_total{endpoint}                       requests sent to a second backend
    wingsmith_gateway_cooldowns_total{backend}                      backends that started cooling down
    wingsmith_gateway_in_flight_requests{endpoint,backend}          being answered now (read from the table)
    wingsmith_gateway_backend_cooling_down{endpoint,backend}        1 while cooling down

A request for a model the gateway does not route is counted under endpoint "unrouted" (a client
can send any name; only routed names become label values) and backend "none", like the gateway's
own refusals (503 no backend, 502 all failed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from api.gateway.table import RouteTable

UNROUTED = "unrouted"
NO_BACKEND = "none"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class GatewayMetrics:
    """One registry per gateway app, so several gateways in one test process keep their own counts."""

    def __init__(self, table: RouteTable, backend_header: str | None = None):
        # `backend_header` is no longer read (the proxy names the backend itself); kept for callers.
        self.table = table
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("wingsmith_gateway_requests",
                                "Requests answered, by endpoint, backend and status code.",
                                ["endpoint", "backend", "code"], registry=self.registry)
        self.duration = Histogram("wingsmith_gateway_request_duration_seconds",
                                  "From the request's arrival to the last byte relayed.", ["endpoint", "backend"],
                                  buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.first_byte_seconds = Histogram("wingsmith_gateway_time_to_first_byte_seconds",
                                            "From the request's arrival to the first body byte relayed.",
                                            ["endpoint", "backend"], buckets=_LATENCY_BUCKETS,
                                            registry=self.registry)
        self.retries = Counter("wingsmith_gateway_retries", "Requests retried on another backend.", ["endpoint"],
                               registry=self.registry)
        self.cooldowns = Counter("wingsmith_gateway_cooldowns", "Backends that started cooling down after a failure.",
                                 ["backend"], registry=self.registry)
        self.registry.register(_LiveTable(table))
        # The labelled series by label values: `labels()` takes a lock and builds its key on every
        # call, twice or three times a request otherwise. Values are routed names and backend ids.
        self._timers: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._answers: dict[tuple[str, str, str], Any] = {}
        table.cooldown_listeners.append(lambda state: self.cooldowns.labels(state.backend.id).inc())

    def retried(self, endpoint: str) -> None:
        self.retries.labels(endpoint).inc()

    def first_byte(self, endpoint: str, backend: str, start: float) -> None:
        """The first body byte of a backend's answer left for the client (`start`: perf_counter at arrival)."""
        self._timer(endpoint, backend)[0].observe(time.perf_counter() - start)

    def answered(self, endpoint: str, backend: str, code: int, start: float) -> None:
        """The last byte of an answer left (or the relay ended): count it and time it. `endpoint` is
        UNROUTED unless the model is routed; `backend` is NO_BACKEND for the gateway's own answers."""
        key = (endpoint, backend, str(code))
        answers = self._answers.get(key)
        if answers is None:
            answers = self._answers[key] = self.requests.labels(*key)
        answers.inc()
        self._timer(endpoint, backend)[1].observe(time.perf_counter() - start)

    def _timer(self, endpoint: str, backend: str) -> tuple[Any, Any]:
        """(time to first byte, duration) of one endpoint and backend."""
        key = (endpoint, backend)
        timer = self._timers.get(key)
        if timer is None:
            timer = self._timers[key] = (self.first_byte_seconds.labels(*key), self.duration.labels(*key))
        return timer

    async def page(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _LiveTable(Collector):
    """In-flight requests and cool-downs as the routing table holds them at scrape time."""

    def __init__(self, table: RouteTable, backend_header: str | None = None):
        # `backend_header` is no longer read (the proxy names the backend itself); kept for callers.
        self.table = table

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily("wingsmith_gateway_in_flight_requests", "", labels=["endpoint", "backend"]),
                GaugeMetricFamily("wingsmith_gateway_backend_cooling_down", "", labels=["endpoint", "backend"])]

    def collect(self) -> Iterable[Metric]:
        in_flight = GaugeMetricFamily("wingsmith_gateway_in_flight_requests", "Requests being answered now.",
                                      labels=["endpoint", "backend"])
        cooling = GaugeMetricFamily("wingsmith_gateway_backend_cooling_down",
                                    "1 while a backend gets no new requests after a failure.",
                                    labels=["endpoint", "backend"])
        for endpoint in self.table.models():
            status = self.table.status(endpoint)
            for b in status.backends if status else []:
                in_flight.add_metric([endpoint, b.id], b.in_flight or 0)
                cooling.add_metric([endpoint, b.id], 1 if b.cooling_down else 0)
        return [in_flight, cooling]
