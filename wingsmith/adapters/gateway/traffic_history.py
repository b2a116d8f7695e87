"""Traffic over time from the gateway's counters as the plane sampled them (wingsmith.adapters.gateway.traffic_sampler).
Pure: readings in, increases and points out.

Written once, read many times: when a gateway replica is read, its reading is differenced against its
previous one (`increases`) and each series' increase is stored; a page then adds stored increases up
into at most a few hundred intervals per backend (in SQL, wingsmith.adapters.store.traffic_samples) and turns
each into a point (`point_of`).

Counters only rise until the gateway starts again, so the increase between two readings is the later
one minus the earlier, and a counter that went down means a restart: the later reading is then all of
the increase, as Prometheus' increase() and rate() count it. A series a gateway did not count at its
previous reading (a backend's first request, or the first after a restart) began from zero there.
Each replica is its own series, so a restart of one is a reset of its counters alone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel

from wingsmith.domain.gateway.traffic import BackendCounters, bucket_quantile

NO_BACKEND = "none"  # the gateway's own refusals (no backend to send to, every backend failed)

Series = tuple[str, str]  # (endpoint, backend), as one gateway counts it


def increases(previous: dict[Series, BackendCounters] | None,
              current: dict[Series, BackendCounters]) -> dict[Series, BackendCounters]:
    """What each series of one gateway counted since its previous reading. `previous` None: the gateway was
    not read before (or too long ago to say), so this reading only starts the count."""
    if previous is None:
        return {}
    # Absent from the previous reading: the series had counted nothing yet (increase(None) is all of it).
    return {key: c.increase(previous.get(key)) for key, c in current.items()}


@dataclass(frozen=True, slots=True)
class Interval:
    """What was counted from `start` to `end` (several readings' increases added up, over every gateway).
    A plain dataclass: a page makes a few thousand of these."""

    start: datetime
    end: datetime
    counts: BackendCounters

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 1e-9)

    @property
    def requests_per_second(self) -> float:
        return self.counts.requests / self.seconds

    @property
    def errors_per_second(self) -> float:
        return (self.counts.failures + self.counts.cooldowns) / self.seconds


class TrafficPoint(BaseModel):
    """One interval in the figures a chart and its table show (latencies in ms; None without requests)."""

    start: datetime
    end: datetime
    requests: int
    errors: int
    requests_per_second: float
    errors_per_second: float
    error_rate: float | None
    p50_ms: float | None
    p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def point_of(interval: Interval) -> TrafficPoint:
    c = interval.counts
    errors = c.failures + c.cooldowns
    attempts = c.requests + c.cooldowns
    d, f = list(c.duration.items()), list(c.first_byte.items())
    return TrafficPoint.model_construct(
        start=interval.start, end=interval.end, requests=c.requests, errors=errors,
        requests_per_second=round(interval.requests_per_second, 4),
        errors_per_second=round(interval.errors_per_second, 4),
        error_rate=round(errors / attempts, 4) if attempts else None,
        p50_ms=_ms(bucket_quantile(0.5, d)), p99_ms=_ms(bucket_quantile(0.99, d)),
        ttft_p50_ms=_ms(bucket_quantile(0.5, f)), ttft_p99_ms=_ms(bucket_quantile(0.99, f)))


def whole(spans: list[Interval]) -> Interval:
    """Intervals added into one, from the first's start to the last's end (a window's total). Added in
    place, not with BackendCounters.plus: a page adds up a few thousand of these."""
    requests = failures = cooldowns = 0
    duration: dict[float, float] = defaultdict(float)
    first_byte: dict[float, float] = defaultdict(float)
    for i in spans:
        c = i.counts
        requests, failures, cooldowns = requests + c.requests, failures + c.failures, cooldowns + c.cooldowns
        for le, n in c.duration.items():
            duration[le] += n
        for le, n in c.first_byte.items():
            first_byte[le] += n
    counts = BackendCounters.model_construct(requests=requests, failures=failures, cooldowns=cooldowns,
                                             duration=dict(duration), first_byte=dict(first_byte))
    return Interval(start=min(i.start for i in spans), end=max(i.end for i in spans), counts=counts)


def rolled_up(spans: list[Interval], seconds: float) -> list[Interval]:
    """Intervals (oldest first) added into coarser ones of about `seconds` each (a table's rows)."""
    out: list[list[Interval]] = []
    for i in spans:
        if out and (i.end - out[-1][0].start).total_seconds() <= seconds:
            out[-1].append(i)
        else:
            out.append([i])
    return [whole(group) for group in out]
