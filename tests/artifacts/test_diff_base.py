"""A draft's diff is taken against the approved artifact it was opened from, recorded when the draft
is saved, not against whatever is newest when someone looks: an artifact approved after the draft was
opened changes nothing in its diff, in the API, the console and `wingsmith artifacts show`."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
import pytest_asyncio

import wingsmith.cli.api_client as api_client
from api.app import create_app
from api.auth import TokenTable
from tests.console.conftest import sign_in
from wingsmith.adapters.store import artifacts as store
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import Settings
from wingsmith.domain.review import RecordedDecision

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = "acme/Diffed-1B"
TOKENS = {"tok-vic": {"name": "vic", "roles": ["viewer"]}}
CONFIG = {"hidden_size": 1024, "num_hidden_layers": 8}


def _id(sha: str) -> str:
    return f"{REPO}@{sha * 40}"[: len(REPO) + 41]


async def _draft(pool, sha: str, config: dict) -> str:
    artifact = _id(sha)
    await store.save_draft(pool, workflow_id=f"artifact/{artifact}", artifact_id=artifact, repo_id=REPO,
                           revision="main", sha=sha * 40, requested_by="watch", version=1, catalog_version="c1",
                           proposal={"repo_id": REPO, "sha": sha * 40, "config": config, "weight_bytes": 10},
                           evidence={}, sizing={}, warnings=[])
    return artifact


async def _approve(pool, artifact: str) -> None:
    await store.record_decision(pool, workflow_id=f"artifact/{artifact}", artifact_id=artifact,
                                decision=RecordedDecision(decision="approve", reviewer="ana", via="api",
                                                          draft_version=1, decided_at=datetime.now(UTC)))


@pytest_asyncio.fixture(loop_scope="session")
async def web(pg_pool, tmp_path):
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plane") as client:
        yield client


async def test_the_diff_stays_against_the_artifact_the_draft_was_opened_from(pg_pool, web, monkeypatch, capsys):
    first = await _draft(pg_pool, "a", CONFIG)
    await _approve(pg_pool, first)
    opened = await _draft(pg_pool, "b", {**CONFIG, "num_hidden_layers": 9})  # the watch opens it against `first`
    later = await _draft(pg_pool, "c", {**CONFIG, "hidden_size": 2048, "vocab_size": 7})
    await _approve(pg_pool, later)  # newer than `first`, but `opened` was never compared with it

    row = await store.get_artifact(pg_pool, opened)
    assert row["draft"]["diff_base"] == first
    assert (await store.get_artifact(pg_pool, first))["draft"]["diff_base"] is None  # nothing approved before it

    headers = {"Authorization": "Bearer tok-vic"}
    body = (await web.get(f"/v1/artifacts/{opened}", headers=headers)).json()
    assert body["diff"]["against"] == first
    assert [c["key"] for c in body["diff"]["config"]] == ["num_hidden_layers"]  # only what it changed
    await _approve(pg_pool, opened)  # once approved, its page still says what it was approved against
    body = (await web.get(f"/v1/artifacts/{opened}", headers=headers)).json()
    assert body["diff"]["against"] == first and body["diff"]["changed"] == ["config.num_hidden_layers"]
    assert (await web.get(f"/v1/artifacts/{later}", headers=headers)).json()["diff"]["against"] == first

    await sign_in(web, "tok-vic")
    page = (await web.get(f"/console/artifacts/{opened}")).text
    assert f'href="/console/artifacts/{first}"' in page and f"/console/artifacts/{later}\"" not in page

    # The parser first, so every command module is imported with the real client: one imported while the
    # patch is on would keep the fake for the rest of the session (it binds `request` by name).
    parser = build_parser()
    monkeypatch.setattr(api_client, "request", lambda *a, **k: (0, body))
    args = parser.parse_args(["artifacts", "show", opened])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"against       {first}" in out and later not in out
