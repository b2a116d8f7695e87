"""An endpoint's traffic per backend, read from the local gateway's Prometheus metrics: the console
shows these numbers, so it says exactly what Prometheus and the dashboard say (one set of counters,
counted since the gateway started). Quantiles are estimated from the histogram's buckets the way
PromQL's histogram_quantile does (linear within the bucket). Pure: the read itself is in
wingsmith.adapters.gateway.traffic_reader."""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

REQUESTS = "wingsmith_gateway_requests"
DURATION = "wingsmith_gateway_request_duration_seconds"
FIRST_BYTE = "wingsmith_gateway_time_to_first_byte_seconds"
COOLDOWNS = "wingsmith_gateway_cooldowns"
_COUNTED = {REQUESTS + "_total", DURATION + "_bucket", FIRST_BYTE + "_bucket"}


class BackendTraffic(BaseModel):
    requests: int  # answered, any status
    failures: int  # answered with a 5xx
    p50_seconds: float | None  # to the last byte; None before the first request
    p99_seconds: float | None
    ttft_p99_seconds: float | None = None  # to the first byte relayed (time to first token when streaming)
    # Attempts that failed and sent the backend cooling down: the gateway retried them elsewhere, so the
    # client saw no error and no answer was counted for this backend, but the backend did fail them.
    failed_attempts: int = 0

    @property
    def attempts(self) -> int:
        return self.requests + self.failed_attempts

    @property
    def error_rate(self) -> float | None:
        return (self.failures + self.failed_attempts) / self.attempts if self.attempts else None


class BackendCounters(BaseModel):
    """One backend's cumulative counters as the gateway exports them: two readings make a window."""

    requests: int = 0
    failures: int = 0
    cooldowns: int = 0
    duration: dict[float, float] = {}  # histogram bucket upper bound -> cumulative count
    first_byte: dict[float, float] = {}

    def traffic(self) -> BackendTraffic:
        d, f = list(self.duration.items()), list(self.first_byte.items())
        return BackendTraffic(requests=self.requests, failures=self.failures, p50_seconds=bucket_quantile(0.5, d),
                              p99_seconds=bucket_quantile(0.99, d), ttft_p99_seconds=bucket_quantile(0.99, f),
                              failed_attempts=self.cooldowns)

    def since(self, earlier: BackendCounters | None) -> BackendTraffic:
        """The traffic between an earlier reading and this one (all of it when there was none)."""
        if earlier is None:
            return self.traffic()
        return BackendCounters(
            requests=self.requests - earlier.requests, failures=self.failures - earlier.failures,
            cooldowns=self.cooldowns - earlier.cooldowns,
            duration={le: n - earlier.duration.get(le, 0) for le, n in self.duration.items()},
            first_byte={le: n - earlier.first_byte.get(le, 0) for le, n in self.first_byte.items()}).traffic()

    def restarted_since(self, earlier: BackendCounters) -> bool:
        """A counter went down: the gateway started again between the two readings (counters only rise)."""
        return (self.requests < earlier.requests or self.failures < earlier.failures
                or any(n < earlier.duration.get(le, 0) for le, n in self.duration.items())
                or any(n < earlier.first_byte.get(le, 0) for le, n in self.first_byte.items()))

    def increase(self, earlier: BackendCounters | None) -> BackendCounters:
        """What was counted between an earlier reading and this one, as Prometheus' increase() counts it:
        after a restart (a counter went down) the counters began again from zero, so all of this reading
        is the increase. The cooldown counter is the gateway's too but labelled apart: judged on its own."""
        if earlier is None:
            return self.with_cooldowns(self.cooldowns)
        cooldowns = self.cooldowns - earlier.cooldowns if self.cooldowns >= earlier.cooldowns else self.cooldowns
        if self.restarted_since(earlier):
            return self.with_cooldowns(cooldowns)
        # Built without validation (the figures are this model's own): a page turns thousands of readings
        # into intervals.
        return BackendCounters.model_construct(
            requests=self.requests - earlier.requests, failures=self.failures - earlier.failures, cooldowns=cooldowns,
            duration={le: n - earlier.duration.get(le, 0) for le, n in self.duration.items()},
            first_byte={le: n - earlier.first_byte.get(le, 0) for le, n in self.first_byte.items()})

    def plus(self, other: BackendCounters) -> BackendCounters:
        """Two sets of counts added (two gateways, two endpoints, two versions)."""
        return BackendCounters.model_construct(
            requests=self.requests + other.requests, failures=self.failures + other.failures,
            cooldowns=self.cooldowns + other.cooldowns, duration=_added(self.duration, other.duration),
            first_byte=_added(self.first_byte, other.first_byte))

    def with_cooldowns(self, cooldowns: int) -> BackendCounters:
        """A copy with another cooldown count (the rest copied, not shared)."""
        return BackendCounters.model_construct(requests=self.requests, failures=self.failures, cooldowns=cooldowns,
                                               duration=dict(self.duration), first_byte=dict(self.first_byte))


def _added(a: dict[float, float], b: dict[float, float]) -> dict[float, float]:
    out = dict(a)
    for le, n in b.items():
        out[le] = out.get(le, 0) + n
    return out


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """`buckets`: (upper bound, cumulative count), any order. None when nothing was counted."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in ordered:
        if cumulative >= rank:
            if math.isinf(upper):  # beyond the last finite bound: that bound is all we know
                return lower
            inside = cumulative - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, cumulative
    return lower


def parse_all_counters(text: str) -> dict[tuple[str, str], BackendCounters]:
    """(endpoint, backend) → its cumulative counters, for every endpoint a gateway's /metrics page counts
    (what the plane's sampler stores). The cooldown counter has no endpoint label: each endpoint routing a
    backend gets that backend's count, as in `parse_counters`."""
    out: dict[tuple[str, str], BackendCounters] = defaultdict(BackendCounters)
    cooldowns: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == COOLDOWNS + "_total":
                cooldowns[s.labels.get("backend", "")] = int(s.value)
            elif s.name in _COUNTED:
                _count(out[(s.labels.get("endpoint", ""), s.labels.get("backend", ""))], s.name, s.labels, s.value)
    for (_, backend), c in out.items():
        c.cooldowns = cooldowns.get(backend, 0)
    return dict(out)


def _count(c: BackendCounters, name: str, labels: dict[str, str], value: float) -> None:
    if name == REQUESTS + "_total":
        c.requests += int(value)
        if labels.get("code", "").startswith("5"):
            c.failures += int(value)
    elif name == DURATION + "_bucket":
        c.duration[float(labels["le"])] = value
    elif name == FIRST_BYTE + "_bucket":
        c.first_byte[float(labels["le"])] = value


def parse_counters(text: str, endpoint: str) -> dict[str, BackendCounters]:
    """Backend id → its cumulative counters for `endpoint`, from a gateway's /metrics page."""
    out: dict[str, BackendCounters] = defaultdict(BackendCounters)
    cooldowns: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == COOLDOWNS + "_total":  # labelled by backend only
                cooldowns[s.labels.get("backend", "")] = int(s.value)
                continue
            if s.labels.get("endpoint") != endpoint or s.name not in _COUNTED:
                continue  # gauges (in flight, cooling down) are not traffic
            _count(out[s.labels.get("backend", "")], s.name, s.labels, s.value)
    # The cooldown counter has no endpoint label: a backend id is `<cluster>/<workload>`, shared only
    # by endpoints routing the same workload, so counting it for each of them is the honest reading.
    for backend, n in cooldowns.items():
        out[backend].cooldowns = n
    return dict(out)


def parse_traffic(text: str, endpoint: str) -> dict[str, BackendTraffic]:
    """Backend id → its traffic for `endpoint` since the gateway started, from its /metrics page."""
    return {b: c.traffic() for b, c in parse_counters(text, endpoint).items()}
