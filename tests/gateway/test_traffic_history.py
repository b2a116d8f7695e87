"""Traffic over time from sampled counters (wingsmith.adapters.gateway.traffic_history): increases between two
readings of one gateway, counter resets as Prometheus' increase() takes them, series that begin between
readings, intervals added up with quantiles from the buckets' increases, and the roll-up a table shows.
Pure: counters in, points out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wingsmith.adapters.gateway.traffic_history import Interval, increases, point_of, rolled_up, whole
from wingsmith.domain.gateway.traffic import BackendCounters, bucket_quantile

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
BOUNDS = (0.1, 0.5, 1.0, float("inf"))
SERIES = ("m", "east/wl")


def counters(requests: int, failures: int = 0, *, fast: int | None = None, cooldowns: int = 0) -> BackendCounters:
    """`fast` of the requests under 0.1 s, the rest between 0.5 and 1 s."""
    fast = requests if fast is None else fast
    cumulative = {0.1: fast, 0.5: fast, 1.0: requests, float("inf"): requests}
    return BackendCounters(requests=requests, failures=failures, cooldowns=cooldowns,
                           duration={le: float(n) for le, n in cumulative.items()},
                           first_byte={le: float(requests) for le in BOUNDS})


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def spans_of(readings: list[tuple[float, BackendCounters]]) -> list[Interval]:
    """One series' readings (seconds, cumulative counters) of one gateway, as the sampler stores them."""
    out, previous, before = [], None, None
    for t, c in readings:
        for grown in increases(previous, {SERIES: c}).values():
            out.append(Interval(start=at(before), end=at(t), counts=grown))
        previous, before = {SERIES: c}, t
    return out


def test_increase_between_two_readings_is_the_difference():
    later, earlier = counters(30, 3, fast=20), counters(10, 1, fast=10)
    grown = later.increase(earlier)
    assert (grown.requests, grown.failures) == (20, 2)
    assert grown.duration == {0.1: 10.0, 0.5: 10.0, 1.0: 20.0, float("inf"): 20.0}


def test_a_counter_that_went_down_means_the_gateway_started_again():
    # Prometheus' increase(): after a reset the later reading is all of the increase.
    before, after_restart = counters(500, 5), counters(7, 1)
    assert after_restart.restarted_since(before)
    grown = after_restart.increase(before)
    assert (grown.requests, grown.failures) == (7, 1)
    assert grown.duration == after_restart.duration
    # One bucket going down is a reset too, even when the total did not drop.
    odd = counters(500, fast=0)
    assert odd.restarted_since(counters(500, fast=100))


def test_points_per_interval_rates_errors_and_quantiles():
    first, idle = (point_of(i) for i in spans_of([(0, counters(0)), (10, counters(20, 2, fast=10)),
                                                  (20, counters(20, 2, fast=10))]))
    assert (first.requests, first.requests_per_second, first.errors_per_second) == (20, 2.0, 0.2)
    assert first.error_rate == 0.1
    d = list(counters(20, fast=10).duration.items())
    assert first.p50_ms == round(bucket_quantile(0.5, d) * 1000, 1)
    assert first.p99_ms == round(bucket_quantile(0.99, d) * 1000, 1)
    assert first.ttft_p99_ms is not None
    # No request in an interval: a rate of zero, and no latency to speak of (a gap, not a zero).
    assert (idle.requests, idle.requests_per_second, idle.error_rate, idle.p99_ms) == (0, 0.0, None, None)


def test_a_restart_does_not_empty_the_picture_nor_count_negative():
    spans = spans_of([(0, counters(100)), (10, counters(150)),
                      (20, counters(6)),  # the gateway started again and counted 6 since
                      (30, counters(16))])
    assert [i.counts.requests for i in spans] == [50, 6, 10]
    assert all(point_of(i).requests_per_second >= 0 for i in spans)


def test_a_series_that_appears_between_readings_began_from_zero():
    # A backend's first request (or the first after a restart) makes a new series: the gateway was read
    # before without it, so it counted nothing there.
    grown = increases({}, {SERIES: counters(8)})
    assert grown[SERIES].requests == 8
    # A series gone from a reading (the gateway restarted and has not counted it again) adds nothing.
    assert increases({SERIES: counters(8)}, {}) == {}
    # The first reading of a gateway only starts its count.
    assert increases(None, {SERIES: counters(8)}) == {}


def test_summed_bucket_increases_give_the_quantile_of_all_requests():
    # Two replicas (or two readings) added up: the buckets' increases add, and the quantile is that of
    # every request together, as histogram_quantile(0.5, sum(increase(...))) gives it, not a mean of two.
    fast_only, slow_only = counters(10, fast=10), counters(30, fast=0)
    together = whole([Interval(start=at(0), end=at(10), counts=fast_only),
                      Interval(start=at(0), end=at(10), counts=slow_only)])
    assert together.counts.requests == 40 and together.requests_per_second == 4.0
    assert together.counts.duration == {0.1: 10.0, 0.5: 10.0, 1.0: 40.0, float("inf"): 40.0}
    assert point_of(together).p50_ms == pytest.approx(500 + 500 * (20 - 10) / 30, abs=0.1)


def test_rolled_up_intervals_add_counts_and_keep_rates():
    spans = spans_of([(10 * k, counters(10 * k)) for k in range(7)])
    rows = rolled_up(spans, 30)
    assert [r.counts.requests for r in rows] == [30, 30]
    assert [round(r.requests_per_second, 3) for r in rows] == [1.0, 1.0]
    assert rows[0].start == at(0) and rows[-1].end == at(60)
