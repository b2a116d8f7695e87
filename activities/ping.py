from __future__ import annotations

import os
import socket

from temporalio import activity

from contracts import ping as contract
from contracts.ping import PingInput, PingResult


@activity.defn(name=contract.ACTIVITY)
def ping(params: PingInput) -> PingResult:
    return PingResult(message=f"pong: {params.message}", worker=f"{socket.gethostname()}:{os.getpid()}")
