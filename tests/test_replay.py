"""Determinism guard: every committed history in tests/histories/ replays against today's workflow
code, so a change to a workflow's command sequence fails here. Before the first release there is no
`workflow.patched`: re-record (docs/testing.md, "Changing a workflow"). The recorders are the journeys in
tests/artifacts, tests/workloads, tests/endpoints, tests/watch and tests/upgrade:
`WINGSMITH_RECORD_HISTORIES=1 .venv/bin/python -m pytest tests/artifacts tests/workloads tests/endpoints tests/watch
tests/upgrade`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from worker.registry import workflows
from worker.sandbox import WORKFLOW_RUNNER

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed():
    names = {p.stem for p in HISTORIES}
    assert {"artifact_approved", "artifact_rejected", "artifact_signals", "workload_scale_delete", "cluster_rollout",
            "endpoint_scale_down_and_delete", "workload_drained_scale_down", "workload_delete_retried",
            "workload_failed_cluster_removed", "live_inventory", "workload_healed_missing_dgd",
            "endpoint_set_workloads", "watch_opened_draft", "workload_upgraded_then_rolled_back",
            "watch_opened_catalog_draft", "artifact_approved_with_followers",
            "workload_scaling_failed_kept_serving"} <= names


def test_no_version_markers_before_the_first_release():
    """Nothing is patched before the first release, so no recorded history carries a patch marker."""
    workflow_sources = (Path(__file__).parent.parent / "workflows").rglob("*.py")
    assert not [p.name for p in workflow_sources if "workflow.patched" in p.read_text()]
    assert not [p.name for p in HISTORIES if "core_patch" in p.read_text()]


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path):
    recorded = json.loads(await asyncio.to_thread(path.read_text))
    history = WorkflowHistory.from_json(recorded["workflow_id"], recorded["history"])
    replayer = Replayer(workflows=workflows(), data_converter=pydantic_data_converter, workflow_runner=WORKFLOW_RUNNER)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
