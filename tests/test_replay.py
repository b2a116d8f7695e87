"""Determinism guard: every committed history replays against today's workflow code.

- tests/histories/*.json: the current recordings (the journeys in tests/artifacts, tests/workloads,
  tests/endpoints, tests/watch and tests/upgrade record them: `WINGSMITH_RECORD_HISTORIES=1 .venv/bin/python -m
  pytest tests/artifacts tests/workloads tests/endpoints tests/watch tests/upgrade`).
- tests/histories/<release>/: the histories of a release, frozen when it was cut (`python -m
  tests.histories.freeze <release>`), byte for byte (their MANIFEST). Runs of that release may still be
  open on a real plane, so these replay until the release is retired: a change to a workflow's commands
  goes behind `workflow.patched` (docs/production.md, "Upgrading the plane"), never a re-recording."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from contracts.inventory import WORKFLOW as LIVE_INVENTORY
from contracts.inventory import LiveInventoryInput, LiveInventoryResult
from tests.histories.freeze import manifest_of
from worker.registry import workflows
from worker.sandbox import WORKFLOW_RUNNER
from workflows.inventory import LiveInventoryWorkflow

ROOT = Path(__file__).parent / "histories"
RELEASES = sorted(p for p in ROOT.iterdir() if p.is_dir() and (p / "MANIFEST").exists())
CURRENT = sorted(ROOT.glob("*.json"))
FROZEN = sorted(p for release in RELEASES for p in release.glob("*.json"))
HISTORIES = CURRENT + FROZEN


def test_histories_are_committed():
    names = {p.stem for p in CURRENT}
    assert {"artifact_approved", "artifact_rejected", "artifact_signals", "workload_scale_delete", "cluster_rollout",
            "endpoint_scale_down_and_delete", "workload_drained_scale_down", "workload_delete_retried",
            "workload_failed_cluster_removed", "live_inventory", "workload_healed_missing_dgd",
            "endpoint_set_workloads", "watch_opened_draft", "workload_upgraded_then_rolled_back",
            "watch_opened_catalog_draft", "artifact_approved_with_followers",
            "workload_scaling_failed_kept_serving", "autoscaler_hold_then_removed"} <= names


def test_the_released_histories_are_frozen():
    """0.1.0's histories are there, and no byte of a frozen history has changed since its release was cut."""
    assert "0.1.0" in {r.name for r in RELEASES}
    for release in RELEASES:
        assert (release / "MANIFEST").read_text() == manifest_of(release), \
            f"{release.name}'s frozen histories changed: guard the workflow change with workflow.patched instead"
    assert {p.name for p in RELEASES[0].glob("*.json")} >= {"artifact_approved.json", "workload_scale_delete.json",
                                                            "endpoint_set_workloads.json", "live_inventory.json"}


def _replay(path: Path, workflow_class: type) -> str | None:
    recorded = json.loads(path.read_text())
    history = WorkflowHistory.from_json(recorded["workflow_id"], recorded["history"])
    replayer = Replayer(workflows=[workflow_class], data_converter=pydantic_data_converter,
                        workflow_runner=UnsandboxedWorkflowRunner())
    failure = asyncio.run(replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
    return None if failure is None else str(failure)


@workflow.defn(name=LIVE_INVENTORY)
class ChangedWithoutAPatch(LiveInventoryWorkflow):
    """A new command before the old ones, as a careless change would add it."""
    @workflow.run
    async def run(self, params: LiveInventoryInput) -> LiveInventoryResult:
        await workflow.sleep(1)
        return await super().run(params)


@workflow.defn(name=LIVE_INVENTORY)
class ChangedBehindAPatch(LiveInventoryWorkflow):
    """The same change behind `workflow.patched`: runs recorded before it take the old path."""
    @workflow.run
    async def run(self, params: LiveInventoryInput) -> LiveInventoryResult:
        if workflow.patched("sleep-before-reading"):
            await workflow.sleep(1)
        return await super().run(params)


def test_a_command_change_fails_a_frozen_history_unless_it_is_patched():
    frozen = ROOT / "0.1.0" / "live_inventory.json"
    assert _replay(frozen, LiveInventoryWorkflow) is None
    failure = _replay(frozen, ChangedWithoutAPatch)
    assert failure is not None and "Nondeterminism" in failure, failure
    assert _replay(frozen, ChangedBehindAPatch) is None


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: str(p.relative_to(ROOT).with_suffix("")))
async def test_history_replays(path: Path):
    recorded = json.loads(await asyncio.to_thread(path.read_text))
    history = WorkflowHistory.from_json(recorded["workflow_id"], recorded["history"])
    replayer = Replayer(workflows=workflows(), data_converter=pydantic_data_converter, workflow_runner=WORKFLOW_RUNNER)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
