"""The workload page's events (issue 37): newest first, grouped by operation, one line per step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.events import ROLLOUT, WATCH, event_groups, operation_of
from console.workloads import event_rows

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _event(kind: str, step: str, seconds: int, **detail) -> dict:
    return {"kind": kind, "step": step, "actor": "olga", "detail": detail, "at": T0 + timedelta(seconds=seconds)}


def test_operations_are_read_from_the_step_and_kind():
    assert operation_of("workload_upgrade_step", "upgrade:2:sim-east:50:60", {}) == "Upgrade 2"
    assert operation_of("workload_healed", "heal:1", {}) == WATCH
    assert operation_of("deployment_degraded", "run:watch:sim-east:degraded:812", {}) == WATCH
    assert operation_of("deployment_serving", "run:serving", {}) == ROLLOUT
    assert operation_of("workload_deleting", "run:deleting", {}) == "Delete"


def test_groups_newest_first_each_newest_first_without_repeats():
    events = [_event("workload_planning", "r:planning", 0), _event("deployment_serving", "r:serving", 5,
                                                                   cluster="sim-east", replicas=1),
              _event("workload_upgrade_started", "upgrade:1:start", 60),
              _event("workload_upgrade_step", "upgrade:1:sim-east:50", 70),
              _event("workload_healed", "heal:1", 80, cluster="sim-west"),
              _event("workload_upgrade_step", "upgrade:1:sim-east:100", 90)]
    rows = event_rows(events + [events[-1]], [])  # the last step reported twice: shown once
    groups = event_groups(rows)
    assert [g.operation for g in groups] == ["Upgrade 1", WATCH, ROLLOUT]
    assert len(groups[0].lines) == 3
    for g in groups:
        stamps = [line.at for line in g.lines]
        assert stamps == sorted(stamps, reverse=True)
    assert sum(len(g.lines) for g in groups) == len(events)
