"""The console's pictures, drawn on the server as inline SVG.

No charting script: the pages stay whole without JavaScript, nothing is fetched from elsewhere, and the
strict CSP (no inline script, no inline style) holds, because an SVG's geometry is given by attributes
and its colours by classes in console.css. Every label comes from outside the plane (cluster names,
variant names), so each is escaped here; a page puts the same figures in a table under each chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import count
from typing import Literal

from markupsafe import Markup, escape
from pydantic import BaseModel

from console.chart_words import LINE_PX, svg_text, text_width, wrap

WIDTH = 720
LABEL_WIDTH = 260
ROW_HEIGHT = 26
BAR_HEIGHT = 16
PLOT_HEIGHT = 160

_ids = count(1)


class Segment(BaseModel):
    label: str
    value: float


class BarRow(BaseModel):
    """One bar: its segments stacked left to right, and optional marks drawn across it (a limit)."""
    label: str
    segments: list[Segment]
    marks: list[Segment] = []


class Series(BaseModel):
    label: str
    points: list[tuple[float, float]]  # (x, y)


class Point(BaseModel):
    label: str
    x: float
    y: float


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def figure_within(value: float, room: float) -> str:
    """A figure for an axis in at most `room` units: grouped thousands when they fit, else 2.5k, 12M, 3G."""
    words = _fmt(value)
    if text_width(words) <= room or abs(value) < 1e3:
        return words
    scale, suffix = next(s for s in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if abs(value) >= s[0])
    return f"{_fmt(value / scale)}{suffix}"


def _svg(title: str, height: int, body: list[str], legend: Sequence[str] = (),
         mark_legend: Sequence[str] = (), description: str = "") -> Markup:
    """The chart's frame: an image with a name (its title) and, when given, a description in words for
    screen readers, then its legend."""
    chart_id = f"chart-{next(_ids)}"
    described = (f' aria-describedby="{chart_id}-desc"', f'<desc id="{chart_id}-desc">{escape(description)}</desc>') \
        if description else ("", "")
    keys = "".join(f'<span class="key"><span class="swatch series-{i % 6}"></span>{escape(name)}</span>'
                   for i, name in enumerate(legend))
    keys += "".join(f'<span class="key"><span class="swatch mark-{i % 3}"></span>{escape(name)} (line)</span>'
                    for i, name in enumerate(mark_legend))
    return Markup(
        f'<figure class="chart"><svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{chart_id}"{described[0]} preserveAspectRatio="xMinYMin meet">'
        f'<title id="{chart_id}">{escape(title)}</title>{described[1]}{"".join(body)}</svg>'
        + (f'<figcaption class="legend">{keys}</figcaption>' if keys else "") + "</figure>")


def stacked_bars(title: str, rows: Sequence[BarRow], unit: str) -> Markup:
    """A horizontal bar per row, its segments stacked (series colours by segment position), each row's
    marks as vertical lines with their label; all rows share one scale so they compare. A label longer
    than its column wraps onto more lines (the row grows) instead of being cut; the figure after each bar
    has the room its longest one needs."""
    if not rows:
        return Markup("")
    top = max([sum(s.value for s in r.segments) for r in rows] + [m.value for r in rows for m in r.marks] + [1e-9])
    totals = [f"{_fmt(sum(s.value for s in r.segments))} {unit}" for r in rows]
    span = WIDTH - LABEL_WIDTH - max(text_width(t) for t in totals) - 12
    body = []
    y = 8
    for row, total in zip(rows, totals, strict=True):
        lines = wrap(row.label, LABEL_WIDTH - 10, most=3)
        height = max(ROW_HEIGHT, len(lines) * LINE_PX + 11)
        bar_y = y + (height - ROW_HEIGHT) // 2  # the bar beside the middle of its label
        body.append(svg_text(0, y + BAR_HEIGHT - 3, lines, extra=f' data-label="{escape(row.label)}"'))
        x = float(LABEL_WIDTH)
        for j, seg in enumerate(row.segments):
            w = max(seg.value, 0) / top * span
            body.append(f'<rect class="series-{j % 6}" x="{x:.1f}" y="{bar_y}" width="{w:.1f}" height="{BAR_HEIGHT}">'
                        f'<title>{escape(row.label)}: {escape(seg.label)} {_fmt(seg.value)} {escape(unit)}</title>'
                        f'</rect>')
            x += w
        for k, mark in enumerate(row.marks):
            mx = LABEL_WIDTH + mark.value / top * span
            body.append(f'<line class="mark mark-{k % 3}" x1="{mx:.1f}" x2="{mx:.1f}" y1="{bar_y - 3}" '
                        f'y2="{bar_y + BAR_HEIGHT + 3}">'
                        f'<title>{escape(mark.label)} {_fmt(mark.value)} {escape(unit)}</title></line>')
        # After the bar, or after the furthest mark when one reaches past it: no line crosses the figure.
        end = max([x] + [LABEL_WIDTH + m.value / top * span for m in row.marks])
        body.append(f'<text class="value" x="{end + 6:.1f}" y="{bar_y + BAR_HEIGHT - 3}">{escape(total)}</text>')
        y += height
    legend = [s.label for s in max(rows, key=lambda r: len(r.segments)).segments]
    marks = [m.label for m in max(rows, key=lambda r: len(r.marks)).marks]
    return _svg(title, y + 8, body, legend if len(legend) > 1 else (), marks)


def bars(title: str, rows: Sequence[tuple[str, float]], unit: str) -> Markup:
    """One plain bar per label."""
    return stacked_bars(title, [BarRow(label=label, segments=[Segment(label=unit, value=v)]) for label, v in rows],
                        unit)


def _axes(x_label: str, y_label: str, y_top: float) -> list[str]:
    left, bottom = 60, PLOT_HEIGHT + 10
    return [f'<line class="axis" x1="{left}" y1="10" x2="{left}" y2="{bottom}"/>',
            f'<line class="axis" x1="{left}" y1="{bottom}" x2="{WIDTH - 10}" y2="{bottom}"/>',
            f'<text class="label" x="0" y="18">{_fmt(y_top)}</text>',
            f'<text class="label" x="0" y="{bottom}">0</text>',
            f'<text class="label" x="{left}" y="{bottom + 18}">{escape(x_label)}</text>',
            f'<text class="label" x="{left + 8}" y="22">{escape(y_label)}</text>']


def _scale(values: Sequence[float]) -> tuple[float, float]:
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    return low, (high - low) or 1.0


def time_series(title: str, series: Sequence[Series], x_label: str, y_label: str) -> Markup:
    """Lines over a shared x (time) and y scale, from zero."""
    drawn = [s for s in series if s.points]
    if not drawn:
        return Markup("")
    x0, xs = _scale([x for s in drawn for x, _ in s.points])
    y_top = max([y for s in drawn for _, y in s.points] + [1e-9])
    left, width = 60, WIDTH - 70
    body = _axes(x_label, y_label, y_top)
    for i, s in enumerate(drawn):
        coords = " ".join(f"{left + (x - x0) / xs * width:.1f},{10 + PLOT_HEIGHT * (1 - y / y_top):.1f}"
                          for x, y in s.points)
        body.append(f'<polyline class="line series-{i % 6}" points="{coords}"><title>{escape(s.label)}</title>'
                    f'</polyline>')
    return _svg(title, PLOT_HEIGHT + 36, body, [s.label for s in drawn])


def scatter(title: str, points: Sequence[Point], x_label: str, y_label: str) -> Markup:
    """One dot per point, its label in the dot's tooltip."""
    if not points:
        return Markup("")
    x0, xs = _scale([p.x for p in points])
    y_top = max([p.y for p in points] + [1e-9])
    left, width = 60, WIDTH - 70
    body = _axes(x_label, y_label, y_top)
    for p in points:
        body.append(f'<circle class="dot series-0" cx="{left + (p.x - x0) / xs * width:.1f}" '
                    f'cy="{10 + PLOT_HEIGHT * (1 - p.y / y_top):.1f}" r="4"><title>{escape(p.label)}: '
                    f'{_fmt(p.x)}, {_fmt(p.y)}</title></circle>')
    return _svg(title, PLOT_HEIGHT + 36, body)


# -- a plot of points over two measured axes ------------------------------------------------------------
Shape = Literal["circle", "square"]
MAX_PLOTTED = 256  # points per series: more adds nothing a 720-pixel picture can show
MAX_SERIES = 16
PLOT_LEFT, PLOT_TOP, PLOT_RIGHT, XY_HEIGHT = 72, 12, 16, 260
KEY_HEIGHT = 18


class XYSeries(BaseModel):
    """Points of one kind. Series differ by marker shape and dash as well as colour, so a reader who does
    not see the colours (or prints the page) still tells them apart; the legend shows both."""
    label: str
    points: list[Point]
    shape: Shape | None = "circle"  # None: a line without markers
    joined: bool = False
    dashed: bool = False
    colour: int = 0  # console.css's series-N
    hollow: bool = False  # markers drawn as outlines (console.css's `hollow`): points that fall short of something


def _ticks(top: float) -> list[float]:
    """Round steps from zero to at least `top`: 1, 2, 2.5 or 5 times a power of ten, four to six of them."""
    raw = (top if top > 0 else 1.0) / 5
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(max(math.ceil(top / step - 1e-9), 1) + 1)]


def _marker(shape: Shape, x: float, y: float, css: str, tip: str) -> str:
    if shape == "square":
        return f'<rect class="{css}" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8"><title>{tip}</title></rect>'
    return f'<circle class="{css}" cx="{x:.1f}" cy="{y:.1f}" r="4.5"><title>{tip}</title></circle>'


def _plottable(points: Sequence[Point]) -> list[Point]:
    """Figures a picture can place: finite and not below zero (anything else from outside is left out)."""
    return [p for p in points if math.isfinite(p.x) and math.isfinite(p.y) and p.x >= 0 and p.y >= 0][:MAX_PLOTTED]


def xy_plot(title: str, series: Sequence[XYSeries], x_label: str, y_label: str, *, description: str = "",
            callout: Point | None = None, callout_word: str = "") -> Markup:
    """Points (optionally joined) over two axes that start at zero, ticked in round steps, with their units
    in the axis names; `callout` rings one point and writes its label beside it. The legend is drawn in
    the picture, each key with its series' line and marker."""
    drawn = [s.model_copy(update={"points": _plottable(s.points)}) for s in series[:MAX_SERIES]]
    drawn = [s for s in drawn if s.points]
    if not drawn:
        return Markup("")
    if callout is not None and not _plottable([callout]):
        callout = None
    everything = [p for s in drawn for p in s.points] + ([callout] if callout else [])
    x_ticks = _ticks(max(p.x for p in everything))
    y_ticks = _ticks(max(p.y for p in everything))
    width, bottom = WIDTH - PLOT_LEFT - PLOT_RIGHT, PLOT_TOP + XY_HEIGHT

    def at(p: Point) -> tuple[float, float]:
        return PLOT_LEFT + p.x / x_ticks[-1] * width, bottom - p.y / y_ticks[-1] * XY_HEIGHT

    body = [f'<line class="axis" x1="{PLOT_LEFT}" y1="{PLOT_TOP}" x2="{PLOT_LEFT}" y2="{bottom}"/>',
            f'<line class="axis" x1="{PLOT_LEFT}" y1="{bottom}" x2="{WIDTH - PLOT_RIGHT}" y2="{bottom}"/>']
    for t in y_ticks:
        y = bottom - t / y_ticks[-1] * XY_HEIGHT
        body.append(f'<line class="axis" x1="{PLOT_LEFT - 4}" y1="{y:.1f}" x2="{PLOT_LEFT}" y2="{y:.1f}"/>'
                    f'<text class="label" x="{PLOT_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in x_ticks:
        x = PLOT_LEFT + t / x_ticks[-1] * width
        body.append(f'<line class="axis" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}"/>'
                    f'<text class="label" x="{x:.1f}" y="{bottom + 17}" text-anchor="middle">{_fmt(t)}</text>')
    body.append(f'<text class="label" x="{PLOT_LEFT + width / 2:.1f}" y="{bottom + 36}" text-anchor="middle">'
                f'{escape(x_label)}</text>')
    body.append(f'<text class="label" transform="rotate(-90)" x="{-(PLOT_TOP + XY_HEIGHT / 2):.1f}" y="14" '
                f'text-anchor="middle">{escape(y_label)}</text>')
    for s in drawn:
        css = f"series-{s.colour % 6}"
        dash = ' stroke-dasharray="7 4"' if s.dashed else ""
        if s.joined and len(s.points) > 1:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (at(p) for p in sorted(s.points, key=lambda p: p.x)))
            body.append(f'<polyline class="line {css}" points="{coords}"{dash}><title>{escape(s.label)}</title>'
                        f'</polyline>')
        if s.shape is not None:
            body.extend(_marker(s.shape, *at(p), f"dot {css}{' hollow' if s.hollow else ''}",
                                f"{escape(p.label or s.label)}: {_fmt(p.x)}, {_fmt(p.y)}") for p in s.points)
    if callout is not None:
        cx, cy = at(callout)
        body.append(f'<circle class="callout" cx="{cx:.1f}" cy="{cy:.1f}" r="10" fill="none" stroke="currentColor" '
                    f'stroke-width="2.5"><title>{escape(callout.label)}</title></circle>'
                    + _callout_words(callout.label, cx, cy, bottom))
    # The legend under the plot: a key per series, its words wrapped (never cut) within the picture.
    y = bottom + 50
    words_at, room = PLOT_LEFT + 36, WIDTH - PLOT_LEFT - 36 - 8
    for s in drawn:
        css = f"series-{s.colour % 6}"
        if s.joined:
            dash = ' stroke-dasharray="7 4"' if s.dashed else ""
            body.append(f'<line class="line {css}" x1="{PLOT_LEFT}" y1="{y:.1f}" x2="{PLOT_LEFT + 28}" '
                        f'y2="{y:.1f}"{dash}/>')
        if s.shape is not None:
            body.append(_marker(s.shape, PLOT_LEFT + 14, y, f"key dot {css}{' hollow' if s.hollow else ''}",
                                escape(s.label)))
        lines = wrap(s.label, room)
        body.append(svg_text(words_at, y + 4, lines, css="label key-words"))
        y += KEY_HEIGHT + (len(lines) - 1) * LINE_PX
    if callout is not None:
        lines = wrap(callout_word or callout.label, room)
        body.append(f'<circle cx="{PLOT_LEFT + 14}" cy="{y:.1f}" r="7" fill="none" stroke="currentColor" '
                    f'stroke-width="2.5"/>' + svg_text(words_at, y + 4, lines, css="label key-words"))
        y += KEY_HEIGHT + (len(lines) - 1) * LINE_PX
    return _svg(title, y, body, description=description)


def _callout_words(label: str, cx: float, cy: float, bottom: float) -> str:
    """The ringed point's name beside it, on the side with room for it (wrapped when neither side has),
    above the point unless that would leave the plot: inside the plot, clear of the axes' labels."""
    width = text_width(label, bold=True)
    right_room = WIDTH - PLOT_RIGHT - 4 - (cx + 14)
    left_room = (cx - 14) - (PLOT_LEFT + 4)
    right = width <= right_room or (width > left_room and right_room >= left_room)
    lines = wrap(label, max(right_room if right else left_room, 80.0), bold=True, most=3)
    above = cy - 14 - (len(lines) - 1) * LINE_PX
    ty = above if above >= PLOT_TOP + 12 else min(cy + 26, bottom - 6 - (len(lines) - 1) * LINE_PX)
    return svg_text(cx + 14 if right else cx - 14, ty, lines, css="label callout", anchor="start" if right else "end",
                 extra=' font-weight="bold"')
