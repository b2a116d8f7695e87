"""A trivial workflow that proves a worker is polling: the smoke test and `wingsmith up` use it."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.ping import PingInput, PingResult, ping


class PingWorkflowInput(BaseModel):
    message: str = "ping"


@workflow.defn
class PingWorkflow:
    @workflow.run
    async def run(self, params: PingWorkflowInput) -> PingResult:
        return await workflow.execute_activity(
            ping, PingInput(message=params.message), start_to_close_timeout=timedelta(seconds=30))
