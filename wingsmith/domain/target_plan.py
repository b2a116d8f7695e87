"""Choosing among cards for a traffic target: AIConfigurator's plan per card (wingsmith/domain/perf/traffic.py)
in, the chosen card and why each other lost out. Pure; the first step of workloads sized from a target
(the dry-run shows the candidates, the plan renders the winner).

The cheapest feasible plan wins when the fleet says what a GPU-hour costs on each card; a card without a
price loses to a priced one only by being dearer, never by being unknown, so without prices the fewest
GPUs win (then the lower TTFT). Each card brings its best plan of each mode (aggregated, disaggregated), and
the modes compete on the same terms. A target no card meets is refused with the best each card reaches.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.perf.estimates import Mode
from wingsmith.domain.perf.traffic import CardPlan


class Candidate(BaseModel):
    plan: CardPlan
    mode: Mode | None = Field(default=None, description="agg or disagg: the mode of the plan's configuration")
    cost_per_hour: float | None = Field(default=None, description="the plan's GPUs × the card's price, if known")
    why_not: str | None = Field(default=None, description="why this plan was not chosen; None for the winner")


class TargetChoice(BaseModel):
    chosen: CardPlan | None = Field(description="None: no card meets the target")
    candidates: list[Candidate] = Field(description="every card's best plan of each mode")
    refusal: str | None = Field(default=None, description="why the target cannot be met, with the best reached")


def _cost(plan: CardPlan, prices: dict[str, float]) -> float | None:
    price = prices.get(plan.card)
    return plan.gpus * price if price is not None else None


def _renderable(plan: CardPlan) -> CardPlan:
    """A disaggregated plan renders as prefill and decode pools (wingsmith/domain/workloads.py); a worker larger than
    a node must take whole nodes, as a multi-node pod group does."""
    conf = plan.configuration
    if not plan.meets_target or conf is None or conf.mode == "agg":
        return plan
    card = get_hardware(plan.card)
    node = card.gpus_per_node
    if len(conf.workers) != 2:
        why = f"its disaggregated configuration ({conf.parallelism}) does not name a prefill and a decode pool"
    elif split := [p.gpus_per_worker for p in conf.workers if p.gpus_per_worker > node and p.gpus_per_worker % node]:
        why = (f"its disaggregated configuration ({conf.parallelism}) has a worker of {split[0]} GPUs, which is not "
               f"whole {card.display_name} nodes of {node}")
    else:
        return plan
    return plan.model_copy(update={"meets_target": False, "why_not": f"{plan.card}: {why}"})


def _mode(plan: CardPlan) -> Mode | None:
    return plan.configuration.mode if plan.configuration else None


def _in_words(plan: CardPlan) -> str:
    return f"{plan.card} ({_mode(plan)})" if plan.configuration else plan.card


def choose_card(plans: list[CardPlan], prices: dict[str, float] | None = None) -> TargetChoice:
    """The plan to serve the target with, among every card's plans of both modes (aggregated and
    disaggregated weigh the same: GPUs, or their cost). `prices`: the cheapest cost per GPU-hour of a
    cluster offering each card (absent: unknown)."""
    prices = prices or {}
    options = [_renderable(p.model_copy(update={"alternatives": []}))
               for plan in plans for p in (plan, *plan.alternatives)]
    feasible = [p for p in options if p.meets_target and p.configuration is not None]
    priced = all(p.card in prices for p in feasible)

    def rank(plan: CardPlan) -> tuple:
        ttft = plan.configuration.ttft_ms if plan.configuration else float("inf")
        return (_cost(plan, prices) if priced else 0.0, plan.gpus, ttft, plan.card, _mode(plan) or "")
    chosen = min(feasible, key=rank) if feasible else None
    candidates = []
    for plan in options:
        cost = _cost(plan, prices)
        if plan is chosen:
            why = None
        elif not plan.meets_target:
            why = plan.why_not or "does not meet the target"
        elif chosen is not None and priced and cost is not None and cost > (_cost(chosen, prices) or 0):
            why = f"dearer: {cost:.2f} per hour against {_cost(chosen, prices):.2f} on {_in_words(chosen)}"
        elif chosen is not None and plan.gpus > chosen.gpus:
            why = f"more GPUs: {plan.gpus} against {chosen.gpus} on {_in_words(chosen)}"
        else:
            why = f"ties with {_in_words(chosen) if chosen else '?'}, which has the lower TTFT or comes first"
        candidates.append(Candidate(plan=plan, mode=_mode(plan), cost_per_hour=cost, why_not=why))
    refusal = None
    if chosen is None:
        best = [_renderable(p) for p in plans]
        reached = "; ".join(p.why_not or f"{p.card}: nothing reachable" for p in best) or "no card was planned"
        refusal = f"no card meets the target: {reached}"
    return TargetChoice(chosen=chosen, candidates=candidates, refusal=refusal)
