from __future__ import annotations

import os
import socket

from pydantic import BaseModel
from temporalio import activity


class PingInput(BaseModel):
    message: str


class PingResult(BaseModel):
    message: str
    worker: str


@activity.defn
def ping(params: PingInput) -> PingResult:
    return PingResult(message=f"pong: {params.message}", worker=f"{socket.gethostname()}:{os.getpid()}")
