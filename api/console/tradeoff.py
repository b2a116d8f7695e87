"""A draft's throughput trade-off (issue 36), one picture per card: AIConfigurator's throughput per GPU
against throughput per user, aggregated against disaggregated, with the recommended configuration ringed.

What is drawn is only what the draft holds. Each card × layout × mode row is AIConfigurator's best
configuration for that mode within the layout's GPU budget: one marker each (circles aggregated, squares
disaggregated). The row also carries the tool's pareto frontier (every configuration it kept, thinned to
at most 64 points); the frontiers of the recommended layout are drawn as lines (solid aggregated, dashed
disaggregated), so the picture shows what moving along the trade-off buys. Other layouts' frontiers are
left out: overlapping lines of one colour per mode would hide more than they show, and their best points
are there. The recommended point is the one AIConfigurator's own CLI chooses between the modes: the
highest throughput per GPU within the latency targets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from pydantic import BaseModel

from api.console.charts import Point, Shape, XYSeries, xy_plot
from api.console.words import card_name, layout_name
from wingsmith.draft_performance import PerformanceRow

# Words from outside (the tool's reasons, its parallelism and version strings) are cut to this in a cell.
MAX_WORDS = 400
MAX_REASONS = 4  # distinct reasons quoted where a page says why it has no picture
MODE_WORDS = {"agg": "aggregated", "disagg": "disaggregated"}
# (marker, dashed line, colour) per mode: shape and dash as well as colour keep the two modes apart in
# grey print and for colour-blind readers.
STYLE: dict[str, tuple[Shape, bool, int]] = {"agg": ("circle", False, 0), "disagg": ("square", True, 2)}
X_LABEL = "throughput per user (tokens/s per user)"
Y_LABEL = "throughput per GPU (tokens/s per GPU)"


class TableRow(BaseModel):
    """One row of the table under a picture, its figures already in words."""
    layout: str
    layout_words: str
    mode: str
    mode_words: str
    recommended: bool
    reason: str | None  # why no figures; None when the row has them
    per_gpu: str = "—"
    per_user: str = "—"
    ttft_ms: str = "—"
    tpot_ms: str = "—"
    concurrency: str = "—"
    gpus: str = "—"
    parallelism: str = "—"
    source: str = "—"


class CardTradeoff(BaseModel):
    """One card's rows, in the draft's order, and the one AIConfigurator would choose."""
    card: str
    name: str
    isl: int
    osl: int
    rows: list[PerformanceRow]
    recommended: PerformanceRow | None

    @property
    def recommended_words(self) -> str:
        return describe(self.recommended) if self.recommended else ""

    @property
    def table(self) -> list[TableRow]:
        return [_table_row(r, r is self.recommended) for r in self.rows]


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def has_figures(row: PerformanceRow) -> bool:
    return _finite(row.tokens_per_second_per_gpu) and _finite(row.tokens_per_second_per_user)


def figure(value: float | None, digits: int = 0) -> str:
    """A figure for a table cell: grouped thousands, or a dash where the tool gave none (or nonsense)."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"


def _bounded(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_WORDS else text[:MAX_WORDS - 1] + "…"


def _table_row(row: PerformanceRow, chosen: bool) -> TableRow:
    why = None if has_figures(row) else _bounded(row.reason or "the estimate holds no usable figures")
    words = TableRow(layout=row.layout, layout_words=layout_name(row.layout), mode=row.mode,
                     mode_words=MODE_WORDS.get(row.mode, row.mode), recommended=chosen, reason=why)
    if words.reason:
        return words
    return words.model_copy(update={
        "per_gpu": figure(row.tokens_per_second_per_gpu), "per_user": figure(row.tokens_per_second_per_user, 1),
        "ttft_ms": figure(row.ttft_ms), "tpot_ms": figure(row.tpot_ms, 1),
        "concurrency": f"{row.concurrency:,}" if row.concurrency is not None else "—",
        "gpus": str(row.gpus) if row.gpus is not None else "—", "parallelism": _bounded(row.parallelism) or "—",
        "source": _bounded(row.source) or "—"})


def recommended(rows: list[PerformanceRow]) -> PerformanceRow | None:
    """AIConfigurator's choice: the highest throughput per GPU (every row already meets the targets)."""
    measured = [r for r in rows if has_figures(r)]
    return max(measured, key=lambda r: r.tokens_per_second_per_gpu or 0.0) if measured else None


def by_card(rows: list[PerformanceRow]) -> list[CardTradeoff]:
    """The rows grouped by card, cards in the order the draft asked for them (its sizing card first)."""
    cards: dict[str, list[PerformanceRow]] = {}
    for row in rows:
        cards.setdefault(row.card, []).append(row)
    return [CardTradeoff(card=card, name=card_name(card), isl=found[0].isl, osl=found[0].osl, rows=found,
                         recommended=recommended(found)) for card, found in cards.items()]


def describe(row: PerformanceRow) -> str:
    """The configuration in a few words: 'aggregated, TP1 on Tensor Parallel'."""
    how = f", {row.parallelism}" if row.parallelism else ""
    return f"{MODE_WORDS.get(row.mode, row.mode)}{how} on {layout_name(row.layout)}"


def _at(row: PerformanceRow, label: str) -> Point:
    return Point(label=label, x=row.tokens_per_second_per_user or 0.0, y=row.tokens_per_second_per_gpu or 0.0)


def tradeoff_chart(card: CardTradeoff) -> Markup:
    """The picture for one card; empty when no row of it has figures (the page says why instead)."""
    best = card.recommended
    if best is None:
        return Markup("")
    series = []
    for mode, (shape, dashed, colour) in STYLE.items():
        frontier = next((r.frontier for r in card.rows if r.mode == mode and r.layout == best.layout
                         and has_figures(r)), [])
        if len(frontier) > 1:
            series.append(XYSeries(
                label=f"{MODE_WORDS[mode]}: AIConfigurator's pareto frontier on {layout_name(best.layout)}",
                points=[Point(label=f"{MODE_WORDS[mode]} frontier", x=p.tokens_per_second_per_user,
                              y=p.tokens_per_second_per_gpu) for p in frontier],
                shape=None, joined=True, dashed=dashed, colour=colour))
        points = [_at(r, describe(r)) for r in card.rows if r.mode == mode and has_figures(r)]
        if points:
            series.append(XYSeries(label=f"{MODE_WORDS[mode]}: the best configuration per layout",
                                   points=points, shape=shape, colour=colour))
    title = (f"Throughput per GPU against throughput per user on {card.name}, "
             f"{card.isl:,} input and {card.osl:,} output tokens per request")
    words = (f"Recommended: {describe(best)}, {figure(best.tokens_per_second_per_gpu)} tokens/s per GPU at "
             f"{figure(best.tokens_per_second_per_user, 1)} tokens/s per user (TTFT {figure(best.ttft_ms)} ms, "
             f"TPOT {figure(best.tpot_ms, 1)} ms). {sum(has_figures(r) for r in card.rows)} configurations drawn; "
             "the table below has every figure.")
    return xy_plot(title, series, X_LABEL, Y_LABEL, description=words,
                   callout=_at(best, f"recommended: {MODE_WORDS.get(best.mode, best.mode)}"
                                     f"{', ' + best.parallelism if best.parallelism else ''}"),
                   callout_word="recommended: the highest throughput per GPU within the latency targets")


@dataclass(frozen=True)
class TradeoffView:
    """What a page shows: a picture and a table per card, or, when no row has figures, why there is none."""
    cards: list[CardTradeoff]
    pictures: dict[str, Markup]
    why_none: str | None


def tradeoff_view(rows: list[PerformanceRow], reason: str | None) -> TradeoffView:
    """`reason`: the draft's own word on its figures (pending, the perf extra not installed)."""
    cards = by_card(rows)
    why = None
    if not any(c.recommended for c in cards):
        said = sorted({r.reason for c in cards for r in c.rows if r.reason})
        more = f" (and {len(said) - MAX_REASONS} more in the tables)" if len(said) > MAX_REASONS else ""
        why = reason or ("AIConfigurator gave no figures for this draft: "
                         + "; ".join(str(_bounded(r)) for r in said[:MAX_REASONS]) + more if said
                         else "the draft holds no performance estimate")
    return TradeoffView(cards=cards, pictures={c.card: tradeoff_chart(c) for c in cards}, why_none=why)


def draft_tradeoff(draft: dict[str, Any]) -> TradeoffView:
    """The view of a draft as the API returns it (`performance` lifted out of its sizing, see
    api/routes/artifacts.with_performance)."""
    rows = [PerformanceRow.model_validate(r) for r in draft.get("performance") or []]
    return tradeoff_view(rows, draft.get("performance_reason"))
