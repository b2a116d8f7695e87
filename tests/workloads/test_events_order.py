"""`workloads show` lists a workload's events newest first, each once (issue 34)."""

from __future__ import annotations

from wingsmith.cli.workloads import show_text


def test_workloads_show_lists_the_newest_events_first():
    events = [f"2026-12-02T07:00:{s:02d}+00:00 step {s}" for s in range(15)]
    shown = [line for line in show_text({"id": "w", "live": {"stage": "serving", "events": events}}).splitlines()
             if "step " in line]
    listed = [line.split("step ")[1] for line in shown]
    assert listed == [str(s) for s in reversed(range(len(events)))][:len(shown)]
    assert len(set(listed)) == len(listed) and listed[0] == str(len(events) - 1)
