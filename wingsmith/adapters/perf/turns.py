"""Searches take turns (one at a time per process: the tool is CPU-bound under the GIL and keeps
process-wide caches): a search someone waits for first, then the background ones, each kind in the order asked.

A plain lock is not enough: a thread that releases it and asks again at once (the next card of the same
plan, the next layout of the same draft) nearly always gets it back before a thread that was already
waiting, so one plan of sixteen cards would hold every other plan, another team's included, for all
sixteen searches. Here whoever asks goes to the back of its kind's line: plans in flight are answered
search by search, in turn.

Two kinds, because nobody waits for a draft's estimates (the draft is shown at once and its figures fill in
as they come), while a traffic plan is a person's dry run or create waiting on its status URL: a plan asked
while a draft's dozen estimates queue goes ahead of them, not behind. The search running is never stopped.

A plan searches card after card, and between two of its cards it holds no turn and has not asked again yet:
without more, the draft's estimate first in line took that moment, and each card of a plan after the first
waited for one of the draft's estimates (the README journey's two dry runs, 12 to 23 s each). So a
plan is in flight (`plan_in_flight`) from its first card to its last, and no background search starts while
one is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Turns:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        # Whoever waits: those someone waits for first, then the background ones, each in the order asked.
        self._line: list[object] = []
        self._waited_on = 0  # how many at the front of the line someone waits for
        self._held = False
        self._plans_in_flight = 0

    @contextmanager
    def plan_in_flight(self) -> Iterator[None]:
        """Around all of a plan's searches: no background search starts until it is done, also in the moments
        between two of its searches."""
        with self._changed:
            self._plans_in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._plans_in_flight -= 1
                self._changed.notify_all()

    @contextmanager
    def turn(self, *, someone_waits: bool = False) -> Iterator[None]:
        """Wait for this caller's turn (behind every caller of its kind already waiting, and ahead of every
        background one when `someone_waits`), hold it for the block."""
        me = object()
        with self._changed:
            if someone_waits:
                self._line.insert(self._waited_on, me)
                self._waited_on += 1
            else:
                self._line.append(me)
            try:
                while self._held or self._line[0] is not me or (self._plans_in_flight and not someone_waits):
                    self._changed.wait()
            except BaseException:
                self._leave(me)
                self._changed.notify_all()
                raise
            self._leave(me)
            self._held = True
        try:
            yield
        finally:
            with self._changed:
                self._held = False
                self._changed.notify_all()

    def _leave(self, me: object) -> None:
        at = self._line.index(me)
        del self._line[at]
        if at < self._waited_on:
            self._waited_on -= 1

    def waiting(self) -> int:
        """How many callers wait for their turn (not counting the one that holds it)."""
        with self._changed:
            return len(self._line)
