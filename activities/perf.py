"""Temporal activities of the perf worker: AIConfigurator's estimates and traffic plans.

Sync (a search holds the CPU for tens of seconds): run on the perf worker's thread pool, on the perf task
queue only. A search is deterministic, so an error in it is not retried: it comes back as an entry that
says why, in words. Only a worker without the `perf` extra fails the activity, non-retryably.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from contracts import perf as contract
from contracts.perf import EstimateInput, EstimateOutput, TargetInput, TargetOutput

T = TypeVar("T")
# A search runs for tens of seconds without a moment to report: a ticker beside it tells Temporal the
# worker is alive, so a caller's heartbeat timeout finds a dead perf worker in seconds, not hours.
_HEARTBEAT_EVERY = 5.0


@contextmanager
def _heartbeating(details: Callable[[], tuple] = tuple) -> Iterator[Callable[[], None]]:
    """Beats every few seconds with `details()`; yields a beat to send at once (when the details change)."""
    stop = threading.Event()
    context = contextvars.copy_context()

    def beat() -> None:
        context.run(activity.heartbeat, *details())

    def tick() -> None:
        while not stop.wait(_HEARTBEAT_EVERY):
            beat()
    ticker = threading.Thread(target=tick, name="perf-heartbeat", daemon=True)
    ticker.start()
    try:
        yield beat
    finally:
        stop.set()
        ticker.join()


def _each(items: list, work: Callable[..., T]) -> list[T]:
    with _heartbeating():
        return [work(item) for item in items]


def _each_card(cards: list[str], work: Callable[[str], T]) -> list[T]:
    """`work` per card, the beats saying which cards are planned and which one is being planned, so a plan's
    follower can tell how far it is (contracts.perf.PlanningBeat)."""
    progress = contract.PlanningBeat()
    answers: list[T] = []
    with _heartbeating(lambda: (progress,)) as beat:
        for card in cards:
            progress = contract.PlanningBeat(planned=progress.planned, searching=card)
            beat()
            answers.append(work(card))
            progress = contract.PlanningBeat(planned=[*progress.planned, card])
    return answers


class PerfActivities:
    def __init__(self, home: Path) -> None:
        from wingsmith.adapters.perf.aiconfigurator import Estimator
        self.estimator = Estimator(home)

    # No exception thrown into the thread on cancellation: a search is left to finish (the tool's process-wide
    # caches stay whole), and one whose caller went away (a terminated draft workflow: its heartbeat finds
    # no workflow) is skipped when its turn comes instead.
    @activity.defn(name=contract.ACTIVITY_ESTIMATE, no_thread_cancel_exception=True)
    def estimate_performance(self, params: EstimateInput) -> EstimateOutput:
        from wingsmith.adapters.perf.aiconfigurator import PerfNotInstalled, SearchNoLongerWanted
        try:
            return EstimateOutput(estimates=_each(params.requests, lambda request: self.estimator.estimate(
                request, wanted=lambda: not activity.is_cancelled())))
        except PerfNotInstalled as err:
            raise ApplicationError(str(err), type=contract.ERROR_NOT_INSTALLED, non_retryable=True) from None
        except SearchNoLongerWanted as err:
            raise CancelledError(f"not searched, nobody waits for it any more: {err}") from None

    @activity.defn(name=contract.ACTIVITY_PLAN_TARGET)
    def plan_for_traffic_target(self, params: TargetInput) -> TargetOutput:
        from wingsmith.adapters.perf.aiconfigurator import PerfNotInstalled
        try:
            with self.estimator.plan_in_flight():
                return TargetOutput(plans=_each_card(params.cards, lambda card: self.estimator.plan_for_target(
                    model=params.model, card=card, target=params.target, model_commit=params.model_commit,
                    config=params.config, backend=params.backend)))
        except PerfNotInstalled as err:
            raise ApplicationError(str(err), type=contract.ERROR_NOT_INSTALLED, non_retryable=True) from None

    def all(self) -> list:
        return [self.estimate_performance, self.plan_for_traffic_target]
