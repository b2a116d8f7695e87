"""Liveness, readiness and the version. /healthz: the process answers. /readyz: Postgres and Temporal answer,
the clusters this plane was started with (WINGSMITH_EXPECTED_CLUSTERS, set by `wingsmith up`) are
registered, and a worker polls each task queue in WINGSMITH_EXPECTED_TASK_QUEUES (also set by `up` only:
in production the API's readiness does not wait on the worker Deployments, docs/production.md); the body
says which check is still pending."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from api.responses import Health, Readiness, Version
from wingsmith.adapters.store.clusters import list_clusters
from wingsmith.adapters.version import build, release

router = APIRouter(tags=["health"])
_POLLED_FOR = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/version", response_model=Version)
async def version() -> Version:
    """Which code answers: asked by anyone, like /healthz (a release is no secret; the build names a commit)."""
    return Version(release=release(), build=build())


# The answer is a JSONResponse (its status says ready or not), so the models only describe it.
@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request) -> JSONResponse:
    checks = {"postgres": await _check_postgres(request), "temporal": await _check_temporal(request)}
    if request.app.state.settings.expected_clusters:
        checks["clusters"] = await _check_clusters(request) if checks["postgres"] == "ok" else "unknown (no registry)"
    if request.app.state.settings.expected_task_queues:
        checks["workers"] = await _check_workers(request) if checks["temporal"] == "ok" else "unknown (no Temporal)"
    ready = all(c == "ok" for c in checks.values())
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks},
                        status_code=200 if ready else 503)


async def _check_postgres(request: Request) -> str:
    pool = request.app.state.db
    if pool is None:
        settings = request.app.state.settings
        if not settings.database_url:
            return "not configured (DATABASE_URL)"
        from wingsmith.adapters.store.db import open_pool
        try:
            request.app.state.db = pool = await open_pool(settings.database_url)
        except Exception as exc:  # noqa: BLE001
            return f"unreachable: {type(exc).__name__}"
    try:
        await asyncio.wait_for(pool.fetchval("select 1"), timeout=2)
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"unreachable: {type(exc).__name__}"


async def _check_temporal(request: Request) -> str:
    client = request.app.state.temporal
    if client is None:
        settings = request.app.state.settings
        from wingsmith.adapters.temporal import connect
        try:
            request.app.state.temporal = client = await asyncio.wait_for(connect(settings), timeout=3)
        except Exception as exc:  # noqa: BLE001
            return f"unreachable: {type(exc).__name__}"
    try:
        await asyncio.wait_for(client.service_client.check_health(), timeout=2)
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"unreachable: {type(exc).__name__}"


async def _check_clusters(request: Request) -> str:
    expected = request.app.state.settings.expected_clusters
    try:
        registered = await asyncio.wait_for(list_clusters(request.app.state.db), timeout=2)
    except Exception as exc:  # noqa: BLE001
        return f"unreachable: {type(exc).__name__}"
    pending = sorted(set(expected) - {c.name for c in registered})
    return f"pending registration: {', '.join(pending)}" if pending else "ok"


async def _check_workers(request: Request) -> str:
    """A worker polls each expected task queue (for workflows or for activities), as Temporal saw it: it
    remembers a poller for a few minutes after its worker went away, so this says "started", not "alive"."""
    client = request.app.state.temporal

    async def polled(queue: str) -> bool:
        for kind in _POLLED_FOR:
            described = await asyncio.wait_for(client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind)), timeout=2)
            if described.pollers:
                return True
        return False

    queues = request.app.state.settings.expected_task_queues
    try:
        seen = await asyncio.gather(*(polled(queue) for queue in queues))
    except Exception as exc:  # noqa: BLE001
        return f"unreachable: {type(exc).__name__}"
    idle = [queue for queue, polling in zip(queues, seen, strict=True) if not polling]
    return f"no worker is polling task queue {', '.join(idle)}" if idle else "ok"
