"""Lines over a window of time, drawn on the server as inline SVG in the frame of console/charts.py
(the same CSP-safe classes, escaped labels, a title and a description for screen readers).

Unlike `charts.time_series`, the time axis is the window asked for (the last hour stays the last hour
when the data covers ten minutes of it), a missing figure (None: no request, so no latency) breaks the
line instead of drawing a zero, and a chart may carry levels (a predicted latency, as a horizontal
line) and marks (decision points, as vertical lines; where they crowd, one shaded band that counts them,
so a short dwell's dozens of decisions do not hide the lines they are about). The unit is named above the
plot, clear of its top line (a share of traffic runs along 100 %).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from markupsafe import Markup, escape
from pydantic import BaseModel

from console.chart_words import text_width
from console.charts import WIDTH, _fmt, _svg, figure_within

LEFT, RIGHT, TOP = 56, 12, 24  # TOP: the band above the plot holds the unit and the marks' counts
MAX_POINTS = 720  # per line: more than a 720-pixel picture can show (a 10 s period over two hours)
# Marks as lines while a picture can tell them apart: more than MAX_MARK_LINES, and neighbours closer than
# the plot's width over 2 × MAX_MARK_LINES (closer than MIN_MARK_GAP pixels, always) become one band.
MAX_MARK_LINES = 8
MIN_MARK_GAP = 8.0


class TimeLine(BaseModel):
    label: str
    points: list[tuple[datetime, float | None]]
    colour: int = 0  # console.css's series-N
    dashed: bool = False


class Level(BaseModel):
    """A horizontal line across the chart (a target, a prediction)."""
    label: str
    value: float


class TimeMark(BaseModel):
    """A vertical line at a moment (a decision); `kind` 0 draws it red (a rollback), 1 dark, 2 amber; `head` an
    arrowhead at its top, pointing up (more: a scale-out) or down (fewer: a scale-in)."""
    label: str
    at: datetime
    kind: int = 1
    head: Literal["", "up", "down"] = ""


def nice_top(top: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10ⁿ at or above `top` (an axis that ends on a round figure)."""
    if not math.isfinite(top) or top <= 1e-6:  # nothing but zeros: an axis to 1, not to a rounding error
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= top - 1e-12)


TICK_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600)  # seconds


def tick_step(start: datetime, end: datetime) -> int:
    """The round step (5 s … 6 h) that puts at most six ticks in the window (small charts stay legible)."""
    span = max((end - start).total_seconds(), 1.0)
    return next((step for step in TICK_STEPS if span / step <= 6), 43200)


def time_ticks(start: datetime, end: datetime) -> list[datetime]:
    """Round moments inside the window, up to six of them."""
    step = tick_step(start, end)
    first = math.ceil(start.timestamp() / step) * step
    return [datetime.fromtimestamp(t, UTC) for t in range(int(first), int(end.timestamp()) + 1, step)]


def _segments(points: Sequence[tuple[datetime, float | None]]) -> list[list[tuple[datetime, float]]]:
    out: list[list[tuple[datetime, float]]] = [[]]
    for at, value in points:
        if value is None or not math.isfinite(value):
            if out[-1]:
                out.append([])
        else:
            out[-1].append((at, value))
    return [s for s in out if s]


def time_lines(title: str, lines: Sequence[TimeLine], start: datetime, end: datetime, unit: str, *,
               description: str = "", levels: Sequence[Level] = (), marks: Sequence[TimeMark] = (),
               height: int = 120, top: float | None = None) -> Markup:
    """Lines over [start, end] and a y axis from zero to a round figure (`top` fixes it: 100 for a percent).
    Empty (no markup) when no line has a figure, so a page says "no traffic yet" in words instead."""
    lines = [ln.model_copy(update={"points": ln.points[-MAX_POINTS:]}) for ln in lines]
    if not any(v is not None for ln in lines for _, v in ln.points):
        return Markup("")
    span = max((end - start).total_seconds(), 1.0)
    width, bottom = WIDTH - LEFT - RIGHT, TOP + height
    y_top = top or nice_top(max([v for ln in lines for _, v in ln.points if v is not None]
                                + [lv.value for lv in levels] + [1e-9]))

    def x(at: datetime) -> float:
        return LEFT + min(max((at - start).total_seconds() / span, 0.0), 1.0) * width

    def y(value: float) -> float:
        return bottom - min(max(value / y_top, 0.0), 1.0) * height

    body = [f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
            f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}"/>',
            f'<text class="label" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{figure_within(y_top, LEFT - 8)}'
            '</text>',
            f'<text class="label" x="{LEFT - 6}" y="{bottom}" text-anchor="end">0</text>',
            f'<text class="label unit" x="{LEFT + 4}" y="{TOP - 8}">{escape(unit)}</text>']
    clock = "%H:%M:%S" if tick_step(start, end) < 60 else "%H:%M"
    for tick in time_ticks(start, end):
        tx, words = x(tick), tick.strftime(clock)
        half = text_width(words) / 2  # a tick at the plot's end keeps its time inside the picture
        body.append(f'<line class="axis" x1="{tx:.1f}" y1="{bottom}" x2="{tx:.1f}" y2="{bottom + 4}"/>'
                    f'<text class="label" x="{min(max(tx, half + 2), WIDTH - half - 2):.1f}" y="{bottom + 16}" '
                    f'text-anchor="middle">{words}</text>')
    for k, level in enumerate(levels):
        ly = y(level.value)
        body.append(f'<line class="mark mark-{2 if k % 2 == 0 else 1}" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                    f'y1="{ly:.1f}" y2="{ly:.1f}"><title>{escape(level.label)}: {_fmt(level.value)} '
                    f'{escape(unit)}</title></line>')
    body += _marks(marks, x, bottom, LEFT + 4 + text_width(unit) + 8)
    for ln in lines:
        css = f"series-{ln.colour % 6}"
        dash = ' stroke-dasharray="6 3"' if ln.dashed else ""
        for seg in _segments(ln.points):
            if len(seg) == 1:  # a lone figure between gaps: a dot, or it would not show
                (at, v), = seg
                body.append(f'<circle class="dot {css}" cx="{x(at):.1f}" cy="{y(v):.1f}" r="2.5">'
                            f'<title>{escape(ln.label)}: {_fmt(v)} {escape(unit)}</title></circle>')
                continue
            coords = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in seg)
            body.append(f'<polyline class="line {css}" points="{coords}"{dash}><title>{escape(ln.label)}'
                        f'</title></polyline>')
    legend = [ln.label for ln in lines]
    frame = _svg(title, bottom + 22, body, description=description)
    keys = "".join(f'<span class="key"><span class="swatch series-{ln.colour % 6}"></span>{escape(ln.label)}'
                   f'{" (dashed)" if ln.dashed else ""}</span>' for ln in lines)
    keys += "".join(f'<span class="key"><span class="swatch mark-{2 if k % 2 == 0 else 1}"></span>'
                    f'{escape(lv.label)} (line)</span>' for k, lv in enumerate(levels))
    # The legend goes in the frame's figure, keyed by colour and named in words.
    return Markup(str(frame).replace("</figure>", f'<figcaption class="legend">{keys}</figcaption></figure>', 1)) \
        if legend or levels else frame


def _mark_line(mark: TimeMark, mx: float, bottom: float) -> str:
    title = f'<title>{escape(mark.at.strftime("%H:%M:%S"))} {escape(mark.label)}</title>'
    line = (f'<line class="mark mark-{mark.kind % 3}" x1="{mx:.1f}" x2="{mx:.1f}" y1="{TOP}" y2="{bottom}">'
            f'{title}</line>')
    if not mark.head:
        return line
    # A small triangle on the plot's top edge, inside the plot, pointing the way the count moved.
    tip, base = (TOP, TOP + 7) if mark.head == "up" else (TOP + 7, TOP)
    return line + (f'<path class="mark-head mark-{mark.kind % 3}" data-head="{mark.head}" '
                   f'd="M{mx - 4:.1f},{base} L{mx + 4:.1f},{base} L{mx:.1f},{tip} Z">{title}</path>')


def mark_groups(marks: Sequence[TimeMark], x: Callable[[datetime], float]) -> list[list[TimeMark]]:
    """The marks in time order, neighbours too close to tell apart as lines grouped."""
    gap = MIN_MARK_GAP if len(marks) <= MAX_MARK_LINES else max(MIN_MARK_GAP, (WIDTH - LEFT - RIGHT)
                                                                 / (2 * MAX_MARK_LINES))
    groups: list[list[TimeMark]] = []
    for mark in sorted(marks, key=lambda m: m.at):
        if groups and x(mark.at) - x(groups[-1][-1].at) < gap:
            groups[-1].append(mark)
        else:
            groups.append([mark])
    return groups


def _marks(marks: Sequence[TimeMark], x: Callable[[datetime], float], bottom: float, free_from: float) -> list[str]:
    """A line per decision, or per crowd of decisions one grey band with its count written above the plot
    where there is room (from `free_from` on, each count clear of the last). A rollback (red) and a hold for
    a person (amber) are always lines of their own, over the bands: they are never hidden in a count."""
    out, lines = [], []
    lines += [_mark_line(m, x(m.at), bottom) for m in marks if m.kind % 3 != 1]
    for group in mark_groups([m for m in marks if m.kind % 3 == 1], x):
        if len(group) == 1:
            lines.append(_mark_line(group[0], x(group[0].at), bottom))
            continue
        left, right = x(group[0].at), x(group[-1].at)
        said = "; ".join(f"{m.at:%H:%M:%S} {m.label}" for m in group[:MAX_MARK_LINES])
        more = f"; and {len(group) - MAX_MARK_LINES} more" if len(group) > MAX_MARK_LINES else ""
        out.append(f'<rect class="mark-band" x="{left - 1.5:.1f}" y="{TOP}" width="{right - left + 3:.1f}" '
                   f'height="{bottom - TOP}" data-marks="{len(group)}"><title>{len(group)} decisions from '
                   f'{group[0].at:%H:%M:%S} to {group[-1].at:%H:%M:%S}: {escape(said)}{more}</title></rect>')
        count = f"{len(group)} decisions"
        width = text_width(count)
        cx = min(max((left + right) / 2, free_from + width / 2), WIDTH - RIGHT - width / 2)
        if cx - width / 2 >= free_from:
            out.append(f'<text class="label mark-count" x="{cx:.1f}" y="{TOP - 8}" text-anchor="middle">'
                       f'{count}</text>')
            free_from = cx + width / 2 + 8
    return out + lines


def window(end: datetime, seconds: float) -> tuple[datetime, datetime]:
    return end - timedelta(seconds=seconds), end
