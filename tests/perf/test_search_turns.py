"""Searches take turns in the order asked (wingsmith/adapters/perf/turns.py): a plan that releases the turn and asks
again for its next card goes behind a plan already waiting, so plans in flight are answered search by search.
The perf worker's plain lock before it handed itself straight back to the thread that had just released
it: the same two plans ran a1, a2, a3, b1 with it (19 runs of 20 here), so the first test fails on it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from wingsmith.adapters.perf.turns import Turns


def _two_plans(turn: Callable[[], AbstractContextManager], waiting: Callable[[], bool]) -> list[str]:
    """Plan a (three cards) holds the turn while plan b (one card) asks; a then asks for its next two cards.
    The order the four searches ran in."""
    order: list[str] = []
    b_asked = threading.Event()

    def plan_b() -> None:
        b_asked.set()
        with turn():
            order.append("b1")

    b = threading.Thread(target=plan_b)
    with turn():
        order.append("a1")
        b.start()
        b_asked.wait(5)
        deadline = time.monotonic() + 5
        while not waiting() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert waiting(), "plan b never waited for its turn"
    for card in ("a2", "a3"):
        with turn():
            order.append(card)
    b.join(5)
    return order


def test_a_waiting_plan_gets_the_next_turn():
    turns = Turns()
    assert _two_plans(turns.turn, lambda: turns.waiting() == 1) == ["a1", "b1", "a2", "a3"]


def test_a_caller_given_up_while_waiting_leaves_the_line():
    turns = Turns()
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with turns.turn():
            held.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)

    class GiveUp(Exception):
        pass

    def impatient() -> None:
        original = turns._changed.wait

        def wait_then_give_up(timeout=None):
            original(0.01)
            raise GiveUp
        turns._changed.wait = wait_then_give_up  # type: ignore[method-assign]
        try:
            with turns.turn():
                pass
        except GiveUp:
            pass
        finally:
            turns._changed.wait = original  # type: ignore[method-assign]

    impatient()
    assert turns.waiting() == 0
    release.set()
    t.join(5)
    with turns.turn():  # the line is not stuck behind the one that left
        pass


def test_a_plan_someone_waits_for_goes_ahead_of_the_drafts_estimates_and_plans_keep_their_order():
    """While a search runs, a draft's two estimates ask, then two plans: the plans run next, in the order
    asked, then the estimates in theirs; a plan asking again for its next card goes behind the other plan
    but still ahead of the estimates."""
    turns = Turns()
    order: list[str] = []
    asked: list[threading.Thread] = []

    def ask(name: str, someone_waits: bool, then: str | None = None) -> None:
        with turns.turn(someone_waits=someone_waits):
            order.append(name)
        if then is not None:
            with turns.turn(someone_waits=someone_waits):
                order.append(then)

    def asks(name: str, someone_waits: bool, then: str | None = None) -> None:
        waiting = turns.waiting()
        thread = threading.Thread(target=ask, args=(name, someone_waits, then))
        asked.append(thread)
        thread.start()
        deadline = time.monotonic() + 5
        while turns.waiting() == waiting and time.monotonic() < deadline:
            time.sleep(0.001)
        assert turns.waiting() == waiting + 1, f"{name} never waited for its turn"

    with turns.turn():
        order.append("running")
        asks("estimate1", False)
        asks("estimate2", False)
        asks("plan_a1", True, then="plan_a2")
        asks("plan_b1", True)
    for thread in asked:
        thread.join(5)
    assert order == ["running", "plan_a1", "plan_b1", "plan_a2", "estimate1", "estimate2"]
    assert turns.waiting() == 0


def test_no_draft_estimate_starts_between_two_cards_of_a_plan_in_flight():
    """A draft's estimate asks while a two-card plan searches its first card; the plan's second card is asked
    only after its first turn ended (the moment a plain line gave to the estimate): the plan's two cards run
    first, then the estimate."""
    turns = Turns()
    order: list[str] = []
    first_card_done = threading.Event()
    second_card_may_ask = threading.Event()

    def plan() -> None:
        with turns.plan_in_flight():
            with turns.turn(someone_waits=True):
                order.append("plan h200")
            first_card_done.set()
            second_card_may_ask.wait(5)  # the estimate is first in line and nobody holds the turn
            with turns.turn(someone_waits=True):
                order.append("plan gb200")

    def estimate() -> None:
        with turns.turn():
            order.append("estimate b200")

    with turns.turn():  # the running search, until both have asked
        planner = threading.Thread(target=plan)
        planner.start()
        deadline = time.monotonic() + 5
        while turns.waiting() < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        drafter = threading.Thread(target=estimate)
        drafter.start()
        while turns.waiting() < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert turns.waiting() == 2
    first_card_done.wait(5)
    time.sleep(0.05)  # the estimate's chance to take the free turn
    second_card_may_ask.set()
    planner.join(5)
    drafter.join(5)
    assert order == ["plan h200", "plan gb200", "estimate b200"]
    with turns.turn():  # nothing in flight: a background search starts at once
        pass
