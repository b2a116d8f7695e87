"""`wingsmith workloads upgrade --wait` prints the upgrade's progress only: the workload's events from
before the upgrade are not replayed, including when the API's window of last events slides."""

from __future__ import annotations

import wingsmith.cli.workloads as workloads
from wingsmith.cli.main import build_parser

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
