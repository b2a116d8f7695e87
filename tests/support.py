"""Helpers shared by tests that run the plane's workflows."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tests.conftest import unique_queue
from worker.main import running_in_process
from worker.registry import WorkerDeps

HISTORIES = Path(__file__).resolve().parent / "histories"


def running_worker(client, deps: WorkerDeps, queue: str | None = None):
    """The worker's own wiring (workflows, activities, executors) on this test's task queues."""
    return running_in_process(client, deps, task_queue=queue)


# A polling deadline, not a cancellation scope (what ASYNC109 is about); callers pass it by name.
async def wait_until(predicate, timeout: float = 20, interval: float = 0.1, what: str = "condition"):  # noqa: ASYNC109
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def history_json(handle) -> str:
    history = await handle.fetch_history()
    return history.to_json()


def save_history(name: str, workflow_id: str, history: str) -> None:
    """Record a history for the replay tests (run with WINGSMITH_RECORD_HISTORIES=1 to refresh)."""
    HISTORIES.mkdir(exist_ok=True)
    (HISTORIES / f"{name}.json").write_text(json.dumps({"workflow_id": workflow_id, "history": json.loads(history)},
                                                        indent=1))


async def record_history_if_asked(client, workflow_id: str, name: str) -> None:
    """Save the workflow's history as tests/histories/<name>.json when WINGSMITH_RECORD_HISTORIES=1."""
    if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
        handle = client.get_workflow_handle(workflow_id)
        save_history(name, handle.id, await history_json(handle))


__all__ = ["running_worker", "wait_until", "history_json", "save_history", "record_history_if_asked", "unique_queue"]


async def wait_for_pollers(client, settings) -> None:
    """Until the server sees a worker polling both task queues (the API asks before live reads)."""
    from api.services.inventories import missing_worker

    async def polled() -> bool:
        return await missing_worker(client, settings) is None
    await wait_until(polled, what="the worker's pollers")
