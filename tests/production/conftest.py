"""Fixtures of the production-form tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.service import RPCError


@pytest_asyncio.fixture(loop_scope="session")
async def started(temporal_client) -> AsyncIterator[list[str]]:
    """Workflow ids a test started: terminated after it, whatever happened (their workers are gone)."""
    ids: list[str] = []
    yield ids
    for wid in ids:
        with contextlib.suppress(RPCError):
            await temporal_client.get_workflow_handle(wid).terminate("the test is over")
