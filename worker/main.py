"""The worker process: connects to Temporal and Postgres, polls the plane's task queues, and shuts
down gracefully on SIGTERM/SIGINT (in-flight activities get `graceful_shutdown_timeout` to finish;
long ones heartbeat, so they see the cancellation and Temporal retries them elsewhere)."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker

from wingsmith.adapters.kube import preload as preload_kube_client
from wingsmith.adapters.logs import configure_logging, get_logger
from wingsmith.adapters.startup import load_settings, postgres_failure, run_or_exit
from wingsmith.adapters.temporal import connect
from wingsmith.adapters.tracing import configure_tracing
from wingsmith.domain.config import KUBE_TASK_QUEUE, TASK_QUEUE, Settings, observe_task_queue
from worker.metrics import DomainMetrics, metrics_runtime, serve_metrics
from worker.registry import WorkerDeps, kube_activities, main_activities, watch_activities, workflows
from worker.sandbox import WORKFLOW_RUNNER
from worker.versioning import deployment_config, deployment_version, take_over

log = get_logger("wingsmith.worker")
_GRACEFUL_SHUTDOWN = timedelta(seconds=10)
# A workflow's next task goes to the queue of the worker that ran its last one (its "sticky" queue,
# where the workflow is cached). When that worker is gone (crashed, OOM-killed, its pod evicted) the
# task waits there this long before any other worker may take it: the SDK's default, 10 s, stalled
# every running workflow 10 s per worker crash (measured in the chaos run: watch looks due every 2 s
# came every 12 s). A live worker takes its sticky tasks within milliseconds; one slower than 3 s only
# costs a replay on whichever worker takes the task instead.
_STICKY_TIMEOUT = timedelta(seconds=3)

# Looks one worker holds at once: thousands of watched clusters (each look is a coroutine and a timer).
_WATCHED_AT_ONCE = 20_000
# Workflows kept in memory between their tasks: every serving workload wakes its workflow at least once
# per report period, and one evicted from the cache replays its whole history on its next task. With the
# SDK's 1,000, a worker watching more workloads than that evicts one on nearly every answer (they wake in
# turn, least recently used first). Memory per cached workload: see bench/RESULTS.md (bench/watching.py).
_WORKFLOWS_CACHED = 10_000



def task_queues(settings: Settings) -> list[str]:
    """Every task queue the worker process polls, orchestration first."""
    return [settings.task_queue, settings.kube_task_queue, observe_task_queue(settings.kube_task_queue)]


def build_workers(client, deps: WorkerDeps, *, task_queue: str = TASK_QUEUE,
                  kube_task_queue: str = KUBE_TASK_QUEUE, max_threads: int = 16,
                  only: Collection[str] | None = None, version: WorkerDeploymentVersion | None = None,
                  workflow_types: list[type] | None = None) -> list[Worker]:
    """Two workers sharing a client: orchestration + light activities, and blocking Kubernetes I/O
    on its own queue (and thread pool) so a slow cluster cannot starve everything else. `only`: the
    queues to poll (a Kubernetes Deployment per queue, so each scales on its own); None polls all.
    `version`: the plane version these workers are (worker/versioning.py); None: unversioned.
    `workflow_types`: instead of the registry's (a test's next version of a workflow)."""
    def wanted(queue: str) -> bool:
        return only is None or queue in only

    metrics = DomainMetrics(deps.db)
    versioned = deployment_config(version)
    workers = []
    if wanted(task_queue):
        workers.append(Worker(client, task_queue=task_queue,
                              workflows=workflow_types or workflows(versioned=version is not None),
                              activities=main_activities(deps), deployment_config=versioned,
                              workflow_runner=WORKFLOW_RUNNER, sticky_queue_schedule_to_start_timeout=_STICKY_TIMEOUT,
                              max_cached_workflows=_WORKFLOWS_CACHED,
                              activity_executor=ThreadPoolExecutor(max_threads, thread_name_prefix="wingsmith-act"),
                              graceful_shutdown_timeout=_GRACEFUL_SHUTDOWN, interceptors=[metrics]))
    kube = kube_activities(deps)
    if kube and wanted(kube_task_queue):
        workers.append(Worker(client, task_queue=kube_task_queue, activities=kube,
                              activity_executor=ThreadPoolExecutor(max_threads, thread_name_prefix="wingsmith-kube"),
                              graceful_shutdown_timeout=_GRACEFUL_SHUTDOWN, interceptors=[metrics],
                              deployment_config=versioned))
    if kube and wanted(observe_task_queue(kube_task_queue)):
        # Looks wait for news for minutes: one per watched cluster of every serving workload is held at
        # once, on the event loop (no thread each). They change nothing, so a shutdown cancels them at
        # once; the server starts each again on whichever worker is up, where it carries on.
        workers.append(Worker(client, task_queue=observe_task_queue(kube_task_queue), activities=watch_activities(deps),
                              max_concurrent_activities=_WATCHED_AT_ONCE, graceful_shutdown_timeout=timedelta(0),
                              interceptors=[metrics], deployment_config=versioned))
    return workers


@asynccontextmanager
async def running_in_process(client, deps: WorkerDeps, *, task_queue: str | None = None, max_threads: int = 8):
    """The worker's own wiring inside this event loop: for tests, benchmarks and demos."""
    queue = task_queue or deps.settings.task_queue
    workers = build_workers(client, deps, task_queue=queue, kube_task_queue=deps.settings.kube_task_queue
                            if task_queue is None else queue + "-kube", max_threads=max_threads)
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        yield queue
    finally:
        await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
        await asyncio.gather(*tasks, return_exceptions=True)


async def run(settings: Settings, queues: Collection[str] | None = None) -> None:
    configure_tracing("wingsmith-worker")
    runtime, sdk_metrics_url = metrics_runtime(settings)
    # Connected (Temporal, then Postgres) before anything else speaks: a refused certificate or an
    # unusable DATABASE_URL ends the process in one line (wingsmith/adapters/startup.py).
    client = await connect(settings, runtime=runtime)
    deps = WorkerDeps(settings=settings)
    if settings.database_url:
        from wingsmith.adapters.store.db import migrate, open_pool
        # A worker (re)started while Postgres restarts waits for it rather than dying in a loop.
        try:
            deps.db = await open_pool(settings.database_url, wait_seconds=60)
            await migrate(deps.db)
        except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError) as exc:
            raise postgres_failure(exc) from None
    metrics_server = serve_metrics(settings, sdk_metrics_url)
    preload_kube_client()  # before polling: the first inventory read or rollout should not wait for imports
    version = deployment_version(settings)
    workers = build_workers(client, deps, task_queue=settings.task_queue, kube_task_queue=settings.kube_task_queue,
                            only=queues, version=version)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker started", task_queues=[w.task_queue for w in workers])
    runs = [asyncio.create_task(w.run()) for w in workers]
    if version is not None:
        log.info("worker version", deployment=version.deployment_name, build_id=version.build_id)
        promoting = asyncio.create_task(take_over(client, version))
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*runs, stopped], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not stopped and task.exception():
            log.error("worker crashed", error=repr(task.exception()))
    log.info("worker shutting down")
    if version is not None:
        promoting.cancel()
    await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
    if deps.db is not None:
        await deps.db.close()
    if metrics_server is not None:
        metrics_server.shutdown()


def main(argv: list[str] | None = None) -> None:
    # A setting that does not parse ends the process in one line, exit 78, like any other start failure.
    settings = run_or_exit("wingsmith worker", load_settings)
    parser = argparse.ArgumentParser(prog="python -m worker", description="Poll the plane's Temporal task queues.")
    parser.add_argument("--queue", action="append", choices=task_queues(settings), metavar="NAME",
                        help="poll only this task queue (repeatable); default: all of them")
    args = parser.parse_args(argv)
    configure_logging(settings.log_level, settings.log_format)
    run_or_exit("wingsmith worker", lambda: asyncio.run(run(settings, args.queue)))


if __name__ == "__main__":
    main()
