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
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, computed_field

from wingsmith.domain.drafts import SizingTarget, sizing_target
from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.perf.estimates import (
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
from wingsmith.domain.recipes import Evidence
from wingsmith.domain.sizing.layouts import LAYOUTS

# A draft asks for a few dozen estimates at most (contracts.perf.MAX_REQUESTS bounds one call).
MAX_ESTIMATES = 64
PENDING = "estimates follow: the perf worker is working on them"
# A draft saved before drafts carried estimates: no performance workflow was ever started for it.
NOT_ASKED = ("no estimate was asked for this draft (it predates estimates); an operator can ask for them "
             "(POST /v1/artifacts/<id>/drafts/<version>/performance)")

Status = Literal["pending", "estimated", "unavailable", "not_asked"]

__all__ = ["MAX_ESTIMATES", "NOT_ASKED", "NOT_INSTALLED", "PENDING", "DraftPerformance", "Missed", "PerformanceRow",
           "estimate_requests", "stored_draft_requests", "gave_up_waiting", "rows_of", "waiting_for_a_perf_worker"]


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
    # The latency targets the tool was asked to meet. None on rows saved before rows kept them: whether
    # those figures met anything is then unknown, and said so rather than guessed.
    ttft_target_ms: float | None = Field(default=None, description="the TTFT target the estimate was asked under")
    tpot_target_ms: float | None = Field(default=None, description="the TPOT target the estimate was asked under")

    @property
    def missed(self) -> list[Missed]:
        """The targets these figures miss: the tool reports its best configuration even when none meets the
        targets it was asked for (DeepSeek-V3 on GB200 at 115 ms per token against 30 ms)."""
        pairs = (("TTFT", self.ttft_ms, self.ttft_target_ms), ("TPOT", self.tpot_ms, self.tpot_target_ms))
        return [Missed(name=name, figure_ms=got, target_ms=target) for name, got, target in pairs
                if got is not None and target is not None and not got <= target]

    @computed_field(description="whether the figures meet the TTFT and TPOT targets they were estimated under; "  # type: ignore[prop-decorator]
                    "null without figures or without recorded targets")
    @property
    def meets_targets(self) -> bool | None:
        if self.ttft_ms is None or self.tpot_ms is None or self.ttft_target_ms is None or self.tpot_target_ms is None:
            return None
        return not self.missed


class Missed(BaseModel, frozen=True):
    """One latency target a row's figures miss."""
    name: Literal["TTFT", "TPOT"]
    figure_ms: float
    target_ms: float

    def __str__(self) -> str:
        return f"misses the {self.name} target ({self.figure_ms:,.0f} ms against {self.target_ms:,.0f} ms)"


class DraftPerformance(BaseModel):
    """What a draft says about performance: `pending` until the perf worker answers, `estimated` with rows,
    or `unavailable` with the reason (the perf extra is not installed)."""
    status: Status
    reason: str | None = None
    entries: list[PerformanceRow] = Field(default_factory=list)


def _row(entry: PerformanceEntry, targets: tuple[float, float]) -> PerformanceRow:
    row = PerformanceRow(card=entry.card, layout=entry.layout, mode=entry.mode, backend=entry.backend,
                         isl=entry.isl, osl=entry.osl, frontier=entry.frontier,
                         source=str(entry.source) if entry.source else None, reason=entry.reason,
                         ttft_target_ms=targets[0], tpot_target_ms=targets[1])
    conf = entry.configuration
    if conf is None:
        return row
    return row.model_copy(update={
        "tokens_per_second_per_gpu": conf.tokens_per_second_per_gpu,
        "tokens_per_second_per_user": conf.tokens_per_second_per_user, "ttft_ms": conf.ttft_ms,
        "tpot_ms": conf.tpot_ms, "concurrency": conf.concurrency, "gpus": conf.gpus, "replicas": conf.replicas,
        "gpus_per_replica": conf.gpus_per_replica, "parallelism": conf.parallelism, "workers": conf.workers})


def rows_of(estimates: list[Estimate]) -> list[PerformanceRow]:
    """Each row keeps the targets its request asked the tool to meet (the adapter asks exactly these)."""
    return [_row(entry, estimate.request.latency_targets) for estimate in estimates for entry in estimate.entries]


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


class Named(Protocol):
    """What an estimate request names of a model (an ArtifactProposal has it)."""
    @property
    def repo_id(self) -> str: ...
    @property
    def sha(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...


def estimate_requests(proposal: Named, evidence: Evidence | None, target: SizingTarget,
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


def stored_draft_requests(proposal: dict[str, Any], evidence: dict[str, Any],
                          sizing: dict[str, Any]) -> list[EstimateRequest]:
    """The estimates a saved draft asks for when someone asks after the fact (a draft that predates
    estimates), from what the registry holds of it: its proposal, evidence and sizing target (or, for a
    draft saved before it kept its target, the recipe's default one). The fleet's cards of the day were not
    kept: its sizing card and the recipe's verified cards are asked. ValueError, in words, when the stored
    facts cannot say what to ask."""
    try:
        found = Evidence.model_validate(evidence) if evidence else None
        target = SizingTarget.model_validate(sizing["target"]) if sizing.get("target") else sizing_target(found)
        # Only what a request names (estimate_requests reads nothing else of the proposal).
        named = _Named.model_validate(proposal)
    except (ValueError, LookupError) as err:
        raise ValueError(f"the stored draft cannot say what to estimate: {' '.join(str(err).split())[:300]}") from None
    return estimate_requests(named, found, target)


class _Named(BaseModel):
    """The part of an ArtifactProposal an estimate request names."""
    repo_id: str = Field(min_length=1)
    sha: str = Field(min_length=1)
    config: dict[str, Any]


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
