"""The upgrade's planning activity (`upgrade.plan`, activities/upgrade.py) for workloads sized from a
traffic target, against the registry in a real Postgres: the new artifact runs the configuration
AIConfigurator chose (the fixture's real answer, tests/perf/fixtures/qwen3-8b-h200-recommend), a
disaggregated one included, with the same card, pools and replicas; an artifact whose recipe cannot run
it, and a change of layout, are refused with the reason the API returns as a 422. The workflow turns the
activity's refusal into the update's error as for any other upgrade (tests/upgrade/test_upgrade_journey.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.testing import ActivityEnvironment

from activities.upgrade import UpgradeActivities
from contracts.upgrade import ARTIFACT_NOT_UPGRADABLE, INVALID_UPGRADE, PlanUpgradeInput, UpgradeRequest
from tests.perf.test_disaggregated_plan import CARD, MODEL
from tests.perf.test_target_sized_plan import NEW, OLD, artifact, sized_plan, tool_flags
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.adapters.store.artifacts import record_decision, save_draft
from wingsmith.domain.config import Settings
from wingsmith.domain.review import RecordedDecision
from wingsmith.domain.workloads import ApprovedArtifact

BROKEN = "e" * 40  # a version whose recipe marks the workload's card unsupported


async def _approve(pool, approved: ApprovedArtifact) -> None:
    workflow_id = f"artifact/{approved.id}"
    await save_draft(pool, workflow_id=workflow_id, artifact_id=approved.id, repo_id=approved.repo_id,
                     revision=approved.sha, sha=approved.sha, requested_by="olga",
                     proposal={"config": approved.config, "weight_bytes": approved.weight_bytes},
                     version=1, catalog_version=load_catalog().version, evidence=approved.evidence,
                     sizing={"sizing": []}, warnings=[])
    await record_decision(pool, workflow_id=workflow_id, artifact_id=approved.id, decision=RecordedDecision(
        decision="approve", reviewer="ana", via="api", draft_version=1, decided_at=datetime.now(UTC)))


@pytest.fixture
async def registry(pg_pool):
    if await pg_pool.fetchval("select count(*) from artifacts where repo_id = $1", MODEL) == 0:
        for approved in (artifact(OLD), artifact(NEW), artifact(BROKEN, unsupported=CARD)):
            await _approve(pg_pool, approved)
    return pg_pool


async def _plan(registry, tmp_path, current, request: UpgradeRequest):
    activities = UpgradeActivities(Settings(home=tmp_path / "home", log_format="json"), registry)
    return await ActivityEnvironment().run(activities.plan, PlanUpgradeInput(current=current, request=request))


@pytest.mark.parametrize("mode", ["agg", "disagg"])
async def test_the_new_version_runs_the_configuration_the_target_chose(registry, tmp_path, mode):
    current = sized_plan(mode).model_copy(update={"replicas": 14, "revision": 2})  # scaled, upgraded twice
    answer = await _plan(registry, tmp_path, current, UpgradeRequest(artifact_id=f"{MODEL}@{NEW}"))
    new = answer.plan
    assert new is not None, answer.problem
    assert (new.artifact_id, new.revision, new.replicas) == (f"{MODEL}@{NEW}", 3, 14)
    assert (new.hardware, new.layout, new.gpus_per_replica) == (current.hardware, current.layout,
                                                                current.gpus_per_replica)
    assert new.sized_by == current.sized_by
    assert tool_flags(new.worker.args) == tool_flags(current.worker.args)
    if mode == "disagg":
        assert new.layout == "pd_cluster" and new.prefill is not None and current.prefill is not None
        assert tool_flags(new.prefill.args) == tool_flags(current.prefill.args)
        assert new.prefill.workers_per_replica == current.prefill.workers_per_replica
        assert new.worker.workers_per_replica == current.worker.workers_per_replica


async def test_a_version_that_cannot_run_it_is_refused_with_the_reason(registry, tmp_path):
    current = sized_plan("disagg")
    answer = await _plan(registry, tmp_path, current, UpgradeRequest(artifact_id=f"{MODEL}@{BROKEN}"))
    assert answer.plan is None and answer.kind == ARTIFACT_NOT_UPGRADABLE and answer.kind in INVALID_UPGRADE
    assert (answer.problem or "").startswith(f"{MODEL}@{BROKEN} cannot run the configuration this workload was "
                                             f"sized by ({current.sized_by})")


async def test_a_change_of_layout_is_refused(registry, tmp_path):
    current = sized_plan("disagg")
    answer = await _plan(registry, tmp_path, current, UpgradeRequest(artifact_id=f"{MODEL}@{NEW}",
                                                                     layout="multi_node_tp"))
    assert answer.plan is None and answer.kind == ARTIFACT_NOT_UPGRADABLE
    assert "cannot change the layout to multi_node_tp" in (answer.problem or "")


async def test_a_workload_sized_by_replicas_upgrades_as_before(registry, tmp_path):
    from wingsmith.domain.workloads import WorkloadRequest, plan_workload
    current = plan_workload(WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD, replicas=2),
                            artifact(OLD), load_catalog(), image="img", namespace="default", hf_token_secret=None)
    answer = await _plan(registry, tmp_path, current, UpgradeRequest(artifact_id=f"{MODEL}@{NEW}"))
    assert answer.plan is not None and answer.plan.sized_by is None
    assert answer.plan.worker.args == current.worker.args and answer.plan.replicas == 2
