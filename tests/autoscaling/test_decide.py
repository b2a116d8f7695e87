"""The autoscaler's decision (wingsmith/domain/autoscaling.py): tables of the cases a person would check, and
properties over generated series of measurements: never outside [min, max], no flapping within the cooldown,
a steady series within targets holds."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from wingsmith.domain.autoscaling import SCALE_IN_MARGIN, AutoscalingPolicy, LastChange, Sample, decide

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SLOT = 20
POLICY = AutoscalingPolicy(min_replicas=1, max_replicas=6, ttft_p95_ms=1000, scale_up_window_s=60,
                           scale_down_window_s=120, cooldown_s=120)


def series(points: list[tuple[float, float | None]], end: datetime = T0) -> list[Sample]:
    """Samples of SLOT seconds ending at `end`, oldest first: (requests per second, TTFT p95 in ms)."""
    start = end - timedelta(seconds=SLOT * len(points))
    return [Sample(start=start + timedelta(seconds=SLOT * i), end=start + timedelta(seconds=SLOT * (i + 1)),
                   requests_per_second=rate, ttft_p95_ms=ttft) for i, (rate, ttft) in enumerate(points)]


def test_ttft_missed_over_the_whole_window_scales_out():
    d = decide(series([(5, 800)] * 4 + [(5, 1500)] * 3), now=T0, replicas=2, policy=POLICY)
    assert (d.action, d.replicas_to) == ("scale_out", 3)
    assert "TTFT p95 1500 ms > 1000 ms over the whole scale-up window (60 s)" in d.words()
    assert d.inputs.ttft_p95_max_ms == 1500 and d.inputs.samples == 6


def test_one_good_sample_in_the_window_holds():
    d = decide(series([(5, 800)] * 4 + [(5, 1500), (5, 900), (5, 1500)]), now=T0, replicas=2, policy=POLICY)
    assert d.action == "hold"


def test_the_rate_decides_how_many_and_the_max_bounds_it():
    rated = POLICY.model_copy(update={"requests_per_second_per_replica": 2.0})
    d = decide(series([(3, 500)] * 3 + [(9, 500)] * 3), now=T0, replicas=2, policy=rated)
    assert (d.action, d.replicas_to) == ("scale_out", 5)  # 9/s at 2/s each
    d = decide(series([(3, 500)] * 3 + [(30, 500)] * 3), now=T0, replicas=2, policy=rated)
    assert (d.action, d.replicas_to) == ("scale_out", 6)
    d = decide(series([(30, 500)] * 6), now=T0, replicas=6, policy=rated)
    assert d.action == "hold" and "already at max_replicas 6" in d.words()


def test_scale_in_needs_room_with_margin_over_the_whole_scale_down_window():
    rated = POLICY.model_copy(update={"requests_per_second_per_replica": 2.0})
    # 3 replicas, 3.5/s: 2 replicas at 90 % serve 3.6/s → one fewer.
    d = decide(series([(3.5, 400)] * 6), now=T0, replicas=3, policy=rated)
    assert (d.action, d.replicas_to) == ("scale_in", 2)
    assert "2 replica(s) serve the scale-down window's highest rate 3.50/s within 90% of their capacity" in d.words()
    # 3.7/s once in the window: no room.
    assert decide(series([(3.5, 400)] * 5 + [(3.7, 400)]), now=T0, replicas=3, policy=rated).action == "hold"
    # A latency over its target once in the window: no room either, whatever the rate.
    assert decide(series([(0.5, 400)] * 5 + [(0.5, 1200)]), now=T0, replicas=3, policy=rated).action == "hold"
    # Not yet covered: the scale-down window is 120 s, three samples are 60 s.
    d = decide(series([(0.1, 400)] * 3), now=T0, replicas=3, policy=rated)
    assert d.action == "hold" and "do not cover" in d.words()


def test_scale_in_goes_to_the_fewest_replicas_that_serve_the_window_never_below_min():
    rated = POLICY.model_copy(update={"requests_per_second_per_replica": 2.0})
    d = decide(series([(3.0, 400)] * 6), now=T0, replicas=6, policy=rated)
    assert (d.action, d.replicas_to) == ("scale_in", 2)  # 3/s: 2 replicas at 90 % of 2/s hold 3.6/s
    floor = rated.model_copy(update={"min_replicas": 3})
    assert decide(series([(0.2, 400)] * 6), now=T0, replicas=6, policy=floor).replicas_to == 3


def test_in_after_in_needs_no_cooldown_on_a_known_capacity_but_a_reversal_does():
    rated = POLICY.model_copy(update={"requests_per_second_per_replica": 2.0})
    scaled_in = LastChange(action="scale_in", at=T0 - timedelta(seconds=20), replicas_from=5, replicas_to=4)
    d = decide(series([(3.0, 400)] * 6), now=T0, replicas=4, policy=rated, last_change=scaled_in)
    assert (d.action, d.replicas_to) == ("scale_in", 2)
    d = decide(series([(9.0, 1500)] * 6), now=T0, replicas=4, policy=rated, last_change=scaled_in)
    assert d.action == "hold" and "cooling down after the scale in 5 → 4 (100 s left)" in d.words()
    # Without a capacity the latencies decide, and those the window measured came from more replicas: wait.
    d = decide(series([(1, 400)] * 6), now=T0, replicas=4, policy=POLICY, last_change=scaled_in)
    assert d.action == "hold" and "cooling down" in d.words()


def test_without_a_capacity_scale_in_needs_latencies_well_under_target():
    assert decide(series([(1, 400)] * 6), now=T0, replicas=3, policy=POLICY).action == "scale_in"
    assert decide(series([(1, 600)] * 6), now=T0, replicas=3, policy=POLICY).action == "hold"
    assert decide(series([(0, None)] * 6), now=T0, replicas=3, policy=POLICY).action == "hold"  # nothing measured


def test_cooldown_holds_and_bounds_always_apply():
    last = LastChange(action="scale_out", at=T0 - timedelta(seconds=60), replicas_from=2, replicas_to=3)
    d = decide(series([(5, 1500)] * 6), now=T0, replicas=3, policy=POLICY, last_change=last)
    assert d.action == "hold" and "cooling down after the scale out 2 → 3 (60 s left)" in d.words()
    assert decide([], now=T0, replicas=9, policy=POLICY, last_change=last).replicas_to == 6
    assert decide([], now=T0, replicas=0, policy=POLICY).replicas_to == 1


def test_out_after_out_within_the_cooldown_only_for_the_rate():
    rated = POLICY.model_copy(update={"requests_per_second_per_replica": 2.0})
    scaled_out = LastChange(action="scale_out", at=T0 - timedelta(seconds=20), replicas_from=2, replicas_to=4)
    d = decide(series([(11.0, 1500)] * 6), now=T0, replicas=4, policy=rated, last_change=scaled_out)
    assert (d.action, d.replicas_to) == ("scale_out", 6) and "while cooling down after the scale out 2 → 4" in d.words()
    # Latencies alone (what the replicas added 20 s ago have not been measured yet): wait.
    d = decide(series([(5.0, 1500)] * 6), now=T0, replicas=4, policy=rated, last_change=scaled_out)
    assert d.action == "hold" and "cooling down after the scale out 2 → 4" in d.words()
    # Nor in after that out.
    assert decide(series([(0.5, 100)] * 6), now=T0, replicas=4, policy=rated, last_change=scaled_out).action == "hold"


def test_no_measurements_hold():
    d = decide([], now=T0, replicas=2, policy=POLICY)
    assert d.action == "hold" and d.reasons == ["no measurements yet"]


@pytest.mark.parametrize("bad", [
    {"min_replicas": 5, "max_replicas": 2}, {"max_replicas": 0}, {"max_replicas": 300},
    {"max_replicas": 2, "ttft_p95_ms": -1}, {"max_replicas": 2, "scale_up_window_s": 5},
    {"max_replicas": 2, "scale_up_window_s": 600, "scale_down_window_s": 60}, {"max_replicas": 2, "cooldown_s": -1},
])
def test_a_policy_out_of_bounds_is_refused(bad):
    with pytest.raises(ValidationError):
        AutoscalingPolicy.model_validate(bad)


policies = st.builds(
    lambda lo, extra, ttft, cap, up, down_extra, cool: AutoscalingPolicy(
        min_replicas=lo, max_replicas=lo + extra, ttft_p95_ms=ttft, requests_per_second_per_replica=cap,
        scale_up_window_s=up, scale_down_window_s=up + down_extra, cooldown_s=cool),
    st.integers(1, 4), st.integers(0, 6), st.sampled_from([None, 500.0, 1000.0]),
    st.sampled_from([None, 1.0, 2.5]), st.integers(20, 120), st.integers(0, 240), st.integers(0, 300))
points = st.tuples(st.floats(0, 40, allow_nan=False), st.one_of(st.none(), st.floats(0, 5000, allow_nan=False)))


def run(policy: AutoscalingPolicy, measured: list[tuple[float, float | None]], replicas: int,
        period: int = SLOT) -> list[tuple[datetime, str, int]]:
    """The loop over a series: every period, decide on what was measured so far; scale as decided."""
    last: LastChange | None = None
    out = []
    for i in range(1, len(measured) + 1):
        now = T0 + timedelta(seconds=period * i)
        d = decide(series(measured[:i], end=now), now=now, replicas=replicas, policy=policy, last_change=last)
        if d.action != "hold":
            last = LastChange(action=d.action, at=now, replicas_from=replicas, replicas_to=d.replicas_to)
            replicas = d.replicas_to
        out.append((now, d.action, replicas))
    return out


@settings(max_examples=300, deadline=None)
@given(policies, st.lists(points, min_size=1, max_size=40), st.integers(1, 12))
def test_never_outside_the_bounds_and_never_flaps(policy, measured, replicas):
    history = run(policy, measured, replicas)
    changes = [(at, action) for at, action, _ in history if action != "hold"]
    # The first decision already brings a count outside the bounds back within them.
    assert all(policy.min_replicas <= count <= policy.max_replicas for _, _, count in history)
    for (at, action), (later, then) in zip(changes, changes[1:], strict=False):
        if {action, then} == {"scale_out", "scale_in"}:
            assert later - at >= timedelta(seconds=policy.cooldown_s), (action, then, later - at)


@settings(max_examples=200, deadline=None)
@given(policies, st.floats(0.1, 30), st.integers(5, 30))
def test_a_steady_series_within_targets_holds(policy, rate, length):
    cap = policy.requests_per_second_per_replica
    # The replicas that serve the rate, and one fewer would not with margin (or, without a capacity, latencies
    # within their target but not far under it): a steady state.
    replicas = math.ceil(rate / cap) if cap else policy.min_replicas + 1
    assume(policy.min_replicas <= replicas <= policy.max_replicas)
    assume(cap is None or rate > (replicas - 1) * cap * SCALE_IN_MARGIN)
    ttft = (policy.ttft_p95_ms or 1000) * 0.8
    history = run(policy, [(rate, ttft)] * length, replicas)
    assert {action for _, action, _ in history} == {"hold"}
