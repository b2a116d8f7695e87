"""The artifact journey's test bed: the offline Hub, a real Temporal dev server, a real Postgres,
the API app in-process, and the worker's own wiring on a task queue per test."""

from __future__ import annotations

import json

import httpx
import pytest
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from sim.hub import start_hub_server
from tests.conftest import unique_queue
from wingsmith.domain.config import Settings
from worker.registry import WorkerDeps

HF_TOKEN = "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42"
HF_TOKEN_ENV = "WINGSMITH_TEST_ARTIFACT_HF_TOKEN"
TOKENS = {
    "tok-olga": {"name": "olga", "roles": ["operator"]},
    "tok-ana": {"name": "ana", "roles": ["approver"]},
    "tok-sam": {"name": "sam", "roles": ["operator", "approver"]},
    "tok-vic": {"name": "vic", "roles": ["viewer"]},
}
KIMI = "moonshotai/Kimi-K3"


@pytest.fixture(scope="module")
def hub():
    handle = start_hub_server(grants={"*": {HF_TOKEN}})
    yield handle
    handle.stop()


@pytest.fixture
def settings(hub, tmp_path, monkeypatch) -> Settings:
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV,
                    task_queue=unique_queue("art"), auth_tokens=json.dumps(TOKENS), log_format="json")


@pytest.fixture
def deps(settings, pg_pool) -> WorkerDeps:
    return WorkerDeps(settings=settings, db=pg_pool)


@pytest_asyncio.fixture(loop_scope="session")
async def api(settings, pg_pool, temporal_client):
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
