"""Searches take turns in the order they asked (one at a time per process: the tool is CPU-bound under the
GIL and keeps process-wide caches).

A plain lock is not enough: a thread that releases it and asks again at once (the next card of the same
plan, the next layout of the same draft) nearly always gets it back before a thread that was already
waiting, so one plan of sixteen cards would hold every other plan, another team's included, for all
sixteen searches. Here whoever asks goes to the back of the line: plans in flight are answered search by
search, in turn.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class Turns:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._line: deque[object] = deque()
        self._held = False

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this caller's turn (behind every caller already waiting), hold it for the block."""
        me = object()
        with self._changed:
            self._line.append(me)
            try:
                while self._held or self._line[0] is not me:
                    self._changed.wait()
            except BaseException:
                self._line.remove(me)
                self._changed.notify_all()
                raise
            self._line.popleft()
            self._held = True
        try:
            yield
        finally:
            with self._changed:
                self._held = False
                self._changed.notify_all()

    def waiting(self) -> int:
        """How many callers wait for their turn (not counting the one that holds it)."""
        with self._changed:
            return len(self._line)
