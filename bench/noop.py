"""The bare-Temporal baseline for bench/load.py: a workflow that runs N no-op activities in a row."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn
async def noop() -> None:
    return None


@workflow.defn
class NoopWorkflow:
    @workflow.run
    async def run(self, activities: int) -> None:
        for _ in range(activities):
            await workflow.execute_activity(noop, start_to_close_timeout=timedelta(seconds=30))
