"""Determinism guard: every committed history in tests/histories/ replays against today's workflow
code. A change to a workflow's command sequence without `workflow.patched` fails here.
Refresh the recordings with `WINGSMITH_RECORD_HISTORIES=1 scripts/test.sh tests/artifacts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from worker.registry import workflows

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed():
    names = {p.stem for p in HISTORIES}
    assert {"artifact_approved", "artifact_rejected", "artifact_signals", "workload_scale_delete", "cluster_rollout",
            "endpoint_drain_delete"} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path):
    recorded = json.loads(path.read_text())
    history = WorkflowHistory.from_json(recorded["workflow_id"], recorded["history"])
    replayer = Replayer(workflows=workflows(), data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
