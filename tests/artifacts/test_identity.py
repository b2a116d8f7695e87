"""One identity per model: the Hub answers any spelling of a repo id with its canonical one, and the
plane names artifacts and workflows by that, so a differently-cased source can neither bypass a
rejection nor supersede an approval."""

from __future__ import annotations

from huggingface_hub import HfApi

from tests.artifacts.conftest import as_
from tests.support import running_worker, wait_until
from wingsmith.adapters.starter import artifact_handle
from workflows.artifact import ArtifactWorkflow


async def _register(api, source: str) -> dict:
    r = await api.post("/v1/artifacts", json={"source": source}, headers=as_("tok-olga"))
    assert r.status_code == 202, r.text
    return r.json()


async def _decide(api, temporal_client, artifact: str, decision: str) -> None:
    handle = artifact_handle(temporal_client, artifact)

    async def drafted():
        return (await handle.query(ArtifactWorkflow.status)).stage == "draft"
    await wait_until(drafted, what=f"the draft of {artifact}")
    r = await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                       json={"decision": decision, "draft_version": 1})
    assert r.status_code == 200, r.text
    await handle.result()


def test_the_offline_hub_answers_any_spelling_with_the_canonical_id(hub):
    info = HfApi(endpoint=hub.url, token=False).model_info("OPENAI/GPT-OSS-20b")
    assert info.id == "openai/gpt-oss-20b"


async def test_a_rejection_cannot_be_bypassed_by_another_spelling(api, deps, temporal_client, pg_pool):
    async with running_worker(temporal_client, deps):
        first = await _register(api, "hf:moonshotai/Kimi-K2-Instruct")
        await _decide(api, temporal_client, first["id"], "reject")

        again = await _register(api, f"hf:MOONSHOTAI/kimi-k2-instruct@{first['sha']}")
        assert again["id"] == first["id"] and again["started"] is False
        assert again["workflow_id"] == f"artifact/{first['id']}"
        rows = await pg_pool.fetch("select id, state from artifacts where sha = $1", first["sha"])
        assert [dict(r) for r in rows] == [{"id": first["id"], "state": "rejected"}]


async def test_another_spelling_at_the_same_commit_does_not_supersede_an_approval(api, deps, temporal_client,
                                                                                  pg_pool):
    async with running_worker(temporal_client, deps):
        first = await _register(api, "hf:openai/gpt-oss-20b")
        assert first["id"].startswith("openai/gpt-oss-20b@")
        await _decide(api, temporal_client, first["id"], "approve")

        again = await _register(api, "hf:OpenAI/GPT-OSS-20b")
        assert again["id"] == first["id"] and again["started"] is False
        row = await pg_pool.fetchrow("select state, superseded_by from artifacts where id = $1", first["id"])
        assert dict(row) == {"state": "approved", "superseded_by": None}

        # A workload may name it in any spelling too; its plan carries the canonical id.
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": first["id"].replace("openai/gpt-oss-20b", "OpenAI/GPT-OSS-20b"), "hardware": "h200",
            "dry_run": True})
        assert r.status_code == 202, r.text
        assert r.json()["plan"]["artifact_id"] == first["id"]


async def test_a_decision_made_under_an_old_spelling_stands(api, pg_pool, hub):
    # A row an earlier version of the plane wrote under the spelling the user typed.
    sha = HfApi(endpoint=hub.url, token=False).model_info("meta-llama/Llama-3.1-8B").sha
    legacy = f"META-LLAMA/llama-3.1-8b@{sha}"
    await pg_pool.execute(
        """insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by)
           values ($1, 'META-LLAMA/llama-3.1-8b', 'main', $2, 'rejected', $3, 'olga')""",
        legacy, sha, f"artifact/{legacy}")
    again = await _register(api, "hf:meta-llama/Llama-3.1-8B")
    assert again["id"] == legacy and again["started"] is False


async def test_a_new_commit_never_supersedes_a_decided_artifact(api, deps, temporal_client, pg_pool, hub):
    async with running_worker(temporal_client, deps):
        first = await _register(api, "hf:deepseek-ai/DeepSeek-R1")
        await _decide(api, temporal_client, first["id"], "approve")
        hub.move_branch("deepseek-ai/DeepSeek-R1", "2" * 40)
        second = await _register(api, "hf:deepseek-ai/DeepSeek-R1")
        assert second["sha"] == "2" * 40 and second["started"] is True
        await wait_until(lambda: _state(pg_pool, second["id"], "draft"), what="the newer draft")
        row = await pg_pool.fetchrow("select state, superseded_by from artifacts where id = $1", first["id"])
        assert dict(row) == {"state": "approved", "superseded_by": None}


async def _state(pg_pool, artifact: str, state: str) -> bool:
    return await pg_pool.fetchval("select state from artifacts where id = $1", artifact) == state
