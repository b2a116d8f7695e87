"""The console's pictures, drawn on the server as inline SVG.

No charting script: the pages stay whole without JavaScript, nothing is fetched from elsewhere, and the
strict CSP (no inline script, no inline style) holds, because an SVG's geometry is given by attributes
and its colours by classes in console.css. Every label comes from outside the plane (cluster names,
variant names), so each is escaped here; a page puts the same figures in a table under each chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

from markupsafe import Markup, escape
from pydantic import BaseModel

WIDTH = 720
LABEL_WIDTH = 260
ROW_HEIGHT = 26
BAR_HEIGHT = 16
PLOT_HEIGHT = 160
MAX_LABEL = 38  # characters shown beside a bar; the whole label is in the bar's tooltip and the table

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


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[:MAX_LABEL - 1] + "…"


def _svg(title: str, height: int, body: list[str], legend: Sequence[str] = (),
         mark_legend: Sequence[str] = ()) -> Markup:
    """The chart's frame: an image with a name (its title) for screen readers, then its legend."""
    chart_id = f"chart-{next(_ids)}"
    keys = "".join(f'<span class="key"><span class="swatch series-{i % 6}"></span>{escape(name)}</span>'
                   for i, name in enumerate(legend))
    keys += "".join(f'<span class="key"><span class="swatch mark-{i % 3}"></span>{escape(name)} (line)</span>'
                    for i, name in enumerate(mark_legend))
    return Markup(
        f'<figure class="chart"><svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{chart_id}" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{chart_id}">{escape(title)}</title>{"".join(body)}</svg>'
        + (f'<figcaption class="legend">{keys}</figcaption>' if keys else "") + "</figure>")


def stacked_bars(title: str, rows: Sequence[BarRow], unit: str) -> Markup:
    """A horizontal bar per row, its segments stacked (series colours by segment position), each row's
    marks as vertical lines with their label; all rows share one scale so they compare."""
    if not rows:
        return Markup("")
    top = max([sum(s.value for s in r.segments) for r in rows] + [m.value for r in rows for m in r.marks] + [1e-9])
    span = WIDTH - LABEL_WIDTH - 60
    body = []
    for i, row in enumerate(rows):
        y = 8 + i * ROW_HEIGHT
        body.append(f'<text class="label" x="0" y="{y + BAR_HEIGHT - 3}">{escape(_short(row.label))}</text>')
        x = float(LABEL_WIDTH)
        for j, seg in enumerate(row.segments):
            w = max(seg.value, 0) / top * span
            body.append(f'<rect class="series-{j % 6}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_HEIGHT}">'
                        f'<title>{escape(row.label)}: {escape(seg.label)} {_fmt(seg.value)} {escape(unit)}</title>'
                        f'</rect>')
            x += w
        total = sum(s.value for s in row.segments)
        for k, mark in enumerate(row.marks):
            mx = LABEL_WIDTH + mark.value / top * span
            body.append(f'<line class="mark mark-{k % 3}" x1="{mx:.1f}" x2="{mx:.1f}" y1="{y - 3}" '
                        f'y2="{y + BAR_HEIGHT + 3}">'
                        f'<title>{escape(mark.label)} {_fmt(mark.value)} {escape(unit)}</title></line>')
        body.append(f'<text class="value" x="{x + 4:.1f}" y="{y + BAR_HEIGHT - 3}">{_fmt(total)} {escape(unit)}</text>')
    legend = [s.label for s in max(rows, key=lambda r: len(r.segments)).segments]
    marks = [m.label for m in max(rows, key=lambda r: len(r.marks)).marks]
    return _svg(title, 16 + len(rows) * ROW_HEIGHT, body, legend if len(legend) > 1 else (), marks)


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
