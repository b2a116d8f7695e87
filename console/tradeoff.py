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

The tool reports its best configuration even when none meets the TTFT/TPOT targets it was asked for, so
each row is checked against the targets it carries: a row that misses them is drawn hollow (its own
legend entry) and says which target it misses by how much in the table; the recommendation is taken among
the rows that meet them, and when none does the picture and the table say so. Where the frontier's points
carry their latencies, its part within the targets is drawn in the mode's colour over the whole in grey.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from pydantic import BaseModel

from console.charts import Point, Shape, XYSeries, xy_plot
from console.words import card_name, layout_name
from wingsmith.domain.draft_performance import PerformanceRow
from wingsmith.domain.perf.estimates import FrontierPoint

# Words from outside (the tool's reasons, its parallelism and version strings) are cut to this in a cell.
MAX_WORDS = 400
MAX_REASONS = 4  # distinct reasons quoted where a page says why it has no picture
MODE_WORDS = {"agg": "aggregated", "disagg": "disaggregated"}
# (marker, dashed line, colour) per mode: shape and dash as well as colour keep the two modes apart in
# grey print and for colour-blind readers.
STYLE: dict[str, tuple[Shape, bool, int]] = {"agg": ("circle", False, 0), "disagg": ("square", True, 2)}
BEYOND_COLOUR = 4  # grey: the part of a frontier beyond the latency targets
MISSES = "misses the latency target"
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
    targets: str = "—"  # whether the figures meet the latency targets they were estimated under, in words
    misses: bool = False


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
    def none_meets(self) -> bool:
        """Every row with figures misses its latency targets (AIConfigurator reported its best anyway)."""
        measured = [r for r in self.rows if has_figures(r)]
        return bool(measured) and all(r.meets_targets is False for r in measured)

    @property
    def none_meets_words(self) -> str:
        if not self.none_meets or self.recommended is None:
            return ""
        return (f"no configuration AIConfigurator found on {self.name} meets the latency targets it was asked for "
                f"({targets_words(self.recommended)}); the ringed point is the highest throughput per GPU, "
                "and it misses them")

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
        "source": _bounded(row.source) or "—", "targets": meets_words(row), "misses": row.meets_targets is False})


def targets_words(row: PerformanceRow) -> str:
    return f"TTFT ≤ {figure(row.ttft_target_ms)} ms, TPOT ≤ {figure(row.tpot_target_ms)} ms"


def meets_words(row: PerformanceRow) -> str:
    """'meets TTFT ≤ 2,000 ms, TPOT ≤ 30 ms', 'misses the TPOT target (94 ms against 30 ms)', or, for a
    row saved before rows kept their targets, that nobody can tell."""
    if row.meets_targets is None:
        return "the targets it was estimated under were not recorded"
    if row.meets_targets:
        return f"meets {targets_words(row)}"
    return "; ".join(str(m) for m in row.missed)


def recommended(rows: list[PerformanceRow]) -> PerformanceRow | None:
    """AIConfigurator's choice: the highest throughput per GPU among the rows within their latency targets;
    among all rows with figures when none is (CardTradeoff.none_meets says so). A row whose targets were
    not recorded is not known to miss them and stays a candidate."""
    measured = [r for r in rows if has_figures(r)]
    within = [r for r in measured if r.meets_targets is not False] or measured
    return max(within, key=lambda r: r.tokens_per_second_per_gpu or 0.0) if within else None


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
        owner = next((r for r in card.rows if r.mode == mode and r.layout == best.layout and has_figures(r)), None)
        if owner is not None:
            series += _frontier_series(owner, dashed, colour)
        drawn = [r for r in card.rows if r.mode == mode and has_figures(r)]
        points = [_at(r, describe(r)) for r in drawn if r.meets_targets is not False]
        if points:
            series.append(XYSeries(label=f"{MODE_WORDS[mode]}: the best configuration per layout",
                                   points=points, shape=shape, colour=colour))
        missing = [_at(r, f"{describe(r)}: {meets_words(r)}") for r in drawn if r.meets_targets is False]
        if missing:
            series.append(XYSeries(label=f"{MODE_WORDS[mode]}: {MISSES}", points=missing, shape=shape,
                                   colour=colour, hollow=True))
    title = (f"Throughput per GPU against throughput per user on {card.name}, "
             f"{card.isl:,} input and {card.osl:,} output tokens per request")
    words = (f"Recommended: {describe(best)}, {figure(best.tokens_per_second_per_gpu)} tokens/s per GPU at "
             f"{figure(best.tokens_per_second_per_user, 1)} tokens/s per user (TTFT {figure(best.ttft_ms)} ms, "
             f"TPOT {figure(best.tpot_ms, 1)} ms). {sum(has_figures(r) for r in card.rows)} configurations drawn; "
             "the table below has every figure.")
    misses = sum(has_figures(r) and r.meets_targets is False for r in card.rows)
    if card.none_meets:
        words += f" Careful: {card.none_meets_words}."
    elif misses:
        words += f" {misses} of them miss their latency targets (drawn hollow)."
    if best.frontier and below_frontier(best):
        words += (" AIConfigurator's frontier does better on both axes than its pick, a configuration of another "
                  "parallelism taken as the closest to the TPOT target; the line is drawn through the pick.")
    chosen = ("recommended, though it misses the latency targets (none meets them): the highest throughput per GPU"
              if card.none_meets else "recommended: the highest throughput per GPU within the latency targets")
    return xy_plot(title, series, X_LABEL, Y_LABEL, description=words,
                   callout=_at(best, f"recommended: {MODE_WORDS.get(best.mode, best.mode)}"
                                     f"{', ' + best.parallelism if best.parallelism else ''}"),
                   callout_word=chosen)


def _frontier_series(owner: PerformanceRow, dashed: bool, colour: int) -> list[XYSeries]:
    """The row's frontier as lines: its part within the row's latency targets in the mode's colour over the
    whole in grey. Points whose latencies or targets were not recorded are one line, as the tool gave them.

    The line joins the row's own configuration too. AIConfigurator's pick is on its frontier when it meets
    the TPOT target; when none does, the tool takes each parallelism's best and keeps the one closest to the
    target, which may lie below the frontier of another parallelism (Kimi-K3 on 16 × H200: TP8 DP2 under
    TP16's line). The line through it shows where the pick sits on what the sweep reached, and the picture's
    description says that it lies below (`below_frontier`)."""
    frontier = _with_own_point(owner)
    if len(frontier) < 2:
        return []
    mode = MODE_WORDS[owner.mode]
    where = f"AIConfigurator's pareto frontier on {layout_name(owner.layout)}"

    def line(points: list[FrontierPoint], label: str, colour: int) -> list[XYSeries]:
        drawn = [Point(label=label, x=p.tokens_per_second_per_user, y=p.tokens_per_second_per_gpu) for p in points]
        return [XYSeries(label=label, points=drawn, shape=None, joined=True, dashed=dashed, colour=colour)] \
            if len(drawn) > 1 else []

    judged = [(p, _within(p, owner)) for p in frontier]
    if any(verdict is None for _, verdict in judged):
        return line(frontier, f"{mode}: {where}", colour)
    within = [p for p, verdict in judged if verdict]
    # The whole frontier in grey under its part within the targets in the mode's colour: the line stays
    # whole (a single point beyond the targets still shows), and the colour marks what meets them.
    beyond = line(frontier, f"{mode}: pareto frontier beyond the latency targets", BEYOND_COLOUR) \
        if len(within) < len(frontier) else []
    return beyond + line(within, f"{mode}: pareto frontier within the latency targets", colour)


def _own_point(row: PerformanceRow) -> FrontierPoint:
    return FrontierPoint(tokens_per_second_per_user=row.tokens_per_second_per_user or 0.0,
                         tokens_per_second_per_gpu=row.tokens_per_second_per_gpu or 0.0, ttft_ms=row.ttft_ms,
                         tpot_ms=row.tpot_ms)


def _with_own_point(row: PerformanceRow) -> list[FrontierPoint]:
    """The row's frontier with its own configuration among its points (once), ordered by throughput per user;
    a row without a frontier has none to join."""
    if not row.frontier:
        return []
    own = _own_point(row)
    same = any(math.isclose(p.tokens_per_second_per_user, own.tokens_per_second_per_user, rel_tol=1e-3)
               and math.isclose(p.tokens_per_second_per_gpu, own.tokens_per_second_per_gpu, rel_tol=1e-3)
               for p in row.frontier)
    return sorted(row.frontier if same else [*row.frontier, own], key=lambda p: p.tokens_per_second_per_user)


def below_frontier(row: PerformanceRow) -> bool:
    """Whether a point of the row's own frontier does better on both axes than the configuration it chose."""
    own = _own_point(row)
    return any(p.tokens_per_second_per_user >= own.tokens_per_second_per_user
               and p.tokens_per_second_per_gpu >= own.tokens_per_second_per_gpu
               and (p.tokens_per_second_per_user, p.tokens_per_second_per_gpu)
               != (own.tokens_per_second_per_user, own.tokens_per_second_per_gpu) for p in row.frontier)


def _within(point: FrontierPoint, row: PerformanceRow) -> bool | None:
    ttft, tpot, ttft_target, tpot_target = point.ttft_ms, point.tpot_ms, row.ttft_target_ms, row.tpot_target_ms
    if ttft is None or tpot is None or ttft_target is None or tpot_target is None:
        return None
    return ttft <= ttft_target and tpot <= tpot_target


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
    api/services/estimates.with_performance)."""
    rows = [PerformanceRow.model_validate(r) for r in draft.get("performance") or []]
    return tradeoff_view(rows, draft.get("performance_reason"))
