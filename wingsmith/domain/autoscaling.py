"""A workload's autoscaling policy and the decision the autoscaler takes every period (issue 53). Pure: the
measurements come in (the gateway's counters, sampled into Postgres, one sample per slot), a decision goes out
with its reasons and the inputs it was taken on, so a person can read why it scaled.

The rules, as Kubernetes' HPA and Dynamo's planner keep them, with hysteresis so the loop does not flap:
- **out** when a target is missed in every sample of the whole scale-up window: TTFT or TPOT p95 over its
  target, or the rate over what the replicas serve (the capacity per replica: the policy's rate target, else
  the plan's); by as many replicas as the window's highest rate needs, at least one;
- **in** only when every sample of the whole scale-down window is within the latency targets and its highest
  rate would still be served by fewer replicas with a margin (`SCALE_IN_MARGIN` of the capacity, HPA's 10 %
  tolerance): to the fewest that do, as HPA's recommendation after its stabilization window; without a known
  capacity, one replica at a time, and only when the latencies stayed within `SCALE_IN_LATENCY_SHARE` of their
  targets;
- **cooldown** after any change: nothing but the bounds moves it until `cooldown_s` has passed, except, on a known
  capacity, the same direction again: a scale-in after a scale-in (the rate a window measured does not depend on
  how many replicas served it, and its latencies are judged again: the scale-down window is the hysteresis, as
  in HPA), and a scale-out after a scale-out when the rate alone asks for more (latencies measured before the
  last replicas were ready would add one per period); a reversal (in then out, out then in) always waits it;
- never below `min_replicas`, never above `max_replicas`, never below what serves the current rate.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field, model_validator

MAX_REPLICAS = 256  # as a workload's replicas (wingsmith.domain.workloads.WorkloadRequest)
SCALE_IN_MARGIN = 0.9  # the fewer replicas must serve the rate at no more than this share of their capacity
SCALE_IN_LATENCY_SHARE = 0.5  # without a capacity: latencies this far under their targets allow one fewer
MIN_WINDOW_SECONDS = 20  # one sample slot (wingsmith.adapters.store.traffic_samples.SLOT_SECONDS)

Action = Literal["scale_out", "scale_in", "hold"]


class AutoscalingPolicy(BaseModel, frozen=True):
    """What a workload's autoscaler holds it to. At least one target is needed when the policy is set, unless
    the workload was sized by a traffic target (its plan then gives TTFT, TPOT and the rate per replica)."""

    min_replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=MAX_REPLICAS)
    ttft_p95_ms: float | None = Field(default=None, gt=0, le=600_000, description="time to first token, p95")
    tpot_p95_ms: float | None = Field(default=None, gt=0, le=60_000, description="time per output token, p95 "
                                      "(measured only where the gateway counts tokens; otherwise not judged)")
    requests_per_second_per_replica: float | None = Field(
        default=None, gt=0, le=100_000, description="what one replica serves; default: the plan's (AIConfigurator)")
    scale_up_window_s: int = Field(default=60, ge=MIN_WINDOW_SECONDS, le=3600,
                                   description="a target missed over this whole window adds replicas")
    scale_down_window_s: int = Field(default=300, ge=MIN_WINDOW_SECONDS, le=86_400,
                                     description="room for fewer replicas over this whole window removes them")
    cooldown_s: int = Field(default=120, ge=0, le=86_400, description="after any change, nothing moves this long")
    approval_past_budget: bool = Field(default=False, description="a scale-out past the team's budget waits for an "
                                       "approval (otherwise it is held)")

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingPolicy:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is more than max_replicas ({self.max_replicas})")
        if self.scale_down_window_s < self.scale_up_window_s:
            raise ValueError("scale_down_window_s must be at least scale_up_window_s: removing capacity is judged "
                             "over a longer window than adding it")
        return self

    @property
    def has_target(self) -> bool:
        return any(t is not None for t in (self.ttft_p95_ms, self.tpot_p95_ms, self.requests_per_second_per_replica))

    def with_plan_targets(self, ttft_ms: float | None, tpot_ms: float | None) -> AutoscalingPolicy:
        """The targets a traffic target gave the plan, where the policy names none of its own."""
        return self.model_copy(update={"ttft_p95_ms": self.ttft_p95_ms or ttft_ms,
                                       "tpot_p95_ms": self.tpot_p95_ms or tpot_ms})


class Sample(BaseModel, frozen=True):
    """What the gateway measured for the workload over one slot, every backend added up (`backends`: each
    one's rate and TTFT p95, for the audit)."""

    start: datetime
    end: datetime
    requests_per_second: float = Field(ge=0)
    ttft_p95_ms: float | None = Field(default=None, ge=0)
    tpot_p95_ms: float | None = Field(default=None, ge=0)
    in_flight: float | None = Field(default=None, ge=0)
    backends: dict[str, dict[str, float | None]] = Field(default_factory=dict)


class LastChange(BaseModel, frozen=True):
    action: Literal["scale_out", "scale_in"]
    at: datetime
    replicas_from: int
    replicas_to: int


class Inputs(BaseModel):
    """What a decision was taken on, kept with it."""

    at: datetime
    replicas: int
    policy: AutoscalingPolicy
    capacity_per_replica: float | None = Field(description="requests per second one replica serves, when known")
    capacity_from: Literal["policy", "plan", "unknown"]
    last_change: LastChange | None = None
    samples: int
    rate_max: float | None = None
    rate_min: float | None = None
    ttft_p95_max_ms: float | None = None
    tpot_p95_max_ms: float | None = None
    backends: dict[str, dict[str, float | None]] = Field(default_factory=dict, description="the newest sample's")


class Decision(BaseModel):
    action: Action
    replicas_from: int
    replicas_to: int
    reasons: list[str]
    inputs: Inputs

    @property
    def change(self) -> int:
        return abs(self.replicas_to - self.replicas_from)

    def words(self) -> str:
        head = {"scale_out": f"scale out {self.replicas_from} → {self.replicas_to}",
                "scale_in": f"scale in {self.replicas_from} → {self.replicas_to}",
                "hold": f"hold at {self.replicas_from}"}[self.action]
        return f"{head}: {'; '.join(self.reasons)}"


def replicas_for_rate(rate: float, capacity: float | None) -> int:
    """Replicas that serve `rate` at their capacity (0 when the capacity is unknown or nothing comes)."""
    if capacity is None or rate <= 0:
        return 0
    return math.ceil(round(rate / capacity, 9))


def decide(samples: list[Sample], *, now: datetime, replicas: int, policy: AutoscalingPolicy,
           plan_capacity: float | None = None, last_change: LastChange | None = None) -> Decision:
    """Scale out, scale in or hold, with why. `samples`: the newest last, covering at least the longer window
    when the measurements allow; `plan_capacity`: the plan's requests per second per replica, when known."""
    capacity = policy.requests_per_second_per_replica or plan_capacity
    source: Literal["policy", "plan", "unknown"] = (
        "policy" if policy.requests_per_second_per_replica else "plan" if plan_capacity else "unknown")
    window = [s for s in samples if s.end > now - timedelta(seconds=policy.scale_down_window_s) and s.start <= now]
    rates = [s.requests_per_second for s in window]
    inputs = Inputs(at=now, replicas=replicas, policy=policy, capacity_per_replica=capacity, capacity_from=source,
                    last_change=last_change, samples=len(window), rate_max=max(rates, default=None),
                    rate_min=min(rates, default=None),
                    ttft_p95_max_ms=max((s.ttft_p95_ms for s in window if s.ttft_p95_ms is not None), default=None),
                    tpot_p95_max_ms=max((s.tpot_p95_ms for s in window if s.tpot_p95_ms is not None), default=None),
                    backends=window[-1].backends if window else {})

    def decided(action: Action, to: int, *reasons: str) -> Decision:
        return Decision(action=action, replicas_from=replicas, replicas_to=to, reasons=list(reasons), inputs=inputs)

    if replicas < policy.min_replicas:
        return decided("scale_out", policy.min_replicas, f"below min_replicas {policy.min_replicas}")
    if replicas > policy.max_replicas:
        return decided("scale_in", policy.max_replicas, f"above max_replicas {policy.max_replicas}")
    cooling = last_change is not None and now < last_change.at + timedelta(seconds=policy.cooldown_s)

    def cooling_down() -> Decision:
        assert last_change is not None
        left = (last_change.at + timedelta(seconds=policy.cooldown_s) - now).total_seconds()
        return decided("hold", replicas, f"cooling down after the {last_change.action.replace('_', ' ')} "
                       f"{last_change.replicas_from} → {last_change.replicas_to} ({left:.0f} s left)")

    # Within the cooldown, on a known capacity, only the same direction may go on (the rate a window measured
    # does not depend on how many replicas served it); without one, nothing moves.
    if cooling and capacity is None:
        return cooling_down()

    up = _covering(samples, now, policy.scale_up_window_s)
    if up is not None:
        missed = [_misses(s, policy, capacity, replicas) for s in up]
        if all(missed):
            rate_need = replicas_for_rate(max(s.requests_per_second for s in up), capacity)
            to = min(policy.max_replicas, max(replicas + 1, rate_need))
            why = f"{missed[-1]} over the whole scale-up window ({policy.scale_up_window_s} s)"
            if to <= replicas:
                return decided("hold", replicas, why, f"already at max_replicas {policy.max_replicas}")
            if cooling:
                assert last_change is not None and capacity is not None
                # Out after an in is a reversal. Out after an out, only for the rate: the latencies measured
                # since came from before the last replicas were ready, and would add one per period.
                if last_change.action == "scale_in" or rate_need <= replicas:
                    return cooling_down()
                return decided("scale_out", min(policy.max_replicas, rate_need),
                               f"rate {max(s.requests_per_second for s in up):.2f}/s > {replicas} × {capacity:g}/s "
                               f"over the whole scale-up window ({policy.scale_up_window_s} s), while cooling "
                               f"down after the scale out {last_change.replicas_from} → {last_change.replicas_to}")
            return decided("scale_out", to, why)
    if cooling and last_change is not None and last_change.action == "scale_out":
        return cooling_down()  # in after an out: a reversal

    down = _covering(samples, now, policy.scale_down_window_s)
    if down is None:
        return decided("hold", replicas, f"measurements do not cover the scale-down window "
                       f"({policy.scale_down_window_s} s) yet" if samples else "no measurements yet")
    if replicas <= policy.min_replicas:
        return decided("hold", replicas, f"within targets; at min_replicas {policy.min_replicas}")
    fewer = _room_to_scale_in(down, replicas, policy, capacity)
    if fewer is not None:
        to, why = fewer
        return decided("scale_in", to, f"{why} over the whole scale-down window ({policy.scale_down_window_s} s)")
    return decided("hold", replicas, "within targets; not enough room for fewer replicas")


def _room_to_scale_in(down: list[Sample], replicas: int, policy: AutoscalingPolicy,
                      capacity: float | None) -> tuple[int, str] | None:
    """The replicas to scale in to over the scale-down window's samples, and why; None without room."""
    peak = max(s.requests_per_second for s in down)
    if capacity is not None:
        # The fewest replicas whose capacity, with the margin, holds the window's highest rate.
        fewer = max(policy.min_replicas, replicas_for_rate(peak, capacity * SCALE_IN_MARGIN))
        room = fewer < replicas and all(_misses(s, policy, None, replicas) is None for s in down)
        why = (f"{fewer} replica(s) serve the scale-down window's highest rate {peak:.2f}/s within "
               f"{SCALE_IN_MARGIN:.0%} of their capacity ({capacity:g}/s each)")
    else:
        fewer = replicas - 1
        room = peak > 0 and all(_within_share(s, policy) for s in down)
        why = f"latencies stayed under {SCALE_IN_LATENCY_SHARE:.0%} of their targets"
    return (fewer, why) if room and fewer >= replicas_for_rate(peak, capacity) else None


def _covering(samples: list[Sample], now: datetime, seconds: int) -> list[Sample] | None:
    """The samples of the last `seconds`, when they cover all of it (the oldest began at its start or before)."""
    start = now - timedelta(seconds=seconds)
    inside = [s for s in samples if s.end > start and s.start <= now]
    if not inside or min(s.start for s in inside) > start:
        return None
    return inside


def _misses(s: Sample, policy: AutoscalingPolicy, capacity: float | None, replicas: int) -> str | None:
    """The targets one sample misses, in words; None when it meets them all."""
    missed = []
    if policy.ttft_p95_ms is not None and s.ttft_p95_ms is not None and s.ttft_p95_ms > policy.ttft_p95_ms:
        missed.append(f"TTFT p95 {s.ttft_p95_ms:.0f} ms > {policy.ttft_p95_ms:.0f} ms")
    if policy.tpot_p95_ms is not None and s.tpot_p95_ms is not None and s.tpot_p95_ms > policy.tpot_p95_ms:
        missed.append(f"TPOT p95 {s.tpot_p95_ms:.1f} ms > {policy.tpot_p95_ms:.1f} ms")
    if capacity is not None and s.requests_per_second > replicas * capacity:
        missed.append(f"rate {s.requests_per_second:.2f}/s > {replicas} × {capacity:g}/s")
    return ", ".join(missed) or None


def _within_share(s: Sample, policy: AutoscalingPolicy) -> bool:
    for measured, target in ((s.ttft_p95_ms, policy.ttft_p95_ms), (s.tpot_p95_ms, policy.tpot_p95_ms)):
        if target is not None and (measured is None or measured > target * SCALE_IN_LATENCY_SHARE):
            return False
    return policy.ttft_p95_ms is not None or policy.tpot_p95_ms is not None
