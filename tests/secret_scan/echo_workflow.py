"""A one-activity workflow whose input, activity payloads and result all carry the model id, so a
test can look for it in raw history."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow


class EchoIn(BaseModel):
    model_id: str


class EchoOut(BaseModel):
    model_id: str
    note: str


@activity.defn
async def describe(given: EchoIn) -> EchoOut:
    return EchoOut(model_id=given.model_id, note=f"described {given.model_id}")


@workflow.defn
class EchoWorkflow:
    @workflow.run
    async def run(self, given: EchoIn) -> EchoOut:
        return await workflow.execute_activity(describe, given, start_to_close_timeout=timedelta(seconds=30))
