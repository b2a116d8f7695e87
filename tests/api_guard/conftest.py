"""The API guard's test bed: the real app on a real Postgres and a real Temporal namespace (one each per
module), the offline Hub, and one token per role.

Two ways in: `api` calls the app in-process (on the test's own event loop, sharing the fixtures' pool
and client), and `served_api` runs the app under uvicorn on a thread of its own, for clients that
are synchronous (the schema fuzzer); that server opens its own pool and Temporal client in its
lifespan, as a deployed API does.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
import pytest_asyncio
import uvicorn

from api.app import create_app
from api.auth import TokenTable
from sim.hub import start_hub_server
from tests.conftest import unique_queue
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port
from worker.registry import WorkerDeps

# One person per role, plus one who holds two (to show that a body cannot lend them a third name).
TOKENS = {
    "tok-vic": {"name": "vic", "roles": ["viewer"]},
    "tok-olga": {"name": "olga", "roles": ["operator"]},
    "tok-ana": {"name": "ana", "roles": ["approver"]},
    "tok-ada": {"name": "ada", "roles": ["admin"]},
    "tok-sam": {"name": "sam", "roles": ["operator", "approver"]},
}
ROLE_TOKENS = {"viewer": "tok-vic", "operator": "tok-olga", "approver": "tok-ana", "admin": "tok-ada"}
WRONG_TOKEN = "tok-nobody-has-this"


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def hub():
    handle = start_hub_server()
    yield handle
    handle.stop()


def guard_settings(hub_url: str, home, **extra) -> Settings:
    queue = unique_queue("guard")
    return Settings(home=home, hf_endpoint=hub_url, task_queue=queue, kube_task_queue=queue + "-kube",
                    auth_tokens=json.dumps(TOKENS), log_format="json", log_level="WARNING", **extra)


@pytest.fixture
def settings(hub, tmp_path) -> Settings:
    return guard_settings(hub.url, tmp_path / "home")


@pytest.fixture
def deps(settings, pg_pool) -> WorkerDeps:
    return WorkerDeps(settings=settings, db=pg_pool)


@pytest.fixture
def app(settings, pg_pool, temporal_client):
    return create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool,
                      temporal=temporal_client)


@pytest_asyncio.fixture(loop_scope="session")
async def api(app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


@pytest.fixture(scope="module")
def served_api(hub, pg_dsn, temporal_server, temporal_client, tmp_path_factory):
    """The app behind uvicorn on its own thread and loop; yields its base URL."""
    settings = guard_settings(hub.url, tmp_path_factory.mktemp("served") / "home", database_url=pg_dsn,
                              temporal_address=temporal_server.address,
                              temporal_namespace=temporal_client.namespace)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, name="api-guard-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("the API server did not start")
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    ready = httpx.get(f"{base}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    yield base
    server.should_exit = True
    thread.join(timeout=15)
