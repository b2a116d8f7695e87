"""A child left to run on its own (workflows/children.py) ends without a word in the parent's worker.

Before: a draft's estimates terminated by an operator (the AIConfigurator proof does it) left an exception
nobody retrieved on the parent's child handle, which asyncio reported at ERROR, with a traceback, when the
handle was dropped, in whatever test or plane ran that worker next (CI: a later module's "no error logged"
check failed on it). A workflow's child handle is an asyncio future resolved with how the child ended;
here such a future ends in a failure and is dropped, with and without `leave_running`, in an event loop
whose exception handler records what asyncio reports."""

from __future__ import annotations

import asyncio
import gc

from temporalio.exceptions import ChildWorkflowError

from workflows.children import leave_running


def _reported_after_a_child_ends(leave: bool) -> list[str]:
    loop = asyncio.new_event_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        child: asyncio.Future[None] = loop.create_future()
        if leave:
            leave_running(child)
        child.set_exception(ChildWorkflowError("terminated by an operator", namespace="n", workflow_id="w",
                                               run_id="r", workflow_type="DraftPerformanceWorkflow",
                                               initiated_event_id=1, started_event_id=2, retry_state=None))
        loop.run_until_complete(asyncio.sleep(0))  # the done callbacks run
        del child
        gc.collect()
    finally:
        loop.close()
    return reported


def test_a_child_left_running_ends_unheard_and_without_it_asyncio_reports_an_error() -> None:
    assert _reported_after_a_child_ends(leave=True) == []
    assert _reported_after_a_child_ends(leave=False) == ["Future exception was never retrieved"]
