"""examples/start_review.py, run as a user runs it, against the session's Temporal server: it starts
the same workflow the API starts (type, id, task queue, input, search attributes), and a second run
starts nothing new."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey

from contracts.artifact import ArtifactWorkflowInput
from workflows.artifact import ArtifactWorkflow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "start_review.py"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _run(temporal_server, client, home: Path, queue: str) -> dict:
    env = {"PATH": os.environ["PATH"], "WINGSMITH_HOME": str(home), "WINGSMITH_TEMPORAL_UI_PORT": "18233"}
    done = subprocess.run([sys.executable, str(EXAMPLE), "hf:moonshotai/Kimi-K3", "--sha", SHA,
                           "--requested-by", "ana", "--address", temporal_server.address,
                           "--namespace", client.namespace, "--task-queue", queue],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


async def test_the_example_starts_the_artifact_workflow_like_the_api(temporal_server, temporal_client, tmp_path):
    queue = "example-queue"
    first = _run(temporal_server, temporal_client, tmp_path, queue)
    workflow_id = f"artifact/moonshotai/Kimi-K3@{SHA}"
    assert first["workflow_id"] == workflow_id and first["started"] is True
    assert first["workflow_url"].startswith(f"http://localhost:18233/namespaces/{temporal_client.namespace}/")

    handle = temporal_client.get_workflow_handle_for(ArtifactWorkflow.run, workflow_id)
    try:
        desc = await handle.describe()
        assert desc.workflow_type == "ArtifactWorkflow" and desc.task_queue == queue
        assert desc.status == WorkflowExecutionStatus.RUNNING
        attrs = desc.typed_search_attributes
        assert attrs.get(SearchAttributeKey.for_keyword("WingsmithModel")) == "moonshotai/Kimi-K3"
        assert attrs.get(SearchAttributeKey.for_keyword("WingsmithSha")) == SHA
        history = await handle.fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        payload = temporal_client.data_converter.payload_converter.from_payloads(
            started.input.payloads, [ArtifactWorkflowInput])[0]
        assert (payload.repo_id, payload.sha, payload.requested_by) == ("moonshotai/Kimi-K3", SHA, "ana")

        again = _run(temporal_server, temporal_client, tmp_path, queue)
        assert again["workflow_id"] == workflow_id and again["started"] is False
    finally:
        await handle.terminate("test over")
