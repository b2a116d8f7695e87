"""A traffic target instead of a replica count: the smallest configuration per card that meets the TTFT
and TPOT targets, and the replicas the request rate needs. Pure: the tool's candidate configurations
come in, the plan goes out.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from wingsmith.domain.perf.estimates import MAX_TOKENS, MODES, Configuration, Source


class TrafficTarget(BaseModel, frozen=True):
    requests_per_second: float = Field(gt=0, le=1_000_000)
    isl: int = Field(ge=1, le=MAX_TOKENS)
    osl: int = Field(ge=1, le=MAX_TOKENS)
    ttft_ms: float = Field(gt=0, le=3_600_000)
    tpot_ms: float = Field(gt=0, le=60_000)


class CardPlan(BaseModel, frozen=True):
    """What one card would take to serve the target: its smallest feasible configuration, or the best it
    reaches and why that is not enough."""
    card: str
    target: TrafficTarget
    source: Source | None = None
    configuration: Configuration | None = Field(default=None, description="one replica's configuration")
    replicas: int = 0
    gpus: int = 0
    meets_target: bool = False
    why_not: str | None = None
    alternatives: list[CardPlan] = Field(
        default_factory=list, description="the best plan of each other mode (aggregated, disaggregated) on this "
        "card, so a choice among cards also weighs the modes; empty on an alternative itself")


def replicas_needed(target_rps: float, rps_per_replica: float) -> int:
    """Replicas that together serve `target_rps` (each serves `rps_per_replica` within the latency targets)."""
    if rps_per_replica <= 0:
        raise ValueError("a replica that serves no requests cannot meet any rate")
    # The tool rounds its rates to 3 decimals; a rate exactly met needs no extra replica for the rounding.
    return max(1, math.ceil(round(target_rps / rps_per_replica, 9)))


def misses(configuration: Configuration, target: TrafficTarget) -> str | None:
    """The latency targets a configuration misses, in words; None when it meets both."""
    missed = []
    if configuration.ttft_ms > target.ttft_ms:
        missed.append(f"TTFT {configuration.ttft_ms:.0f} ms > {target.ttft_ms:.0f} ms")
    if configuration.tpot_ms > target.tpot_ms:
        missed.append(f"TPOT {configuration.tpot_ms:.1f} ms > {target.tpot_ms:.1f} ms")
    return ", ".join(missed) or None


def plan_card(card: str, target: TrafficTarget, candidates: list[Configuration], source: Source | None = None,
              *, reason_if_none: str | None = None) -> CardPlan:
    """The fewest GPUs (then the faster TTFT) among the candidates that meet the latency targets, scaled to
    the rate; when none meets them, the candidate closest to them, with why it is not enough. The best plan
    of each other mode comes along as an alternative."""
    per_mode = [_plan_mode(card, target, found, source) for mode in MODES
                if (found := [c for c in candidates if c.mode == mode])]
    if not per_mode:
        return CardPlan(card=card, target=target, source=source,
                        why_not=reason_if_none or "no configuration found for this card")
    best = min(per_mode, key=lambda p: _rank(p, target))
    return best.model_copy(update={"alternatives": [p for p in per_mode if p is not best]})


def _shortfall(c: Configuration, target: TrafficTarget) -> float:
    return max(c.ttft_ms / target.ttft_ms, c.tpot_ms / target.tpot_ms)


def _rank(plan: CardPlan, target: TrafficTarget) -> tuple:
    conf = plan.configuration
    assert conf is not None  # a plan of one mode always has its best or closest configuration
    if plan.meets_target:
        return (0, plan.gpus, conf.ttft_ms, conf.mode)
    return (1, _shortfall(conf, target), 0, conf.mode)


def _plan_mode(card: str, target: TrafficTarget, candidates: list[Configuration], source: Source | None) -> CardPlan:
    feasible = [c for c in candidates if misses(c, target) is None and c.requests_per_second_per_replica > 0]
    if feasible:
        def total_gpus(c: Configuration) -> int:
            return replicas_needed(target.requests_per_second, c.requests_per_second_per_replica) * c.gpus_per_replica
        best = min(feasible, key=lambda c: (total_gpus(c), c.ttft_ms))
        replicas = replicas_needed(target.requests_per_second, best.requests_per_second_per_replica)
        return CardPlan(card=card, target=target, source=source, configuration=best, replicas=replicas,
                        gpus=replicas * best.gpus_per_replica, meets_target=True)
    closest = min(candidates, key=lambda c: _shortfall(c, target))
    return CardPlan(card=card, target=target, source=source, configuration=closest,
                    why_not=f"best reachable on {card}: {misses(closest, target) or 'it serves no requests'}")
