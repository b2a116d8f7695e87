"""While Postgres is away (restarting, say) the API answers 503 in the one error shape and changes
nothing; it never lets a connection error out as a 500."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from api.app import create_app
from api.auth import TokenTable
from tests.api_guard.conftest import as_
from wingsmith.local.ports import free_port


@pytest.fixture
async def api_without_registry(settings, temporal_client):
    # A real pool aimed at a port nobody listens on: every query meets a real refused connection.
    pool = await asyncpg.create_pool(f"postgresql://postgres@127.0.0.1:{free_port()}/wingsmith", min_size=0)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pool, temporal=temporal_client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client
    await pool.close()


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/v1/artifacts", None),
    ("GET", "/v1/workloads", None),
    ("GET", "/v1/clusters", None),
    ("POST", "/v1/clusters", {"name": "east", "kubeconfig": "env:KUBECONFIG_EAST"}),
])
async def test_registry_down_is_a_503_that_says_so(api_without_registry, method, path, body):
    r = await api_without_registry.request(method, path, json=body, headers=as_("tok-ada"))
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "2"
    error = r.json()["error"]
    assert error["code"] == "unavailable" and "PostgreSQL" in error["message"]
