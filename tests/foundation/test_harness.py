"""The harness itself: real Postgres with the registry schema, real Temporal running a workflow
through the worker's own wiring, and the time-skipping server with our search attributes."""

from __future__ import annotations

import uuid

from activities.ping import PingResult
from contracts.ping import PingWorkflowInput
from tests.conftest import unique_queue
from wingsmith.adapters.store.db import migrate, migration_files
from wingsmith.domain.config import SEARCH_ATTRIBUTES, Settings
from worker.main import build_workers
from worker.registry import WorkerDeps
from workflows.ping import PingWorkflow


async def test_registry_schema_is_migrated_once(pg_pool):
    tables = {r["table_name"] for r in await pg_pool.fetch(
        "select table_name from information_schema.tables where table_schema = 'public'")}
    assert {"artifacts", "drafts", "reviews", "clusters", "workloads", "placements", "deployments",
            "endpoints", "events", "schema_migrations"} <= tables
    assert await migrate(pg_pool) == []  # applying again changes nothing
    recorded = [r["name"] for r in await pg_pool.fetch("select name from schema_migrations order by name")]
    assert recorded == [name for name, _ in migration_files()]


async def test_events_are_idempotent_by_source_and_step(pg_pool):
    insert = ("insert into events (source, step, subject, kind) values ($1, $2, $3, $4) "
              "on conflict (source, step) do nothing")
    source = f"artifact/x@{uuid.uuid4().hex}"
    for _ in range(3):
        await pg_pool.execute(insert, source, "draft-saved:1", "x", "draft_saved")
    assert await pg_pool.fetchval("select count(*) from events where source = $1", source) == 1


async def test_ping_workflow_runs_through_the_worker(temporal_client):
    queue = unique_queue()
    workers = build_workers(temporal_client, WorkerDeps(settings=Settings()), task_queue=queue,
                            kube_task_queue=queue + "-kube")
    import asyncio
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        result = await temporal_client.execute_workflow(
            PingWorkflow.run, PingWorkflowInput(message="hello"), id=f"ping-{uuid.uuid4()}", task_queue=queue)
        assert isinstance(result, PingResult)
        assert result.message == "pong: hello"
    finally:
        await asyncio.gather(*(w.shutdown() for w in workers))
        for t in tasks:
            t.cancel()


async def test_time_skipping_server_knows_our_search_attributes(time_skipping_env):
    # The test server has no ListSearchAttributes; starting a workflow that carries every one of our
    # attributes is the check (an unregistered attribute is rejected at start).
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
    pairs = [SearchAttributePair(SearchAttributeKey.for_keyword_list(name), ["x"]) if kind == "KeywordList"
             else SearchAttributePair(SearchAttributeKey.for_keyword(name), "x")
             for name, kind in SEARCH_ATTRIBUTES.items()]
    client = time_skipping_env.client
    handle = await client.start_workflow(PingWorkflow.run, PingWorkflowInput(), id=f"sa-{uuid.uuid4()}",
                                         task_queue=unique_queue(), search_attributes=TypedSearchAttributes(pairs))
    await handle.terminate()
