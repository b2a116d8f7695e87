"""Register → draft → review, on a real Temporal dev server and a real Postgres, through the API."""

from __future__ import annotations

import os

from temporalio.api.enums.v1 import EventType

from tests.artifacts.conftest import HF_TOKEN, KIMI, as_
from tests.support import history_json, running_worker, save_history, wait_until
from wingsmith.adapters.starter import artifact_handle
from workflows.artifact import ArtifactWorkflow

RECORD = os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1"


async def _register(api, source=f"hf:{KIMI}", token="tok-olga"):
    r = await api.post("/v1/artifacts", json={"source": source}, headers=as_(token))
    assert r.status_code == 202, r.text
    return r.json()


async def _draft(api, artifact_id: str) -> dict:
    async def ready():
        r = await api.get(f"/v1/artifacts/{artifact_id}", headers=as_("tok-vic"))
        return r.json() if r.status_code == 200 and r.json().get("state") == "draft" and r.json().get("draft") else None
    return await wait_until(ready, what="the draft to be saved")


async def _update_events(handle) -> int:
    history = await handle.fetch_history()
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)


async def test_register_draft_approve(api, deps, temporal_client, pg_pool):
    async with running_worker(temporal_client, deps):
        reg = await _register(api)
        assert reg["id"].startswith(f"{KIMI}@") and reg["workflow_id"] == f"artifact/{reg['id']}"
        escaped_id = reg["workflow_id"].replace("/", "%2F").replace("@", "%40")
        assert reg["started"] is True and reg["workflow_url"].endswith("/workflows/" + escaped_id)

        art = await _draft(api, reg["id"])
        draft = art["draft"]
        assert draft["version"] == 1
        variants = {v["name"]: v for v in draft["evidence"]["variants"]}
        assert variants["default"]["vram_minimum_gb"] == 1680 and variants["nvfp4"]["vram_minimum_gb"] == 1650
        sized = {s["variant"]: s for s in draft["sizing"]["sizing"]}
        assert sized["default"]["report"]["floor"]["ours_gb"] == 1874
        assert sized["default"]["report"]["floor"]["level"] == "informational"
        assert art["live"]["stage"] == "draft" and art["live"]["requested_by"] == "olga"

        # A repeated register starts nothing new.
        again = await _register(api)
        assert again["id"] == reg["id"] and again["started"] is False

        r = await api.post(f"/v1/artifacts/{reg['id']}/review", headers=as_("tok-ana"), json={
            "decision": "approve", "comment": "floors checked", "draft_version": 1,
            "selections": {"variant": "default", "features": ["spec_decoding"]}})
        assert r.status_code == 200, r.text
        assert r.json()["stage"] == "approved" and r.json()["decision"]["reviewer"] == "ana"

        handle = artifact_handle(temporal_client, reg["id"])
        outcome = await handle.result()
        assert outcome.stage == "approved" and outcome.decision.via == "api"
        assert await _update_events(handle) == 1
        row = await pg_pool.fetchrow("select * from reviews where artifact_id = $1", reg["id"])
        assert row["decision"] == "approve" and row["reviewer"] == "ana" and row["comment"] == "floors checked"
        assert row["selections"] == {"variant": "default", "features": ["spec_decoding"]}
        assert await pg_pool.fetchval("select state from artifacts where id = $1", reg["id"]) == "approved"
        kinds = [r["kind"] for r in await pg_pool.fetch("select kind from events where subject = $1 order by id",
                                                        reg["id"])]
        assert kinds == ["draft_saved", "draft_approved"]

        # Deciding again is a conflict, and the history holds no secret.
        r = await api.post(f"/v1/artifacts/{reg['id']}/review", headers=as_("tok-ana"), json={
            "decision": "reject", "draft_version": 1})
        assert r.status_code == 409 and r.json()["error"]["code"] == "already_decided"
        history = await history_json(handle)
        assert HF_TOKEN not in history
        if RECORD:
            save_history("artifact_approved", handle.id, history)


async def test_reject_stale_self_approval_and_validation(api, deps, temporal_client, pg_pool):
    async with running_worker(temporal_client, deps):
        reg = await _register(api, source="hf:Qwen/Qwen3-8B", token="tok-sam")
        await _draft(api, reg["id"])
        handle = artifact_handle(temporal_client, reg["id"])
        url = f"/v1/artifacts/{reg['id']}/review"

        stale = await api.post(url, headers=as_("tok-ana"), json={"decision": "approve", "draft_version": 2})
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_draft_version"
        assert "stale" in stale.json()["error"]["message"]

        own = await api.post(url, headers=as_("tok-sam"), json={"decision": "approve", "draft_version": 1})
        assert own.status_code == 403 and own.json()["error"]["code"] == "self_approval"

        unknown = await api.post(url, headers=as_("tok-ana"), json={
            "decision": "approve", "draft_version": 1, "selections": {"variant": "int2"}})
        assert unknown.status_code == 422 and "int2" in unknown.json()["error"]["message"]

        not_approver = await api.post(url, headers=as_("tok-olga"), json={"decision": "approve", "draft_version": 1})
        assert not_approver.status_code == 403

        # The validator refused all of them before anything reached the history.
        assert await _update_events(handle) == 0

        r = await api.post(url, headers=as_("tok-ana"), json={
            "decision": "reject", "comment": "wait for the instruct checkpoint", "draft_version": 1})
        assert r.status_code == 200 and r.json()["stage"] == "rejected"
        outcome = await handle.result()
        assert outcome.decision.comment == "wait for the instruct checkpoint"
        assert await pg_pool.fetchval("select state from artifacts where id = $1", reg["id"]) == "rejected"
        if RECORD:
            save_history("artifact_rejected", handle.id, await history_json(handle))


async def test_signals_decide_and_refusals_are_recorded(api, deps, temporal_client, pg_pool):
    from wingsmith.domain.review import ReviewSignal
    async with running_worker(temporal_client, deps):
        reg = await _register(api, source="hf:openai/gpt-oss-120b")
        await _draft(api, reg["id"])
        handle = artifact_handle(temporal_client, reg["id"])

        await handle.signal(ArtifactWorkflow.approve, ReviewSignal(reviewer="olga", draft_version=1))  # own draft
        # The registrant's name however spelled: case, spaces, compatibility forms (NFKC).
        for spelling in ("Olga", "olga ", " OLGA", "\uff4f\uff4c\uff47\uff41"):
            await handle.signal(ArtifactWorkflow.approve, ReviewSignal(reviewer=spelling, draft_version=1))
        # A name that is no approver of the plane (olga's own operator role does not count either).
        await handle.signal(ArtifactWorkflow.approve, ReviewSignal(reviewer="mallory", draft_version=1))
        await handle.signal(ArtifactWorkflow.approve, ReviewSignal(reviewer="ana", draft_version=7))   # stale

        async def refused():
            status = await handle.query(ArtifactWorkflow.status)
            return status if len(status.refused) == 7 else None
        status = await wait_until(refused, what="seven refused signals")
        assert [r.kind for r in status.refused] == ["SelfApproval"] * 5 + ["UnknownReviewer", "StaleDraftVersion"]
        assert status.refused[1].reviewer == "Olga (via Temporal)"  # the claimed name, as claimed
        assert status.stage == "draft"

        await handle.signal(ArtifactWorkflow.approve, ReviewSignal(reviewer="ana", comment="from the UI"))
        outcome = await handle.result()
        assert outcome.stage == "approved"
        assert outcome.decision.via == "signal" and outcome.decision.reviewer == "ana (via Temporal)"
        refusals = await pg_pool.fetch(
            "select actor, detail from events where subject = $1 and kind = 'decision_refused'", reg["id"])
        assert len(refusals) == 7
        if RECORD:
            save_history("artifact_signals", handle.id, await history_json(handle))


async def test_unknown_repo_and_bad_source_start_nothing(api, temporal_client):
    r = await api.post("/v1/artifacts", json={"source": "hf:nobody/nothing-here"}, headers=as_("tok-olga"))
    assert r.status_code == 404
    r = await api.post("/v1/artifacts", json={"source": "hf:not a slug"}, headers=as_("tok-olga"))
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_source"
    r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"}, headers=as_("tok-vic"))
    assert r.status_code == 403
    r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"})
    assert r.status_code == 401
