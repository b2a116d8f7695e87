"""The perf worker: AIConfigurator's searches on their own task queue (`<task queue>-perf`), in their own
process, so the tool's imports (pandas, pyarrow, matplotlib: seconds and hundreds of MB) and its
CPU-bound searches never touch the workers that orchestrate. `wingsmith up` starts it only when the `perf`
extra is installed; started without it, it says so and exits 2.

    python -m worker.perf
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from wingsmith.adapters.logs import configure_logging, get_logger
from wingsmith.adapters.startup import load_settings, run_or_exit
from wingsmith.adapters.temporal import connect
from wingsmith.domain.config import Settings, perf_task_queue
from worker.perf_shutdown import RunningSearches

log = get_logger("wingsmith.worker.perf")
# Cached answers come back in milliseconds while one search runs (searches take turns: the tool is CPU-bound).
_THREADS = 4
# A shutdown cancels the running searches (worker/perf_shutdown.py): the time they get to end, and the time
# the whole shutdown gets before the process ends anyway (a search deep in one C call cannot see its cancellation).
_GRACEFUL_SHUTDOWN = timedelta(seconds=2)
_STOP_WITHIN = timedelta(seconds=4)
# A traffic plan's beats say which card it is planning (its status URL shows them): sent within seconds, not
# the SDK's default of up to a minute (one small call per running search every few seconds).
_BEATS_REACH_TEMPORAL_WITHIN = timedelta(seconds=5)


def build_perf_worker(client: Client, task_queue: str, home: Path, searches: RunningSearches | None = None) -> Worker:
    from activities.perf import PerfActivities
    return Worker(client, task_queue=perf_task_queue(task_queue), activities=PerfActivities(home).all(),
                  interceptors=[searches] if searches is not None else [],
                  activity_executor=ThreadPoolExecutor(_THREADS, thread_name_prefix="wingsmith-perf"),
                  max_concurrent_activities=_THREADS, graceful_shutdown_timeout=_GRACEFUL_SHUTDOWN,
                  max_heartbeat_throttle_interval=_BEATS_REACH_TEMPORAL_WITHIN,
                  default_heartbeat_throttle_interval=_BEATS_REACH_TEMPORAL_WITHIN)


def preload() -> None:
    """Import the tool before polling, so the first search does not pay for it."""
    import aiconfigurator.cli.api  # noqa: F401


async def run(settings: Settings) -> None:
    client = await connect(settings)
    preload()
    searches = RunningSearches()
    worker = build_perf_worker(client, settings.task_queue, settings.home, searches)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("perf worker started", task_queue=worker.task_queue)
    running = asyncio.create_task(worker.run())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([running, stopped], return_when=asyncio.FIRST_COMPLETED)
    if running.done() and running.exception():
        log.error("perf worker crashed", error=repr(running.exception()))
    cancelled = searches.stop()
    log.info("perf worker stopping", searches_cancelled=cancelled)
    try:
        await asyncio.wait_for(worker.shutdown(), _STOP_WITHIN.total_seconds())
    except TimeoutError:
        log.warning("perf worker stopped before its searches ended", within_seconds=_STOP_WITHIN.total_seconds())
        sys.stdout.flush()
        os._exit(0)  # the interpreter would wait for the search's thread at exit


def main() -> None:
    from wingsmith.adapters.perf.aiconfigurator import PerfNotInstalled, installed
    settings = run_or_exit("wingsmith perf-worker", load_settings)
    configure_logging(settings.log_level, settings.log_format)
    if not installed():
        print(str(PerfNotInstalled()), file=sys.stderr, flush=True)
        sys.exit(2)
    run_or_exit("wingsmith perf-worker", lambda: asyncio.run(run(settings)))


if __name__ == "__main__":
    main()
