"""A draft's expected performance: which estimates to ask the perf worker for, and the rows the draft
shows (one per card × layout × mode). Pure: the draft's performance workflow builds the requests from the
draft's own facts and turns the perf worker's answers into rows.

What is asked: every layout the recipe offers × every NVIDIA card the registered clusters have and every
card the recipe verifies, each card first at its likeliest layout, the draft's own sizing shape leading
(so the figures a reviewer looks at first come first), at the default ISL/OSL (the recipes publish no
workload). A layout the recipe denies on a card is not asked about there.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from wingsmith.drafts import SizingTarget
from wingsmith.hardware import get_hardware
from wingsmith.hub.proposal import ArtifactProposal
from wingsmith.perf.estimates import (
    DEFAULT_ISL,
    DEFAULT_OSL,
    NOT_INSTALLED,
    Estimate,
    EstimatedFor,
    EstimateRequest,
    FrontierPoint,
    PerformanceEntry,
    Pool,
)
from wingsmith.recipes import Evidence
from wingsmith.sizing.layouts import LAYOUTS

# A draft asks for a few dozen estimates at most (contracts.perf.MAX_REQUESTS bounds one call).
MAX_ESTIMATES = 64
PENDING = "estimates follow: the perf worker is working on them"

Status = Literal["pending", "estimated", "unavailable"]

__all__ = ["MAX_ESTIMATES", "NOT_INSTALLED", "PENDING", "DraftPerformance", "PerformanceRow",
           "estimate_requests", "gave_up_waiting", "rows_of", "waiting_for_a_perf_worker"]


class PerformanceRow(EstimatedFor, frozen=True):
    """One card × layout × mode of a draft: AIConfigurator's figures, flat (what a table or a chart
    reads), or why there are none (`reason`)."""
    tokens_per_second_per_gpu: float | None = None
    tokens_per_second_per_user: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    concurrency: int | None = Field(default=None, description="requests in flight across every replica")
    gpus: int | None = Field(default=None, description="GPUs across every replica of the layout's GPU budget")
    replicas: int | None = None
    gpus_per_replica: int | None = None
    parallelism: str | None = Field(default=None, description="in words: 'TP2', 'prefill 4 × TP1, decode 1 × TP4'")
    workers: list[Pool] = Field(default_factory=list, description="agg: one pool; disagg: prefill then decode")
    frontier: list[FrontierPoint] = Field(default_factory=list,
                                          description="throughput per GPU against per user, to draw the trade-off")
    source: str | None = Field(default=None, description="the tool, its version and its database's version")
    reason: str | None = Field(default=None, description="why there are no figures, in words")


class DraftPerformance(BaseModel):
    """What a draft says about performance: `pending` until the perf worker answers, `estimated` with rows,
    or `unavailable` with the reason (the perf extra is not installed)."""
    status: Status
    reason: str | None = None
    entries: list[PerformanceRow] = Field(default_factory=list)


def _row(entry: PerformanceEntry) -> PerformanceRow:
    row = PerformanceRow(card=entry.card, layout=entry.layout, mode=entry.mode, backend=entry.backend,
                         isl=entry.isl, osl=entry.osl, frontier=entry.frontier,
                         source=str(entry.source) if entry.source else None, reason=entry.reason)
    conf = entry.configuration
    if conf is None:
        return row
    return row.model_copy(update={
        "tokens_per_second_per_gpu": conf.tokens_per_second_per_gpu,
        "tokens_per_second_per_user": conf.tokens_per_second_per_user, "ttft_ms": conf.ttft_ms,
        "tpot_ms": conf.tpot_ms, "concurrency": conf.concurrency, "gpus": conf.gpus, "replicas": conf.replicas,
        "gpus_per_replica": conf.gpus_per_replica, "parallelism": conf.parallelism, "workers": conf.workers})


def rows_of(estimates: list[Estimate]) -> list[PerformanceRow]:
    return [_row(entry) for estimate in estimates for entry in estimate.entries]


def _cards(evidence: Evidence | None, target: SizingTarget, fleet_cards: list[str] | None) -> list[str]:
    verified = [h.id for h in evidence.hardware if h.placeable and h.status == "verified"] if evidence else []
    ordered = [target.hardware, *(fleet_cards or []), *verified]
    seen: list[str] = []
    for card in ordered:
        hardware = get_hardware(card)
        if hardware.placeable and hardware.id not in seen:
            seen.append(hardware.id)
    return seen


def _layouts(evidence: Evidence | None, target: SizingTarget) -> list[tuple[str, dict[str, str]]]:
    offered = [(lay.name, lay.denied) for lay in evidence.layouts if lay.name in LAYOUTS] if evidence else []
    offered.sort(key=lambda pair: pair[0] != target.layout)
    return offered or [(target.layout, {})]


def estimate_requests(proposal: ArtifactProposal, evidence: Evidence | None, target: SizingTarget,
                      fleet_cards: list[str] | None = None) -> list[EstimateRequest]:
    """The estimates a draft asks for, at most MAX_ESTIMATES. First each card once, at the first layout the
    recipe allows there (the draft's sizing layout where it can), its sizing card leading and the fleet's
    cards next: a card whose node cannot hold the sizing layout (DeepSeek-V3 on a 4-GPU GB200 node) still
    gets its likeliest figures early. Then every other layout, each on every card."""
    layouts = _layouts(evidence, target)
    cards = _cards(evidence, target, fleet_cards)
    allowed = [(card, layout) for layout, denied in layouts for card in cards if card not in denied]
    first = []
    for card in cards:
        likeliest = next((pair for pair in allowed if pair[0] == card), None)
        if likeliest is not None:
            first.append(likeliest)
    ordered = first + [pair for pair in allowed if pair not in first]
    return [EstimateRequest(model=proposal.repo_id, model_commit=proposal.sha, config=proposal.config, card=card,
                            layout=layout, isl=DEFAULT_ISL, osl=DEFAULT_OSL)
            for card, layout in ordered[:MAX_ESTIMATES]]


def waiting_for_a_perf_worker(polled: bool, queue: str, until: datetime) -> DraftPerformance:
    """What a draft says while its estimates wait on the perf queue: nobody polls it (the extra is not
    installed, or its worker is down), or its worker is busy with other drafts' searches."""
    if polled:
        return DraftPerformance(status="pending", reason=f"estimates follow: queued on {queue} behind other "
                                "searches (the perf worker runs one at a time)")
    return DraftPerformance(status="unavailable", reason=(
        f"{NOT_INSTALLED}, or its worker is down: nothing polls {queue}. The estimates are queued and follow "
        f"as soon as a perf worker starts (until {until:%Y-%m-%d %H:%M} UTC)"))


def gave_up_waiting(queue: str, waited: timedelta) -> DraftPerformance:
    return DraftPerformance(status="unavailable", reason=(
        f"{NOT_INSTALLED}: no perf worker took this draft's estimates from {queue} within {waited.days} days; "
        "the next draft version asks again"))
