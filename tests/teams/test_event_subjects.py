"""Events belong to their subject's kind: a workload's page shows its own events only, never those of
an endpoint (or an artifact) that happens to carry the same name. Names are unique within a kind,
not across kinds, so one team could otherwise name a workload after another team's endpoint and
read that endpoint's events (its backends and workloads), or name an endpoint after another team's
workload and write events into that workload's page.

Rows are written by the store functions the workflows' activities call, into a real Postgres, and
read back through the real API app (no Temporal: the registry row answers on its own)."""

from __future__ import annotations

import json

import httpx
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from tests.conftest import database_before
from wingsmith.adapters.store import artifacts as artifact_store
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.db import migrate
from wingsmith.domain.config import Settings

TOKENS = {"tok-bo": {"name": "bo", "roles": ["operator"], "team": "blue"},
          "tok-rita": {"name": "rita", "roles": ["operator"], "team": "red"}}
ARTIFACT = "moonshotai/Kimi-K3@" + "a" * 40
RED_ENDPOINT = "kimi-k3-prod"   # red's endpoint; blue names a workload after it
RED_WORKLOAD = "kimi-red-main"  # red's workload; blue names an endpoint after it


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def registry(pg_pool):
    await pg_pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                          "values ($1, 'moonshotai/Kimi-K3', 'main', $2, 'approved', $3, 'ana') "
                          "on conflict do nothing", ARTIFACT, "a" * 40, "artifact/" + ARTIFACT)
    for workload, team, who in ((RED_WORKLOAD, "red", "rita"), (RED_ENDPOINT, "blue", "bo")):
        await workload_store.upsert_workload(pg_pool, workload_id=workload, artifact_id=ARTIFACT, spec={},
                                             state="serving", workflow_id=f"workload/{workload}",
                                             requested_by=who, step="serving", team=team)
    for name, team, who, workloads in ((RED_ENDPOINT, "red", "rita", [RED_WORKLOAD]),
                                       (RED_WORKLOAD, "blue", "bo", [RED_ENDPOINT])):
        await endpoint_store.upsert_endpoint(
            pg_pool, name=name, workloads=workloads, state="serving", workflow_id=f"endpoint/{name}",
            routes=[{"id": f"{team}-secret-backend", "url": "http://10.0.0.1:8000"}], step="serving",
            actor=who, team=team, requested_by=who)
    return pg_pool


@pytest_asyncio.fixture(loop_scope="session")
async def api(registry):
    app = create_app(Settings(log_format="json"), tokens=TokenTable.from_json(json.dumps(TOKENS)), db=registry)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def _events(api: httpx.AsyncClient, workload: str, token: str) -> list[dict]:
    r = await api.get(f"/v1/workloads/{workload}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.json()["events"]


async def test_a_workload_named_after_another_teams_endpoint_shows_none_of_its_events(api):
    events = await _events(api, RED_ENDPOINT, "tok-bo")
    assert [e["kind"] for e in events] == ["workload_serving"], events
    assert "red-secret-backend" not in json.dumps(events) and RED_WORKLOAD not in json.dumps(events)


async def test_an_endpoint_named_after_another_teams_workload_writes_nothing_into_its_page(api):
    events = await _events(api, RED_WORKLOAD, "tok-rita")
    assert [e["kind"] for e in events] == ["workload_serving"], events
    assert "blue-secret-backend" not in json.dumps(events)


async def test_each_store_read_keeps_to_its_subject_kind(registry):
    # An artifact's events are its own too, and the list views' failure causes read workloads' only.
    async with registry.acquire() as conn:
        await artifact_store.record_event(conn, source="artifact/" + ARTIFACT, step="approved",
                                          subject=ARTIFACT, kind="artifact_approved")
    await registry.execute("insert into events (source, step, subject, kind, detail) values "
                           "('endpoint/x', 'odd', $1, 'workload_failed', '{\"cause\": \"not a workload\"}')",
                           RED_WORKLOAD)
    assert await workload_store.failure_causes(registry, [RED_WORKLOAD]) == {}
    kinds = await registry.fetch("select subject_kind, kind from events where subject = any($1::text[]) "
                                 "order by id", [RED_WORKLOAD, RED_ENDPOINT, ARTIFACT])
    assert {(r["subject_kind"], r["kind"]) for r in kinds} == {
        ("workload", "workload_serving"), ("endpoint", "endpoint_serving"), ("artifact", "artifact_approved"),
        ("endpoint", "workload_failed")}  # written without a kind (an older writer): its source decides


SUBJECTS_MIGRATION = "0009_event_subjects.sql"


async def test_events_from_before_subject_kinds_get_theirs_from_who_wrote_them(pg_server):
    async with database_before(pg_server, SUBJECTS_MIGRATION) as pool:
        async with pool.acquire() as conn:
            old = [("artifact/o/m@abc", "saved", "o/m@abc", "draft_saved"),    # an artifact's own workflow
                   ("artifact/o/m@abc", "follow:x", "x", "follow_moved"),       # ... writing about a workload
                   ("workload/x", "serving", "x", "workload_serving"),
                   ("workload/x/cluster/a", "dep", "x", "deployment_serving"),
                   ("api", "follow-set", "x", "follow_set"),
                   ("endpoint/x", "serving", "x", "endpoint_serving")]
            for source, step, subject, kind in old:
                await conn.execute("insert into events (source, step, subject, kind) values ($1, $2, $3, $4)",
                                   source, step, subject, kind)
        assert SUBJECTS_MIGRATION in await migrate(pool)
        rows = await pool.fetch("select kind, subject_kind from events order by id")
        assert [(r["kind"], r["subject_kind"]) for r in rows] == [
            ("draft_saved", "artifact"), ("follow_moved", "workload"), ("workload_serving", "workload"),
            ("deployment_serving", "workload"), ("follow_set", "workload"), ("endpoint_serving", "endpoint")]
