"""While the API has no Temporal client (Temporal not reachable when it started, not yet reconnected by
/readyz), whatever must reach Temporal answers 503 `temporal_unavailable` in the one error shape and starts
or changes nothing, and reads that only add a workflow's live view still answer from the registry (api/deps.py:
`TemporalDep`, `MaybeTemporalDep`)."""

from __future__ import annotations

import json

import httpx
import pytest

from api.app import create_app
from api.auth import TokenTable
from tests.api_guard.conftest import TOKENS, as_
from wingsmith.domain.config import Settings


@pytest.fixture
async def api_without_temporal():
    settings = Settings(auth_tokens="{}", log_format="json", temporal_address=None)
    app = create_app(settings, tokens=TokenTable.from_json(json.dumps(TOKENS)), temporal=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


@pytest.mark.parametrize("method, path, token", [
    ("GET", "/v1/watches", "tok-vic"),
    ("POST", "/v1/watches/acme/m@main/pause", "tok-olga"),
    ("POST", f"/v1/artifacts/acme/m@{'0' * 40}/review", "tok-ana"),
    ("DELETE", "/v1/workloads/kimi", "tok-olga"),
    ("DELETE", "/v1/endpoints/kimi", "tok-olga"),
])
async def test_what_must_reach_temporal_says_it_is_not_reachable(api_without_temporal, method, path, token):
    r = await api_without_temporal.request(method, path, headers=as_(token))
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "5"
    error = r.json()["error"]
    assert error["code"] == "temporal_unavailable" and "Temporal is not reachable" in error["message"]


async def test_who_may_ask_is_checked_before_temporal_is_missed(api_without_temporal):
    r = await api_without_temporal.get("/v1/watches")
    assert r.status_code == 401, r.text
