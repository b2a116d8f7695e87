"""An upstream config.json above 2 MB used to make the draft's workflow retry forever (the activity's
result exceeded Temporal's payload limit: PayloadsTooLarge, attempt 12 of ∞). Now the Hub resolver
refuses it at the source and the draft fails at once, naming the file, its size and the limit; and
should big data get past a source check, the plane's data converter refuses the payload without retry.

The offline Hub serves a real 3.1 MB config.json (a new commit on its branch, as a push would make)
to the real huggingface_hub client, and a real worker runs the real ArtifactWorkflow."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import Client, WorkflowFailureError

from tests.artifacts.conftest import as_
from tests.support import running_worker
from wingsmith.adapters.codec import data_converter
from wingsmith.adapters.hub.resolver import Resolver
from wingsmith.adapters.payloads import MB
from wingsmith.adapters.starter import register_artifact

REPO = "Qwen/Qwen3-8B"


@pytest.fixture
def big_config_sha(hub) -> str:
    """A commit whose config.json is 3.1 MB (a bloated but valid JSON object)."""
    sha = hub.state.commit(REPO, {"wingsmith_test_padding": "x" * 3_100_000})
    response_size = next(f["size"] for f in hub.state.lookup(REPO)["files"] if f["path"] == "config.json")
    assert 3_100_000 < response_size < 3_150_000
    return sha


async def test_an_oversized_config_is_refused_at_registration(api, big_config_sha):
    r = await api.post("/v1/artifacts", json={"source": f"hf:{REPO}@{big_config_sha}"}, headers=as_("tok-olga"))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "hub_file_too_large"
    assert error["message"] == f"{REPO}@{big_config_sha}: config.json is 3.1 MB; the limit is 1 MB", error


async def test_a_draft_with_an_oversized_config_fails_at_once_instead_of_retrying(settings, deps, temporal_client,
                                                                                  big_config_sha):
    # As a watch opens a draft: no API in front to refuse it first.
    async with running_worker(temporal_client, deps):
        started = await register_artifact(temporal_client, settings, source=f"hf:{REPO}", sha=big_config_sha,
                                          requested_by="olga")
        began = time.monotonic()
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(temporal_client.get_workflow_handle(started.workflow_id).result(), 30)
    assert time.monotonic() - began < 20
    assert f"HubFileTooLarge: {REPO}@{big_config_sha}: config.json is 3.1 MB; the limit is 1 MB" \
        in str(failed.value.cause)


async def test_past_the_source_check_the_payload_budget_still_ends_the_draft(settings, deps, temporal_client,
                                                                              big_config_sha, tmp_path):
    """A resolver without the file limit (a source check forgotten): the activity's 3.1 MB result is
    refused by the plane's data converter, non-retryable, so the draft fails with what and how big."""
    client = Client(**{**temporal_client.config(), "data_converter": data_converter(settings)})
    deps.extras["resolver"] = Resolver(settings.hf_endpoint, settings.hf_token_ref, tmp_path / "hf-cache",
                                       max_file_bytes=10 * MB)
    async with running_worker(client, deps):
        started = await register_artifact(client, settings, source=f"hf:{REPO}", sha=big_config_sha,
                                          requested_by="olga")
        began = time.monotonic()
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(client.get_workflow_handle(started.workflow_id).result(), 30)
    assert time.monotonic() - began < 20
    message = str(failed.value.cause)
    assert "PayloadTooLarge: the result of activity resolve_artifact" in message, message
    assert "is 3.1 MB; the limit is 1.5 MB" in message, message
    state = await deps.db.fetchval("select state from artifacts where workflow_id = $1", started.workflow_id)
    assert state == "failed"
