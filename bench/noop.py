"""The bare-Temporal baseline for bench/load.py: a workflow that runs no-op activities one after another,
as many as a journey runs, of the same kinds (regular activities and local activities)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow


@dataclass
class NoopPlan:
    activities: int
    local_activities: int = 0


@activity.defn
async def noop() -> None:
    return None


@workflow.defn
class NoopWorkflow:
    @workflow.run
    async def run(self, plan: NoopPlan) -> None:
        total, local = plan.activities + plan.local_activities, plan.local_activities
        for i in range(total):
            # Local ones spread evenly among the regular ones, as a journey's registry writes are.
            if local and (i * local) // total != ((i + 1) * local) // total:
                await workflow.execute_local_activity(noop, start_to_close_timeout=timedelta(seconds=30))
            else:
                await workflow.execute_activity(noop, start_to_close_timeout=timedelta(seconds=30))
