"""The chart functions: labels are escaped, bars are to scale, and an empty chart is no chart."""

from __future__ import annotations

import re

from console.charts import BarRow, Point, Segment, Series, bars, scatter, stacked_bars, time_series

HOSTILE = '<script>alert(1)</script>"&'


def _widths(svg: str) -> list[float]:
    return [float(w) for w in re.findall(r'<rect [^>]*width="([0-9.]+)"', svg)]


def test_every_label_is_escaped():
    drawn = [stacked_bars(HOSTILE, [BarRow(label=HOSTILE, segments=[Segment(label=HOSTILE, value=3)],
                                           marks=[Segment(label=HOSTILE, value=4)])], HOSTILE),
             time_series(HOSTILE, [Series(label=HOSTILE, points=[(0, 1), (1, 2)])], HOSTILE, HOSTILE),
             scatter(HOSTILE, [Point(label=HOSTILE, x=1, y=2)], HOSTILE, HOSTILE)]
    for svg in drawn:
        assert "<script>" not in svg and "&lt;script&gt;" in svg, svg
        assert 'role="img"' in svg and "<title" in svg


def test_bars_share_one_scale():
    values = [("a", 10.0), ("b", 30.0), ("c", 5.0)]
    widths = _widths(bars("GPUs", values, "GPUs"))
    assert len(widths) == len(values)
    for (_, v), w in zip(values, widths, strict=True):
        assert abs(w / widths[1] - v / values[1][1]) < 0.01


def test_stacked_segments_add_up_and_marks_reach_past_them():
    row = BarRow(label="h200", segments=[Segment(label="weights", value=60), Segment(label="kv", value=40)],
                 marks=[Segment(label="card", value=200)])
    svg = stacked_bars("memory", [row], "GB")
    weights, kv = _widths(svg)
    assert abs(weights / kv - 60 / 40) < 0.01
    mark_x = float(re.search(r'<line class="mark mark-0" x1="([0-9.]+)"', svg).group(1))
    bar_start = float(re.search(r'<rect [^>]*x="([0-9.]+)"', svg).group(1))
    assert abs((mark_x - bar_start) / (weights + kv) - 200 / 100) < 0.01


def test_nothing_to_draw_is_no_chart():
    assert stacked_bars("x", [], "GB") == ""
    assert time_series("x", [Series(label="a", points=[])], "t", "y") == ""
    assert scatter("x", [], "a", "b") == ""
