"""The perf worker stops within seconds: the searches it is running are cancelled when it is asked to stop.

A search holds its thread (and the GIL) for tens of seconds and never looks up: the estimate activity
turns the SDK's thread cancellation off, so that a caller who goes away cannot break the tool's
process-wide caches in a worker that carries on. A worker that stops has nothing left to protect,
though, and waiting for its search kept Ctrl-C on `wingsmith up` at 20 s (the supervisor kills a
part after 15 s) and holds a Kubernetes rollout for up to a minute. So at shutdown each running perf
activity gets an exception raised in its thread, as the SDK's own thread cancellation does, and fails
at once with a retryable error: Temporal hands it to the next perf worker (this one's successor under
`up`) instead of waiting out the heartbeat timeout. Asks still waiting for their turn end the same way.
"""

from __future__ import annotations

import ctypes
import dataclasses
import inspect
import threading
from collections.abc import Callable
from typing import Any

from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

# The ApplicationError type of a search cut short because its worker stopped (retried elsewhere).
ERROR_WORKER_STOPPED = "PerfWorkerStopped"


class _WorkerStopping(BaseException):
    """Raised in a search's thread when the worker stops. Not an Exception: the tool's refusals are caught
    as Exception and answered in words (wingsmith/adapters/perf/aiconfigurator.py), and a stop is no answer."""


def _stopped() -> ApplicationError:
    return ApplicationError("the perf worker stopped during this search; another perf worker takes it",
                            type=ERROR_WORKER_STOPPED)


def _raise_in(thread: int, exc_type: type[BaseException] | None) -> None:
    """`exc_type` is raised in `thread` at its next Python instruction; None withdraws one not yet raised."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc_type) if exc_type
                                               else ctypes.c_void_p(0))


class RunningSearches(Interceptor):
    """Knows the threads of the perf activities running now; `stop` cancels them and every later one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[int] = set()
        self._stopping = False

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self)

    def stop(self) -> int:
        """Cancel the running searches; returns how many there were."""
        with self._lock:
            self._stopping = True
            for thread in self._threads:
                _raise_in(thread, _WorkerStopping)
            return len(self._threads)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the activity's thread, cancelled by `stop`."""
        thread = threading.get_ident()
        with self._lock:
            if self._stopping:
                raise _stopped()
            self._threads.add(thread)
        try:
            return fn(*args)
        except _WorkerStopping:
            raise _stopped() from None
        finally:
            with self._lock:
                self._threads.discard(thread)
                _raise_in(thread, None)  # a stop that came as the search ended must not hit the thread's next task


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, searches: RunningSearches) -> None:
        super().__init__(next)
        self._searches = searches

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if inspect.iscoroutinefunction(input.fn):  # runs on the event loop: the SDK's cancellation reaches it
            return await super().execute_activity(input)
        fn = input.fn
        return await super().execute_activity(dataclasses.replace(
            input, fn=lambda *args: self._searches.run(fn, *args)))
