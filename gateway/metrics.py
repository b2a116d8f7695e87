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
from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from gateway.table import RouteTable

UNROUTED = "unrouted"
NO_BACKEND = "none"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class _Timings:
    """One histogram series: a count per bucket (not yet cumulative), their sum and total."""

    __slots__ = ("buckets", "sum", "count")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_LATENCY_BUCKETS) + 1)  # the last one: past the largest bound (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(_LATENCY_BUCKETS, seconds)] += 1  # a bucket counts values <= its bound
        self.sum += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*(str(float(b)) for b in _LATENCY_BUCKETS), "+Inf"), self.buckets, strict=True):
            running += n
            out.append((bound, running))
        return out


class GatewayMetrics:
    """One registry per gateway app, so several gateways in one test process keep their own counts.

    The counts are plain Python numbers, turned into Prometheus families only when scraped: the
    client library's counters and histograms take a lock and check their state on every call, three
    calls a request on the hot path. The gateway counts from its one event loop, so no lock is needed."""

    def __init__(self, table: RouteTable):
        self.table = table
        self.registry = CollectorRegistry(auto_describe=True)
        self._answers: dict[tuple[str, str, str], int] = {}
        self._durations: dict[tuple[str, str], _Timings] = {}
        self._first_bytes: dict[tuple[str, str], _Timings] = {}
        self._retries: dict[str, int] = {}
        self._cooldowns: dict[str, int] = {}
        self.registry.register(_Counts(self))
        self.registry.register(_LiveTable(table))
        table.cooldown_listeners.append(lambda state: self._add(self._cooldowns, state.backend.id))

    @staticmethod
    def _add(counts: dict[str, int], key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    def retried(self, endpoint: str) -> None:
        self._add(self._retries, endpoint)

    def first_byte(self, endpoint: str, backend: str, start: float) -> None:
        """The first body byte of a backend's answer left for the client (`start`: perf_counter at arrival)."""
        self._series(self._first_bytes, (endpoint, backend)).observe(time.perf_counter() - start)

    def answered(self, endpoint: str, backend: str, code: int, start: float) -> None:
        """The last byte of an answer left (or the relay ended): count it and time it. `endpoint` is
        UNROUTED unless the model is routed; `backend` is NO_BACKEND for the gateway's own answers."""
        key = (endpoint, backend, str(code))
        self._answers[key] = self._answers.get(key, 0) + 1
        self._series(self._durations, (endpoint, backend)).observe(time.perf_counter() - start)

    @staticmethod
    def _series(series: dict[tuple[str, str], _Timings], key: tuple[str, str]) -> _Timings:
        found = series.get(key)
        if found is None:
            found = series[key] = _Timings()
        return found

    async def page(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _Counts(Collector):
    """The gateway's counts as Prometheus families, at scrape time (names and labels as documented above)."""

    def __init__(self, metrics: GatewayMetrics):
        self.m = metrics

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        m = self.m
        requests = CounterMetricFamily("wingsmith_gateway_requests",
                                       "Requests answered, by endpoint, backend and status code.",
                                       labels=["endpoint", "backend", "code"])
        for key, n in m._answers.items():
            requests.add_metric(list(key), n)
        retries = CounterMetricFamily("wingsmith_gateway_retries", "Requests retried on another backend.",
                                      labels=["endpoint"])
        for endpoint, n in m._retries.items():
            retries.add_metric([endpoint], n)
        cooldowns = CounterMetricFamily("wingsmith_gateway_cooldowns",
                                        "Backends that started cooling down after a failure.", labels=["backend"])
        for backend, n in m._cooldowns.items():
            cooldowns.add_metric([backend], n)
        out: list[Metric] = [requests, retries, cooldowns]
        for name, doc, series in (
                ("wingsmith_gateway_request_duration_seconds", "From the request's arrival to the last byte relayed.",
                 m._durations),
                ("wingsmith_gateway_time_to_first_byte_seconds",
                 "From the request's arrival to the first body byte relayed.", m._first_bytes)):
            family = HistogramMetricFamily(name, doc, labels=["endpoint", "backend"])
            for (endpoint, backend), timings in series.items():
                family.add_metric([endpoint, backend], timings.cumulative(), timings.sum)
            out.append(family)
        return out


class _LiveTable(Collector):
    """In-flight requests and cool-downs as the routing table holds them at scrape time."""

    def __init__(self, table: RouteTable):
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
