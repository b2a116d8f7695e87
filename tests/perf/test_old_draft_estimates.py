"""A draft saved before drafts carried estimates (no performance workflow was ever started for it) says so,
instead of "estimates follow" forever, and an operator can ask for its estimates: one POST starts the draft's
performance workflow under its one id (a repeat starts nothing), and the draft then says what any draft
says while its estimates are on their way. Real API, Temporal, Postgres and worker; no perf worker (the
estimate is seen queued on the perf queue, as tests/perf/test_draft_performance.py sees a new draft's)."""

from __future__ import annotations

from html import unescape

import pytest

from contracts.draft_performance import performance_workflow_id
from contracts.ids import artifact_workflow_id_of
from contracts.perf import ACTIVITY_ESTIMATE
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.support import running_worker, wait_until
from tests.upstream import snapshot_config
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.adapters.store import artifacts as store
from wingsmith.domain.draft_performance import NOT_ASKED, NOT_INSTALLED, PENDING
from wingsmith.domain.recipes import evidence_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

GPT_OSS = "openai/gpt-oss-120b"


async def _saved_draft(pool, sha: str, *, hours_ago: float) -> str:
    """A draft as an older plane saved it: its proposal and evidence, a sizing document without a target or
    performance, and no performance workflow."""
    artifact = f"{GPT_OSS}@{sha * 40}"
    catalog = load_catalog()
    evidence = evidence_for(catalog.find(GPT_OSS), catalog).model_dump(mode="json")
    await store.save_draft(pool, workflow_id=artifact_workflow_id_of(artifact), artifact_id=artifact,
                           repo_id=GPT_OSS, revision="main", sha=sha * 40, requested_by="olga", version=1,
                           catalog_version=catalog.version, evidence=evidence, sizing={"sizing": []}, warnings=[],
                           proposal={"repo_id": GPT_OSS, "sha": sha * 40, "config": snapshot_config(GPT_OSS)})
    await pool.execute("update drafts set created_at = now() - make_interval(secs => $2) where artifact_id = $1",
                       artifact, hours_ago * 3600)
    return artifact


async def _draft(api, artifact: str) -> dict:  # noqa: F811
    r = await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))
    assert r.status_code == 200, r.text
    return r.json()["draft"]


async def test_an_old_draft_says_nobody_asked_and_an_operator_can_ask(api, deps, pg_pool, temporal_client):  # noqa: F811
    old = await _saved_draft(pg_pool, "e", hours_ago=24)
    draft = await _draft(api, old)
    assert (draft["performance_status"], draft["performance_reason"]) == ("not_asked", NOT_ASKED)
    assert draft["performance"] == []
    # A draft saved a moment ago whose artifact workflow has not started its estimates yet is not called old.
    young = await _draft(api, await _saved_draft(pg_pool, "f", hours_ago=0))
    assert (young["performance_status"], young["performance_reason"]) == ("pending", PENDING)

    path = f"/v1/artifacts/{old}/drafts/1/performance"
    refused = await api.post(path, headers=as_("tok-vic"))
    assert refused.status_code == 403, refused.text
    other = await api.post(f"/v1/artifacts/{old}/drafts/2/performance", headers=as_("tok-olga"))
    assert other.status_code == 409 and other.json()["error"]["code"] == "not_current_draft", other.text
    missing = await api.post(f"/v1/artifacts/{GPT_OSS}@{'0' * 40}/drafts/1/performance", headers=as_("tok-olga"))
    assert missing.status_code == 404 and missing.json()["error"]["message"].endswith("has no draft"), missing.text
    assert (await _draft(api, old))["performance_status"] == "not_asked", "refused asks started nothing"

    async with running_worker(temporal_client, deps):
        asked = await api.post(path, headers=as_("tok-olga"))
        assert asked.status_code == 202, asked.text
        workflow_id = performance_workflow_id(artifact_workflow_id_of(old), 1)
        assert asked.json()["workflow_id"] == workflow_id and asked.json()["started"] is True
        again = await api.post(path, headers=as_("tok-olga"))
        assert again.status_code == 202 and again.json()["started"] is False, "one id: a repeat starts nothing"
        handle = temporal_client.get_workflow_handle(workflow_id)
        try:
            async def queued():
                pending = (await handle.describe()).raw_description.pending_activities
                return next((a for a in pending if a.activity_type.name == ACTIVITY_ESTIMATE), None)
            await wait_until(queued, what="the old draft's estimate queued on the perf queue")

            async def said():
                shown = await _draft(api, old)
                return shown if shown["performance_status"] == "unavailable" else None
            shown = await wait_until(said, what="the old draft saying why its estimates wait")
        finally:
            await handle.terminate("the test has seen it asked")
    assert shown["performance_reason"].startswith(NOT_INSTALLED), shown["performance_reason"]


async def test_the_draft_page_says_so_and_its_button_asks(api, pg_pool, temporal_client):  # noqa: F811
    from tests.console.conftest import csrf_of, sign_in
    old = await _saved_draft(pg_pool, "a", hours_ago=2)
    page_path = f"/console/artifacts/{old}"
    await sign_in(api, "tok-vic", page_path)
    seen = (await api.get(page_path)).text
    assert "it predates estimates" in seen and 'id="ask-estimates-form"' not in seen, "viewers cannot ask"
    model_page = (await api.get(f"/console/models/{GPT_OSS}")).text
    assert f"the newest, {old}, says: {NOT_ASKED}" in unescape(model_page), "the model page says it too"
    await sign_in(api, "tok-olga", page_path)
    page = await api.get(page_path)
    assert 'id="ask-estimates-form"' in page.text
    r = await api.post(f"{page_path}/performance", data={"csrf": csrf_of(page.text), "draft_version": "1"})
    assert r.status_code == 303 and r.headers["location"].endswith("#performance"), r.text
    handle = temporal_client.get_workflow_handle(performance_workflow_id(artifact_workflow_id_of(old), 1))
    try:
        assert (await handle.describe()).status is not None, "the button started the draft's estimates"
        after = (await api.get(page_path)).text
        assert "it predates estimates" not in after and 'id="ask-estimates-form"' not in after
        assert PENDING in after
    finally:
        await handle.terminate("the test has seen it asked")
