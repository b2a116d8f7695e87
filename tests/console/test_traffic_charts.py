"""The traffic and upgrade pictures' geometry (console/time_charts.py, traffic_charts.py,
upgrade_timeline.py): the window is the one asked for, missing figures break a line, labels are escaped,
the upgrade's weights step and its rollback is marked. Pure: no server."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from console.charts import WIDTH
from console.time_charts import LEFT, RIGHT, TOP, Level, TimeLine, TimeMark, nice_top, time_lines, time_ticks
from console.traffic_charts import backend_view, backend_words
from console.upgrade_timeline import upgrade_timelines
from contracts import conditions as reason
from tests.gateway.test_traffic_history import counters, spans_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script>'


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def polylines(svg: str) -> list[list[tuple[float, float]]]:
    return [[tuple(map(float, xy.split(","))) for xy in m.split()]  # type: ignore[misc]
            for m in re.findall(r'<polyline[^>]* points="([^"]+)"', svg)]


def test_the_window_is_the_one_asked_for_and_gaps_break_the_line():
    line = TimeLine(label="p99", points=[(at(0), 10.0), (at(600), 20.0), (at(1200), None), (at(1800), 5.0),
                                         (at(2400), 40.0), (at(3000), None), (at(3300), 7.0)])
    svg = str(time_lines("Latency", [line], at(0), at(3600), "ms"))
    first, second = polylines(svg)
    assert first[0][0] == LEFT and first[1][0] == pytest.approx(LEFT + (WIDTH - LEFT - RIGHT) / 6, abs=0.1)
    assert len(second) == 2  # 1800 and 2400: the None at 1200 and at 3000 broke the line
    assert svg.count("<circle") == 1  # the lone figure at 3300 is a dot
    # y from zero to a round top: 40 ms is the highest, so the axis ends at 50 and 40 sits at 4/5 of it.
    assert ">50</text>" in svg
    bottom = TOP + 120  # the default height
    assert [y for _, y in second] == [bottom - 120 * 5 / 50, bottom - 120 * 40 / 50]


def test_an_empty_chart_is_no_chart_and_labels_are_escaped():
    assert time_lines("t", [TimeLine(label="a", points=[(at(0), None)])], at(0), at(60), "ms") == ""
    svg = str(time_lines(HOSTILE, [TimeLine(label=HOSTILE, points=[(at(0), 1.0), (at(10), 2.0)])], at(0), at(60),
                         HOSTILE, levels=[Level(label=HOSTILE, value=1)], marks=[TimeMark(label=HOSTILE, at=at(5))],
                         description=HOSTILE))
    assert HOSTILE not in svg and "&lt;script&gt;" in svg
    assert 'role="img"' in svg and "aria-labelledby" in svg and "aria-describedby" in svg


def test_round_axis_tops_and_time_ticks():
    assert [nice_top(v) for v in (0, 1e-9, 0.7, 3, 7, 12, 240, 1000)] == [1.0, 1.0, 1.0, 5, 10, 20, 250, 1000]
    ticks = time_ticks(at(30), at(3630))
    assert 4 <= len(ticks) <= 6 and all(t.minute % 10 == 0 and t.second == 0 for t in ticks)
    short = time_ticks(at(-5), at(95))  # an upgrade of a minute and a half: ticks every 30 s
    assert [t.second for t in short] == [0, 30, 0, 30]


def test_a_backend_view_draws_and_tables_the_same_figures():
    spans = spans_of([(10 * k, counters(5 * k, failures=k // 3)) for k in range(0, 61)])
    view = backend_view("east/wl", spans, at(0), at(600), predicted_ttft_ms=80.0)
    assert view.total.requests == 300 and view.total.errors == 20
    assert "300 requests" in str(view.rate_chart) and "20 errors" in str(view.rate_chart)
    assert len(polylines(str(view.rate_chart))) == 2  # requests and errors per second
    assert "predicted time to first token" in str(view.latency_chart)
    assert sum(r.point.requests for r in view.rows) == 300 and len(view.rows) == 2  # five-minute rows
    assert view.rows[0].end > view.rows[-1].end  # newest first
    assert backend_words("east/wl/r2") == "wl on east, revision 2"
    assert "no backend" in backend_words("none")


def _upgrade_events(end_kind: str) -> list[dict]:
    figures = {"new_requests": 40, "old_requests": 60, "new_error_rate": 0.25, "old_error_rate": 0.0,
               "new_p99_seconds": 0.2, "old_p99_seconds": 0.1}
    step = "upgrade:1"
    return [
        {"kind": "workload_upgrade_started", "step": f"{step}:started", "at": at(0),
         "detail": {"from": "org/m@a", "to": "org/m@b", "clusters": ["east"], "steps": [10, 50, 100]}},
        {"kind": "workload_upgrade_step", "step": f"{step}:east:10:0", "at": at(60),
         "detail": {"cluster": "east", "percent": 10, "healthy": True, "enough_traffic": True,
                    "figures": {**figures, "new_error_rate": 0.0}, "failures": []}},
        {"kind": "workload_upgrade_step", "step": f"{step}:east:50:0", "at": at(120),
         "detail": {"cluster": "east", "percent": 50, "healthy": False, "enough_traffic": True, "figures": figures,
                    "failures": ["error rate 25.0% vs 0.0%"]}},
        {"kind": end_kind, "step": f"{step}:rolled_back", "at": at(140),
         "detail": {"failures": ["east at 50 %: error rate 25.0% vs 0.0%"]}},
        {"kind": "workload_scaled", "step": "other", "at": at(10), "detail": {}},
    ]


def test_an_upgrade_timeline_steps_the_weights_and_marks_the_rollback():
    timeline = [{"reason": reason.UPGRADE_STEP, "time": at(30).isoformat(),
                 "detail": {"upgrade": 1, "cluster": "east", "percent": 10}},
                {"reason": reason.UPGRADE_STEP, "time": at(90).isoformat(),
                 "detail": {"upgrade": 1, "cluster": "east", "percent": 50}}]
    [u] = upgrade_timelines(_upgrade_events("workload_upgrade_rolled_back"), timeline, None, at(600))
    assert u.state == "rolled_back" and u.rolled_back
    # The weight moved when the workflow moved it (30 s, 90 s), and went back to 0 % at the rollback.
    assert u.weights["east"] == [(at(0), 0), (at(30), 10), (at(90), 50), (at(140), 0)]
    assert [d.verdict for d in u.decisions] == ["healthy", "rolled back"]
    assert u.decisions[1].reasons == ["error rate 25.0% vs 0.0%"]
    weights = str(u.weight_chart)
    assert 'class="mark mark-0"' in weights  # the rollback, in red
    new, old = polylines(weights)
    assert len(new) == len(old) and new[0][1] != old[0][1]  # the old version holds what the new one does not
    assert "error rate the judge compared" in str(u.error_chart)
    bottom = TOP + 100  # the judge's charts are 100 high
    assert [y for _, y in polylines(str(u.error_chart))[0]] == [bottom - 100 * 0 / 25, bottom - 100 * 25 / 25]


def test_without_the_workflow_the_weights_come_from_the_judgments():
    [u] = upgrade_timelines(_upgrade_events("workload_upgrade_succeeded")[:2], None, None, at(600))
    assert u.state == "running" and u.end == at(600)
    assert u.weights["east"] == [(at(0), 0), (at(60), 10)]
    [done] = upgrade_timelines(_upgrade_events("workload_upgrade_succeeded"), None, None, at(600))
    assert done.state == "succeeded" and done.weights["east"][-1] == (at(140), 100)
