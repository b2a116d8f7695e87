"""A trivial workflow that proves a worker is polling: the smoke test and `wingsmith up` use it."""

from __future__ import annotations

from temporalio import workflow

from contracts import ping as contract
from contracts.ping import PingInput, PingResult, PingWorkflowInput
from workflows import policies


@workflow.defn(name=contract.WORKFLOW)
class PingWorkflow:
    @workflow.run
    async def run(self, params: PingWorkflowInput) -> PingResult:
        return await workflow.execute_activity(
            contract.ACTIVITY, PingInput(message=params.message), result_type=PingResult, **policies.PING)
