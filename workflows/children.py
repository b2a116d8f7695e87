"""Children a workflow starts and leaves to run on their own (`ParentClosePolicy.ABANDON`).

The parent still hears how such a child ended (its history records the child's completion, failure or
termination), and the SDK resolves the child's handle with it. Nobody here waits for that answer: a child
that failed or that an operator terminated would leave an exception nobody retrieved, which asyncio
reports at ERROR, with a traceback, in whichever worker later drops the parent's state. The child's own
history is where its end is told; `leave_running` takes the answer off the handle so the parent's worker
says nothing. No command is added: the replay of every recorded history is unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any


def _taken(ended: asyncio.Future[Any]) -> None:
    if not ended.cancelled():
        ended.exception()


def leave_running(child: asyncio.Future[Any]) -> None:
    """Let `child` (a started child workflow's handle) end however it ends, unheard by this workflow."""
    child.add_done_callback(_taken)
