"""A check that could not run records nothing: with no worker polling, registration and `check` answer at
once, say why, and leave the cluster's last checklist (and so whether it may take replicas) as it was."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from tests.conftest import unique_queue
from wingsmith.adapters.store import clusters as store
from wingsmith.domain.config import Settings
from wingsmith.domain.member_clusters import CheckLine, Preflight

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}}
ADMIN = {"Authorization": "Bearer tok-admin"}


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, temporal_client, tmp_path):
    await pg_pool.execute("delete from clusters")
    queue = unique_queue("nobody")  # no worker polls it
    settings = Settings(home=tmp_path / "home", task_queue=queue, kube_task_queue=queue + "-kube",
                        auth_tokens=json.dumps(TOKENS), log_format="json")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=30) as client:
        yield client


async def test_without_a_worker_nothing_is_recorded_and_the_answer_says_why(api, pg_pool):
    r = await api.post("/v1/clusters", headers=ADMIN, json={"name": "lonely", "kubeconfig": "env:KUBECONFIG_LONELY"})
    assert r.status_code == 201, r.text
    answer = r.json()
    assert answer["preflight"] is None
    assert answer["check_not_run"].startswith("no worker is polling task queue nobody-")
    assert answer["check_not_run"].endswith("; preflight checks run in the worker")

    failed = Preflight(checked_at=datetime(2026, 1, 1, tzinfo=UTC), lines=[
        CheckLine(check="namespace", status="fail", detail="namespace default does not exist",
                  fix="kubectl create namespace default")])
    await store.set_preflight(pg_pool, "lonely", failed)
    r = await api.post("/v1/clusters/lonely/check", headers=ADMIN)
    assert r.status_code == 200 and r.json()["check_not_run"], r.text
    assert Preflight.model_validate(r.json()["preflight"]) == failed  # still unplaceable: nothing new was learned
    assert (await store.get_cluster(pg_pool, "lonely")).info().unplaceable
    missing = await api.post("/v1/clusters/nowhere/check", headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "cluster 'nowhere' is not registered"
