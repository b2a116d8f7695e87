"""`wingsmith workloads upgrade --wait` prints the upgrade's progress only: the workload's events from
before the upgrade are not replayed, including when the API's window of last events slides."""

from __future__ import annotations

from datetime import UTC

import wingsmith.cli.api_client as api_client
import wingsmith.cli.workloads as workloads
from contracts.upgrade import UpgradeClusterProgress
from wingsmith.cli.main import build_parser
from workflows.workload.conditions import _collecting

BEFORE = [f"old event {i}" for i in range(5)]
UPGRADE = {"upgrade_id": "u1", "state": "running", "from_artifact_id": "org/m@a", "to_artifact_id": "org/m@b",
           "clusters": [], "failures": []}


def test_wait_prints_only_what_happens_after_the_upgrade_starts(monkeypatch, capsys):
    # The API keeps the last five events: the window slides as the upgrade's own arrive.
    windows = [BEFORE, [*BEFORE[1:], "upgrade u1 started"], [*BEFORE[3:], "upgrade u1 started", "10% new", "done"]]
    answers = iter(windows)
    finished = {**UPGRADE, "state": "succeeded", "finished_at": "2026-12-02T06:40:00Z"}

    def request(args, method, path, body=None, **_kw):
        if method == "POST":
            return 0, {"upgrade": UPGRADE, "workflow_url": "http://ui"}
        events = next(answers, windows[-1])
        return 0, {"live": {"events": events}, "upgrade": finished if events is windows[-1] else UPGRADE}

    monkeypatch.setattr(workloads, "request", request)
    monkeypatch.setattr(workloads.time, "sleep", lambda _s: None)
    args = build_parser().parse_args(["workloads", "upgrade", "w1", "org/m@b", "--wait"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert not any(old in out for old in BEFORE), out
    printed = [line.strip() for line in out.splitlines() if line.startswith("  ") and "event" not in line]
    assert [p for p in printed if p in ("upgrade u1 started", "10% new", "done")] == \
        ["upgrade u1 started", "10% new", "done"]


def test_a_step_collecting_traffic_says_when_it_decides_in_the_consoles_words(monkeypatch, capsys):
    # The API's JSON (a pydantic datetime), in another zone than UTC to show it is converted.
    collecting: dict = {**UPGRADE, "clusters": [
        {"cluster": "sim-east", "phase": "step 1 of 2", "new_weight_percent": 10,
         "decides_by": "2026-12-02T08:41:07+02:00",
         "verdict": {"healthy": True, "enough_traffic": False, "figures": {"new_requests": 7, "old_requests": 60}}},
        {"cluster": "sim-west", "phase": "waiting", "new_weight_percent": 0, "decides_by": None}]}
    text = workloads.upgrade_text(collecting)
    [east] = [line for line in text.splitlines() if "sim-east" in line]
    assert "new 7 req" in east and east.endswith("; deciding by 06:41:07 UTC at the latest"), text
    assert "deciding by" not in next(line for line in text.splitlines() if "sim-west" in line)
    # The same words as the workload's UpgradeInProgress condition (what the console's conditions table
    # shows; the workflow's clock is UTC).
    east_row: dict = collecting["clusters"][0]
    progress = UpgradeClusterProgress.model_validate(east_row)
    assert progress.decides_by is not None
    assert _collecting(progress.model_copy(update={"decides_by": progress.decides_by.astimezone(UTC)})).endswith(
        "deciding by 06:41:07 UTC at the latest")
    # A naive time is UTC already.
    naive = workloads.upgrade_text({**UPGRADE, "clusters": [{**east_row, "decides_by": "2026-12-02T06:41:07"}]})
    assert naive.count("deciding by 06:41:07 UTC at the latest") == 1, naive

    # `pause-upgrade` (and the others) print it through the same text.
    monkeypatch.setattr(api_client, "request", lambda *a, **kw: (0, collecting))
    args = build_parser().parse_args(["workloads", "pause-upgrade", "w1"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "deciding by 06:41:07 UTC at the latest" in out, out


def test_wait_says_once_per_step_when_it_decides(monkeypatch, capsys):
    step = {"cluster": "sim-east", "phase": "step 1 of 2", "new_weight_percent": 10,
            "decides_by": "2026-12-02T06:41:07Z"}
    later = {**step, "phase": "step 2 of 2", "new_weight_percent": 100, "decides_by": "2026-12-02T06:45:00Z"}
    ups = [{**UPGRADE, "clusters": [step]}, {**UPGRADE, "clusters": [step]}, {**UPGRADE, "clusters": [later]},
           {**UPGRADE, "state": "succeeded", "finished_at": "2026-12-02T06:46:00Z", "clusters": [later]}]
    answers = iter(ups)

    def request(args, method, path, body=None, **_kw):
        if method == "POST":
            return 0, {"upgrade": UPGRADE, "workflow_url": "http://ui"}
        return 0, {"live": {"events": []}, "upgrade": next(answers, ups[-1])}

    monkeypatch.setattr(workloads, "request", request)
    monkeypatch.setattr(workloads.time, "sleep", lambda _s: None)
    args = build_parser().parse_args(["workloads", "upgrade", "w1", "org/m@b", "--wait"])
    assert args.func(args) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  sim-east")]
    assert lines == ["sim-east: 10% new; deciding by 06:41:07 UTC at the latest",
                     "sim-east: 100% new; deciding by 06:45:00 UTC at the latest"], lines


def test_a_finished_upgrade_promises_no_decision(monkeypatch, capsys):
    """The workflow keeps the step's `decides_by` when the judge rolls it back mid-step; the CLI said
    "deciding by … at the latest" after the rollback (issue 52). Only a running or paused upgrade decides."""
    judged = {"cluster": "sim-east", "phase": "rolled back", "new_weight_percent": 0,
              "decides_by": "2026-12-02T06:41:07Z",
              "verdict": {"healthy": False, "enough_traffic": True,
                          "figures": {"new_requests": 22, "old_requests": 60}}}
    for state in ("rolled_back", "aborted", "failed", "succeeded"):
        text = workloads.upgrade_text({**UPGRADE, "state": state, "finished_at": "2026-12-02T06:40:00Z",
                                       "clusters": [judged], "failures": ["sim-east at 50 %: error rate 9.1%"]})
        assert "deciding by" not in text and "new 22 req" in text, text
    for state in ("running", "paused"):
        assert "deciding by 06:41:07 UTC" in workloads.upgrade_text({**UPGRADE, "state": state, "clusters": [judged]})

    # `--wait` ends on the rolled-back status: printed without a deadline.
    rolled_back = {**UPGRADE, "state": "rolled_back", "finished_at": "2026-12-02T06:40:00Z", "clusters": [judged]}

    def request(args, method, path, body=None, **_kw):
        if method == "POST":
            return 0, {"upgrade": UPGRADE, "workflow_url": "http://ui"}
        return 0, {"live": {"events": []}, "upgrade": rolled_back}

    monkeypatch.setattr(workloads, "request", request)
    monkeypatch.setattr(workloads.time, "sleep", lambda _s: None)
    args = build_parser().parse_args(["workloads", "upgrade", "w1", "org/m@b", "--wait"])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "rolled_back" in out and "deciding by" not in out, out
