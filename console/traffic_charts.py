"""The traffic section of the endpoint and workload pages: per backend, small charts of the last hour
(requests and errors per second; p50/p99 latency and time to first token) and a table of the same
figures in five-minute rows under them. The figures are the gateway's own counters as the plane sampled
them (wingsmith.adapters.gateway.traffic_sampler), stored as increases and added up in SQL into at most
CHART_POINTS intervals per backend (wingsmith.adapters.store.traffic_samples), so a page costs the same whatever
the sampling period and however many gateway replicas were read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict

from console.time_charts import Level, TimeLine, TimeMark, time_lines
from wingsmith.adapters.gateway.traffic_history import NO_BACKEND, Interval, TrafficPoint, point_of, rolled_up, whole
from wingsmith.adapters.store import traffic_samples
from wingsmith.domain.config import Settings

WINDOW_SECONDS = 3600
TABLE_ROW_SECONDS = 300
CHART_POINTS = 180


class TrafficRow(BaseModel):
    """One row of a backend's table: a few minutes of its traffic."""
    start: datetime
    end: datetime
    point: TrafficPoint

    @property
    def span(self) -> str:
        return f"{self.start.astimezone(UTC):%H:%M}–{self.end.astimezone(UTC):%H:%M}"


class BackendView(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    backend: str
    words: str  # what it is, in words
    total: TrafficPoint  # over the whole window
    rate_chart: Markup
    latency_chart: Markup
    rows: list[TrafficRow]


class TrafficSection(BaseModel):
    backends: list[BackendView]
    start: datetime
    end: datetime
    every_seconds: float
    last_reading: datetime | None
    sampled: bool  # whether this plane samples at all (a gateway to read, sampling on)
    overall: TrafficPoint | None = None  # every backend together, over the window


def backend_words(backend: str) -> str:
    if backend == NO_BACKEND:
        return "the gateway itself: requests no backend answered (none routed, or every one failed)"
    parts = backend.split("/")
    if len(parts) >= 2:
        revision = f", revision {parts[2].removeprefix('r')}" if len(parts) > 2 else ""
        return f"{parts[1]} on {parts[0]}{revision}"
    return backend


def backend_view(backend: str, spans: list[Interval], start: datetime, end: datetime,
                 predicted_ttft_ms: float | None = None, *, marks: Sequence[TimeMark] = (),
                 levels: Sequence[Level] = ()) -> BackendView:
    """`marks`: moments drawn over both charts (the autoscaler's decisions); `levels`: more horizontal lines on the
    latency chart (the autoscaling target)."""
    # A line needs no more points than the picture has room for: readings added up (counts, not
    # averages of quantiles) into at most CHART_POINTS intervals over the window.
    drawn = spans if len(spans) <= CHART_POINTS else rolled_up(spans, (end - start).total_seconds() / CHART_POINTS)
    points = [point_of(i) for i in drawn]
    table = rolled_up(drawn, TABLE_ROW_SECONDS)
    total = point_of(whole(table))  # the rows added up: the same sum as every point's, fewer additions
    words = backend_words(backend)
    peak = max(p.requests_per_second for p in points)
    rate = time_lines(
        f"Requests and errors per second, {words}", [
            TimeLine(label="requests per second", points=[(p.end, p.requests_per_second) for p in points]),
            TimeLine(label="errors per second", colour=5, points=[(p.end, p.errors_per_second) for p in points])],
        start, end, "per second", marks=marks,
        description=f"Over the last {round((end - start).total_seconds() / 60)} minutes: {total.requests} requests "
                    f"(peak {peak:.2f} per second), {total.errors} errors.")
    levels = [*([Level(label="predicted time to first token", value=predicted_ttft_ms)] if predicted_ttft_ms else []),
              *levels]
    latency = time_lines(
        f"Latency, {words}", [
            TimeLine(label="p50 latency", points=[(p.end, p.p50_ms) for p in points]),
            TimeLine(label="p99 latency", colour=3, points=[(p.end, p.p99_ms) for p in points]),
            TimeLine(label="p50 time to first token", colour=1, dashed=True,
                     points=[(p.end, p.ttft_p50_ms) for p in points]),
            TimeLine(label="p99 time to first token", colour=2, dashed=True,
                     points=[(p.end, p.ttft_p99_ms) for p in points])],
        start, end, "ms", levels=levels, marks=marks,
        description=(f"Over the window: p50 {total.p50_ms} ms, p99 {total.p99_ms} ms to the last byte; time to "
                     f"first token p50 {total.ttft_p50_ms} ms, p99 {total.ttft_p99_ms} ms."
                     if total.requests else "No request in the window, so no latency."))
    rows = [TrafficRow(start=r.start, end=r.end, point=point_of(r)) for r in table]
    return BackendView(backend=backend, words=words, total=total, rate_chart=rate, latency_chart=latency,
                       rows=rows[::-1])


async def traffic_section(db: asyncpg.Pool, settings: Settings, *, endpoint: str | None = None,
                          workload_id: str | None = None, predicted_ttft_ms: float | None = None,
                          now: datetime | None = None, marks: Sequence[TimeMark] = (),
                          levels: Sequence[Level] = ()) -> TrafficSection:
    """The last hour of one endpoint's traffic per backend, or of one workload's over every endpoint (with
    `marks` and `levels` over its charts)."""
    end = now or datetime.now(UTC)
    start = end - timedelta(seconds=WINDOW_SECONDS)
    spans = await traffic_samples.traffic_by_backend(db, start=start, end=end,
                                                     endpoint=endpoint, workload_id=workload_id)
    marks = [m for m in marks if start <= m.at <= end]
    views = [backend_view(b, s, start, end, predicted_ttft_ms, marks=marks, levels=levels)
             for b, s in sorted(spans.items(), key=_order) if s]
    together = [i for s in spans.values() for i in s]
    return TrafficSection(backends=views, start=start, end=end, every_seconds=settings.traffic_sample_seconds,
                          last_reading=await traffic_samples.latest_sample_at(db),
                          sampled=settings.traffic_sample_seconds > 0 and bool(settings.traffic_gateways
                                                                                or settings.traffic_gateway_dns),
                          overall=point_of(whole(together)) if together else None)


def _order(item: tuple[str, list[Interval]]) -> tuple[bool, str]:
    return item[0] == NO_BACKEND, item[0]  # the gateway's own refusals last
