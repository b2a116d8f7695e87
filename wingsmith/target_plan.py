"""Choosing among cards for a traffic target: AIConfigurator's plan per card (wingsmith/perf/traffic.py)
in, the chosen card and why each other lost out. Pure; the first step of workloads sized from a target
(the dry-run shows the candidates, the plan renders the winner).

The cheapest feasible plan wins when the fleet says what a GPU-hour costs on each card; a card without a
price loses to a priced one only by being dearer, never by being unknown, so without prices the fewest
GPUs win (then the lower TTFT). A target no card meets is refused with the best each card reaches.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.perf.traffic import CardPlan


class Candidate(BaseModel):
    plan: CardPlan
    cost_per_hour: float | None = Field(default=None, description="the plan's GPUs × the card's price, if known")
    why_not: str | None = Field(default=None, description="why this card was not chosen; None for the winner")


class TargetChoice(BaseModel):
    chosen: CardPlan | None = Field(description="None: no card meets the target")
    candidates: list[Candidate]
    refusal: str | None = Field(default=None, description="why the target cannot be met, with the best reached")


def _cost(plan: CardPlan, prices: dict[str, float]) -> float | None:
    price = prices.get(plan.card)
    return plan.gpus * price if price is not None else None


# Disaggregated plans (prefill and decode workers) are planned by the tool but not rendered yet.
RENDERED_MODES = ("agg",)


def _renderable(plan: CardPlan) -> CardPlan:
    conf = plan.configuration
    if not plan.meets_target or conf is None or conf.mode in RENDERED_MODES:
        return plan
    return plan.model_copy(update={"meets_target": False, "why_not": (
        f"{plan.card}: its smallest configuration is disaggregated ({conf.parallelism}), which the plane does not "
        "render yet")})


def choose_card(plans: list[CardPlan], prices: dict[str, float] | None = None) -> TargetChoice:
    """The plan to serve the target with. `prices`: the cheapest cost per GPU-hour of a cluster offering
    each card (absent: unknown)."""
    prices = prices or {}
    plans = [_renderable(p) for p in plans]
    feasible = [p for p in plans if p.meets_target and p.configuration is not None]
    priced = all(p.card in prices for p in feasible)

    def rank(plan: CardPlan) -> tuple:
        ttft = plan.configuration.ttft_ms if plan.configuration else float("inf")
        return (_cost(plan, prices) if priced else 0.0, plan.gpus, ttft, plan.card)
    chosen = min(feasible, key=rank) if feasible else None
    candidates = []
    for plan in plans:
        cost = _cost(plan, prices)
        if plan is chosen:
            why = None
        elif not plan.meets_target:
            why = plan.why_not or "does not meet the target"
        elif chosen is not None and priced and cost is not None and cost > (_cost(chosen, prices) or 0):
            why = f"dearer: {cost:.2f} per hour against {_cost(chosen, prices):.2f} on {chosen.card}"
        elif chosen is not None and plan.gpus > chosen.gpus:
            why = f"more GPUs: {plan.gpus} against {chosen.gpus} on {chosen.card}"
        else:
            why = f"ties with {chosen.card if chosen else '?'}, which has the lower TTFT or comes first"
        candidates.append(Candidate(plan=plan, cost_per_hour=cost, why_not=why))
    refusal = None
    if chosen is None:
        reached = "; ".join(p.why_not or f"{p.card}: nothing reachable" for p in plans) or "no card was planned"
        refusal = f"no card meets the target: {reached}"
    return TargetChoice(chosen=chosen, candidates=candidates, refusal=refusal)
