"""Registering a slug whose branch now points at another commit makes a new artifact and marks the
older one superseded; the older draft stops waiting and can no longer be approved."""

from __future__ import annotations

from tests.artifacts.conftest import as_
from tests.support import running_worker, wait_until
from wingsmith.adapters.starter import artifact_handle
from workflows.artifact import ArtifactWorkflow

NEW_SHA = "1111111111111111111111111111111111111111"


async def test_a_new_commit_on_the_branch_supersedes_the_older_draft(api, deps, temporal_client, pg_pool, hub):
    async with running_worker(temporal_client, deps):
        first = (await api.post("/v1/artifacts", json={"source": "hf:Qwen/Qwen3-8B"}, headers=as_("tok-olga"))).json()
        old = artifact_handle(temporal_client, first["id"])

        async def drafted(handle):
            return (await handle.query(ArtifactWorkflow.status)).stage == "draft"
        await wait_until(lambda: drafted(old), what="the first draft")

        hub.move_branch("Qwen/Qwen3-8B", NEW_SHA)
        second = (await api.post("/v1/artifacts", json={"source": "hf:Qwen/Qwen3-8B"}, headers=as_("tok-olga"))).json()
        assert second["sha"] == NEW_SHA and second["id"] != first["id"] and second["started"] is True
        await wait_until(lambda: drafted(artifact_handle(temporal_client, second["id"])), what="the second draft")

        outcome = await old.result()
        assert outcome.stage == "superseded"
        row = await pg_pool.fetchrow("select state, superseded_by from artifacts where id = $1", first["id"])
        assert dict(row) == {"state": "superseded", "superseded_by": second["id"]}
        r = await api.post(f"/v1/artifacts/{first['id']}/review", headers=as_("tok-ana"),
                           json={"decision": "approve", "draft_version": 1})
        assert r.status_code == 409
