"""The ping's contract: a trivial workflow that proves a worker is polling (the smoke test and
`wingsmith up` start it), and its one activity."""

from __future__ import annotations

from pydantic import BaseModel

WORKFLOW = "PingWorkflow"
ACTIVITY = "ping"


class PingWorkflowInput(BaseModel):
    message: str = "ping"


class PingInput(BaseModel):
    message: str


class PingResult(BaseModel):
    message: str
    worker: str
