"""A draft the watch opens (a new upstream commit) is wired like a registered one: it reads the fleet's cards on
the kube queue and asks the perf queue for its estimates (queued until a perf worker takes them, as any
draft's: tests/perf/test_draft_performance_proof.py shows such asks answered). Real Temporal, Postgres and
the offline Hub; no perf worker, so nothing is searched here."""

from __future__ import annotations

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.artifact import ArtifactWorkflowInput
from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id
from contracts.ids import artifact_workflow_id
from contracts.perf import ACTIVITY_ESTIMATE
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.support import running_worker, wait_until
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import get_settings, perf_task_queue
from wingsmith.domain.draft_performance import NOT_INSTALLED

REPO = "openai/gpt-oss-20b"


async def _started_with(client, workflow_id: str, kind: type):
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        (params,) = await pydantic_data_converter.decode(
            event.workflow_execution_started_event_attributes.input.payloads, [kind])
        return params
    raise AssertionError(f"{workflow_id} has no history")


async def _draft_of(api, artifact: str, until=lambda got: True) -> dict:  # noqa: F811
    async def drafted():
        got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
        return got if got.get("draft") and until(got) else None
    return await wait_until(drafted, timeout=60, what=f"the draft of {artifact}")


async def test_a_draft_the_watch_opens_reads_the_fleet_and_asks_for_estimates_like_any_draft(
        api, deps, settings, temporal_client, hub, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": f"hf:{REPO}"}, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        approved = await _draft_of(api, r.json()["id"], until=lambda got: got["state"] == "draft")
        r = await api.post(f"/v1/artifacts/{approved['id']}/review", headers=as_("tok-ana"),
                           json={"decision": "approve", "draft_version": approved["draft"]["version"]})
        assert r.status_code == 200, r.text
        registered = await _started_with(temporal_client, artifact_workflow_id(REPO, approved["sha"]),
                                         ArtifactWorkflowInput)
        assert registered.kube_task_queue == settings.kube_task_queue

        async def watched():
            listed = (await api.get("/v1/watches", headers=as_("tok-vic"))).json()["watches"]
            return any(w["id"] == f"watch/{REPO}@main" for w in listed)
        await wait_until(watched, what="the watch schedule")

        # Upstream moves; the watch opens a new draft.
        monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", hub.url)
        get_settings.cache_clear()
        args = build_parser().parse_args(["hub", "commit", REPO, "--set", "max_position_embeddings=65536"])
        assert args.func(args) == 0
        new_sha = capsys.readouterr().out.strip()
        get_settings.cache_clear()
        r = await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        opened = await _draft_of(api, f"{REPO}@{new_sha}",
                                 until=lambda got: got["draft"]["performance_status"] != "pending")

        by_watch = await _started_with(temporal_client, artifact_workflow_id(REPO, new_sha), ArtifactWorkflowInput)
        assert by_watch.requested_by == f"watch {REPO}@main"
        assert by_watch.kube_task_queue == registered.kube_task_queue, "the fleet's cards are read as for any draft"

        estimates = performance_workflow_id(artifact_workflow_id(REPO, new_sha), opened["draft"]["version"])
        asked = await _started_with(temporal_client, estimates, DraftPerformanceInput)
        assert asked.perf_task_queue == perf_task_queue(settings.task_queue)
        assert asked.requests and {r.model_commit for r in asked.requests} == {new_sha}
        handle = temporal_client.get_workflow_handle(estimates)

        async def queued():
            pending = (await handle.describe()).raw_description.pending_activities
            return pending[0] if pending else None
        ask = await wait_until(queued, what="the watch draft's estimate queued on the perf queue")
        assert ask.activity_type.name == ACTIVITY_ESTIMATE
        assert opened["draft"]["performance_reason"].startswith(NOT_INSTALLED)
        for workflow_id in (estimates, performance_workflow_id(artifact_workflow_id(REPO, approved["sha"]), 1)):
            await temporal_client.get_workflow_handle(workflow_id).terminate("the test has seen it queued")
