"""Team quotas: how many GPUs of each card a team may hold, and optionally how much it may spend per hour, set
by an admin. A team's use is what its live workloads hold (replicas × GPUs per replica; a workload deleted, or
failed and rolled back, holds nothing), priced where they are placed. A request (a new workload, more replicas,
an upgrade to more GPUs per replica) is judged against the quota: within it, or past it with the numbers (used,
asked, quota) of each limit it touches. No quota: unlimited, as a team was before quotas.

The anchor is Kueue's ClusterQueue: a nominal quota per resource flavor (here: per card), and a workload is
admitted if and only if the sum of what is admitted plus what it asks stays within each quota. Beyond Kueue,
`*` limits every card together and a budget limits the cost per hour. Pure: the store reads, this decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wingsmith.domain.hardware import UnknownHardware, get_hardware

ANY_CARD = "*"  # every card together
BUDGET = "budget"  # the name of the cost-per-hour line in a verdict
MAX_GPUS = 1_000_000  # far above any fleet: beyond it the number is a typo
MAX_BUDGET = 1_000_000_000.0
# Costs are compared to the cent's ten-thousandth: what float sums of prices may be off by.
_SLACK = 1e-6
# States of a workload that hold no GPUs: deleted, or failed (its saga removed what it had applied).
ENDED = frozenset({"deleted", "failed"})

Policy = Literal["refuse"]


class Quota(BaseModel):
    """What a team may hold. A card the quota names is limited by its own line; every card also by `*` when
    the quota names it; a card neither names is not limited (name `*` to cap every card)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: dict[str, int] = Field(default_factory=dict, max_length=16, description=(
        "GPUs the team may hold, by card id (h200, b200, gb200, ...) or `*` for every card together"))
    budget_per_hour: float | None = Field(default=None, ge=0, le=MAX_BUDGET, allow_inf_nan=False, description=(
        "what the team's workloads may cost per hour, priced by the clusters' cost_per_gpu_hour; absent: no budget"))
    policy: Policy = Field(default="refuse", description="what a request past the quota gets: `refuse` (403 "
                           "quota_exceeded, with the numbers)")

    @field_validator("gpus")
    @classmethod
    def _cards(cls, value: dict[str, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for key, gpus in value.items():
            card = card_key(key)
            if isinstance(gpus, bool) or not 0 <= gpus <= MAX_GPUS:
                raise ValueError(f"gpus[{key}] must be a whole number from 0 to {MAX_GPUS:,}")
            if card in out:
                raise ValueError(f"card {card} is named twice")
            out[card] = gpus
        return dict(sorted(out.items(), key=lambda item: (item[0] == ANY_CARD, item[0])))  # the cards, then *


def card_key(raw: str) -> str:
    """A quota's key: `*`, or the id of a card the plane can place (NVIDIA), in its canonical spelling."""
    if raw == ANY_CARD:
        return raw
    try:
        card = get_hardware(raw)
    except UnknownHardware as exc:
        raise ValueError(f"{exc} (or * for every card)") from None
    if not card.placeable:
        raise ValueError(f"{card.display_name} is {card.vendor} hardware, which the plane does not place; a quota "
                         "names NVIDIA cards or *")
    return card.id


class Holding(BaseModel, frozen=True):
    """What one workload holds: GPUs of one card, and what they cost per hour (GPUs on clusters without a
    price, or not placed on a priced one yet with no priced cluster for the card, are `unpriced_gpus`)."""
    workload_id: str
    card: str
    gpus: int = Field(ge=0)
    cost_per_hour: float = Field(default=0.0, ge=0)
    unpriced_gpus: int = Field(default=0, ge=0)


class Use(BaseModel):
    """What a team's workloads hold together."""
    gpus: dict[str, int] = Field(description="GPUs held, by card")
    total_gpus: int
    cost_per_hour: float = Field(description="what they cost per hour, where the clusters carry a price")
    unpriced_gpus: int = Field(description="GPUs on clusters (or cards) without a known price, left out of the cost")
    workloads: int = Field(description="the live workloads counted")


def use_of(holdings: Iterable[Holding]) -> Use:
    gpus: dict[str, int] = {}
    cost, unpriced, count = 0.0, 0, 0
    for h in holdings:
        gpus[h.card] = gpus.get(h.card, 0) + h.gpus
        cost += h.cost_per_hour
        unpriced += h.unpriced_gpus
        count += 1
    return Use(gpus=dict(sorted(gpus.items())), total_gpus=sum(gpus.values()), cost_per_hour=cost,
               unpriced_gpus=unpriced, workloads=count)


class Line(BaseModel):
    """One limit of the quota: what the team uses, what the request adds (negative: frees), and the quota."""
    limit: str = Field(description="a card id, `*` (every card together) or `budget` (cost per hour)")
    unit: Literal["GPUs", "per hour"]
    used: float
    asked: float
    quota: float
    fits: bool = Field(description="used + asked ≤ quota, or the request adds nothing to this line")


class Verdict(BaseModel):
    team: str
    fits: bool
    policy: Policy | None = Field(description="what happens past the quota; None: the team has no quota")
    lines: list[Line] = Field(description="every limit the request touches, with its numbers")
    words: str = Field(description="the verdict in a sentence")


def lines_of(quota: Quota, before: Use, after: Use, cards: Iterable[str]) -> list[Line]:
    """The quota's lines for these cards (each card's own, then `*`, then the budget), from `before` to `after`."""
    named = list(dict.fromkeys(cards))
    out = [_line(card, "GPUs", before.gpus.get(card, 0), after.gpus.get(card, 0), quota.gpus[card])
           for card in named if card != ANY_CARD and card in quota.gpus]
    if named and ANY_CARD in quota.gpus:
        out.append(_line(ANY_CARD, "GPUs", before.total_gpus, after.total_gpus, quota.gpus[ANY_CARD]))
    if quota.budget_per_hour is not None:
        out.append(_line(BUDGET, "per hour", before.cost_per_hour, after.cost_per_hour, quota.budget_per_hour))
    return out


def _line(limit: str, unit: Literal["GPUs", "per hour"], used: float, now: float, quota: float) -> Line:
    asked = now - used
    slack = _SLACK if unit == "per hour" else 0
    return Line(limit=limit, unit=unit, used=used, asked=asked, quota=quota,
                fits=asked <= slack or now <= quota + slack)


def judge(team: str, quota: Quota | None, holdings: list[Holding], ask: Holding) -> Verdict:
    """Whether `ask` (what one workload is to hold once the request is done: its new GPUs and their cost per
    hour, replacing what it holds now) fits the team's quota. A line the request adds nothing to always fits,
    so a team past a quota lowered under its use may still scale down, delete and move within it."""
    if quota is None:
        return Verdict(team=team, fits=True, policy=None, lines=[],
                       words=f"team {team} has no quota: nothing is limited")
    others = [h for h in holdings if h.workload_id != ask.workload_id]
    mine = [h for h in holdings if h.workload_id == ask.workload_id]
    lines = lines_of(quota, use_of(holdings), use_of([*others, ask]), [ask.card, *(h.card for h in mine)])
    past = [line for line in lines if not line.fits]
    if not past:
        return Verdict(team=team, fits=True, policy=quota.policy, lines=lines,
                       words=f"within team {team}'s quota")
    return Verdict(team=team, fits=False, policy=quota.policy, lines=lines,
                   words=f"past team {team}'s quota: " + "; ".join(line_words(line) for line in past))


def line_words(line: Line) -> str:
    """`h200: 48 used + 24 asked > 64 GPUs`, `budget: 400 used + 120 asked > 500 per hour`."""
    name = "every card (*)" if line.limit == ANY_CARD else line.limit
    return (f"{name}: {_num(line.used)} used + {_num(line.asked)} asked "
            f"{'≤' if line.fits else '>'} {_num(line.quota)} {line.unit}")


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


# ---- a workload's holding, from what the registry records and the API allowed ------------------------------

class Shaped(BaseModel, frozen=True):
    """A workload's replicas of `gpus_per_replica` GPUs of one card."""
    workload_id: str
    card: str
    gpus_per_replica: int = Field(ge=0)
    replicas: int = Field(ge=0)

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas


class Recorded(Shaped, frozen=True):
    """A workload as its workflow last recorded it (the registry's row)."""
    state: str
    updated_at: datetime


class Allowed(Shaped, frozen=True):
    """What the API last let a workload hold (a create, a scale, an upgrade), before its workflow records it."""
    at: datetime


class Placed(BaseModel, frozen=True):
    """A workload's replicas on one cluster (its deployment of the newest revision there)."""
    cluster: str
    replicas: int = Field(ge=0)


class PricedCluster(BaseModel, frozen=True):
    name: str
    cost_per_gpu_hour: float | None
    cards: list[str] | None = Field(description="the cards it declares; None: read live, not known here")
    placeable: bool = Field(description="takes new replicas: not cordoned, its last preflight passed")


def card_price(card: str, clusters: Iterable[PricedCluster]) -> float | None:
    """What a GPU-hour of `card` costs where it is not placed yet: the highest price among the placeable clusters
    that may offer it (a request then fits wherever placement puts it); None when none of them has a price."""
    prices = [c.cost_per_gpu_hour for c in clusters if c.placeable and c.cost_per_gpu_hour is not None
              and (c.cards is None or card in c.cards)]
    return max(prices) if prices else None


def holding_of(workload_id: str, recorded: Recorded | None, allowed: Allowed | None, placed: list[Placed],
               prices: dict[str, float | None], price: float | None) -> Holding | None:
    """What a workload holds: the larger of what its workflow recorded and what the API allowed it (a create or a
    scale counts from the moment it is allowed, and a scale down only once done); nothing once it ended, unless
    it was allowed again since (a new workload under the same name). Its cost: each cluster's replicas at that
    cluster's price, and what is not placed yet at `price` (the card's, see card_price). None: holds nothing."""
    counts: list[Shaped] = []
    if recorded is not None and recorded.state not in ENDED:
        counts.append(recorded)
    if allowed is not None and (recorded is None or recorded.state not in ENDED or allowed.at > recorded.updated_at):
        counts.append(allowed)
    if not counts:
        return None
    larger = max(counts, key=lambda c: c.gpus)
    card, gpus, per_replica = larger.card, larger.gpus, larger.gpus_per_replica
    cost, unpriced, placed_gpus = 0.0, 0, 0
    for p in placed:
        at = p.replicas * per_replica
        placed_gpus += at
        cluster_price = prices.get(p.cluster)
        if cluster_price is None:
            unpriced += at
        else:
            cost += at * cluster_price
    waiting = max(gpus - placed_gpus, 0)
    if price is None:
        unpriced += waiting
    else:
        cost += waiting * price
    return Holding(workload_id=workload_id, card=card, gpus=gpus, cost_per_hour=cost, unpriced_gpus=unpriced)


def ask_of(workload_id: str, card: str, gpus: int, price: float | None, current: Holding | None = None) -> Holding:
    """What a request asks one workload to hold: `gpus` of `card` in all. GPUs it adds to what it holds now
    (`current`) are priced at the card's price (they are not placed yet); fewer GPUs keep their share of what
    the workload costs now."""
    base = current if current is not None and current.card == card else Holding(workload_id=workload_id,
                                                                                 card=card, gpus=0)
    added = gpus - base.gpus
    if added >= 0:
        return Holding(workload_id=workload_id, card=card, gpus=gpus,
                       cost_per_hour=base.cost_per_hour + (added * price if price is not None else 0.0),
                       unpriced_gpus=base.unpriced_gpus + (added if price is None else 0))
    share = gpus / base.gpus
    return Holding(workload_id=workload_id, card=card, gpus=gpus, cost_per_hour=base.cost_per_hour * share,
                   unpriced_gpus=round(base.unpriced_gpus * share))
