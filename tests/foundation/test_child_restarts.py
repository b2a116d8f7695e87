"""The restart rule of `up`'s children, with real processes: back-off that doubles while a child fails
at start, its last words in every note, giving up after GIVE_UP_AFTER failures at start in a row or
at once on "misconfigured" (78), and no giving up for a child that ran a while before it died."""

from __future__ import annotations

import sys

import pytest

from wingsmith.adapters.startup import EXIT_MISCONFIGURED
from wingsmith.local.child import FIRST_DELAY, GIVE_UP_AFTER, START_GRACE, Child, ChildKeepsFailing


def _child(tmp_path, code: int) -> Child:
    script = f"import sys; print('cannot open the thing', file=sys.stderr); sys.exit({code})"
    return Child(name="part", cmd=[sys.executable, "-c", script], env={}, log_path=tmp_path / "part.log")


def _until_dead(child: Child) -> None:
    assert child.process is not None
    child.process.wait(30)


def test_a_child_failing_at_start_is_restarted_with_a_growing_back_off_then_given_up(tmp_path):
    child = _child(tmp_path, 3)
    child.start()
    delays = []
    for _ in range(1, GIVE_UP_AFTER):
        _until_dead(child)
        now = child.started_at + 1  # died a second after its start: a failure at start
        note = child.check(now)
        assert note is not None and "part exited with 3 after 1.0 s" in note and "cannot open the thing" in note
        assert child.restart_at is not None
        delays.append(child.restart_at - now)
        assert child.check(child.restart_at - 0.01) is None  # still waiting out its back-off
        assert "started again" in (child.check(child.restart_at) or "")
    assert delays == [FIRST_DELAY * 2 ** i for i in range(GIVE_UP_AFTER - 1)]
    _until_dead(child)
    with pytest.raises(ChildKeepsFailing, match=rf"part exited with 3 {GIVE_UP_AFTER} times in a row.*giving up"):
        child.check(child.started_at + 1)


def test_a_misconfigured_child_is_given_up_at_once_and_a_long_runner_never(tmp_path):
    misconfigured = _child(tmp_path, EXIT_MISCONFIGURED)
    misconfigured.start()
    _until_dead(misconfigured)
    with pytest.raises(ChildKeepsFailing, match="starting it again cannot help"):
        misconfigured.check()

    runner = _child(tmp_path, 1)
    runner.start()
    for _ in range(GIVE_UP_AFTER + 1):
        _until_dead(runner)
        now = runner.started_at + START_GRACE + 1  # it served a while before dying
        assert "after" in (runner.check(now) or "")
        assert runner.restart_at == pytest.approx(now + FIRST_DELAY)  # back at once, every time
        runner.check(runner.restart_at)
    assert runner.failed_starts == 0
    runner.stop()
