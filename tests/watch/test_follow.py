"""`follow: manual|auto` on the real dev server and Postgres: approving a watch's draft sends the
`upgrade` update (id `follow:<new artifact>`) to each live `follow: auto` workload of the branch, records
a refusal without retrying it, and tells `manual` workloads by an event. The workloads here are stand-in
workflows exposing an `upgrade` update of the real name and types, on their own task queue."""

from __future__ import annotations

import os
import random
import re
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.follow import UPGRADE_UPDATE, follow_update_id
from contracts.ids import artifact_workflow_id_of, workload_workflow_id
from contracts.upgrade import UpgradeRequest, UpgradeStatus
from tests.artifacts.conftest import HF_TOKEN, HF_TOKEN_ENV, TOKENS, api, as_, deps, hub  # noqa: F401
from tests.conftest import unique_queue
from tests.console.conftest import sign_in
from tests.support import history_json, running_worker, save_history, wait_until
from tests.watch.test_watch import _approve, _register_and_approve
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.adapters.store import workloads as workloads_store
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import Settings, get_settings
from wingsmith.domain.workloads import WorkloadRequest, approved_artifact_from_row, plan_workload

REPO = "openai/gpt-oss-20b"


@workflow.defn(name="FollowStandInWorkload")
class StandInWorkload:
    """Takes `upgrade` as the real workload workflow does (same update name and types); refuses it in
    its validator when started with a reason to."""

    @workflow.init
    def __init__(self, refusal: str) -> None:
        self.received: list[UpgradeRequest] = []
        self.refusal = refusal or None
        self.done = False

    @workflow.run
    async def run(self, refusal: str) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update(name=UPGRADE_UPDATE)
    async def upgrade(self, request: UpgradeRequest) -> UpgradeStatus:
        self.received.append(request)
        return UpgradeStatus(upgrade_id=workflow.current_update_info().id, workload_id=workflow.info().workflow_id,
                             from_artifact_id="old", to_artifact_id=request.artifact_id, state="running",
                             requested_by=request.requested_by)

    @upgrade.validator
    def _check(self, request: UpgradeRequest) -> None:
        if self.refusal:
            raise ApplicationError(self.refusal, type="UpgradeRefused", non_retryable=True)

    @workflow.query
    def requests(self) -> list[UpgradeRequest]:
        return self.received

    @workflow.signal
    def finish(self) -> None:
        self.done = True


@pytest.fixture
def settings(hub, tmp_path, monkeypatch) -> Settings:  # noqa: F811
    import json
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV,
                    task_queue=unique_queue("follow"), auth_tokens=json.dumps(TOKENS), log_format="json")


async def _workload(pg_pool, workload_id: str, artifact_id: str, follow: str | None, state: str = "serving") -> None:
    """The registry row a workload's workflow writes: its plan, made by the planner from the approved draft."""
    artifact = approved_artifact_from_row(await workloads_store.approved_artifact(pg_pool, artifact_id))
    plan = plan_workload(WorkloadRequest(artifact_id=artifact_id, name=workload_id, hardware="h200",
                                         follow=follow or "manual"), artifact, load_catalog(),
                         image="vllm-runtime:test", namespace="default", hf_token_secret=None)
    spec = plan.model_dump(mode="json")
    if follow is None:
        del spec["follow"]  # a plan written before follow existed
    await workloads_store.upsert_workload(pg_pool, workload_id=workload_id, artifact_id=artifact_id, spec=spec,
                                          state=state, workflow_id=workload_workflow_id(workload_id),
                                          requested_by="olga", step="created")


def _kinds(row: dict) -> list[str]:
    return [e["kind"] for e in row["events"]]


async def test_approval_upgrades_auto_followers_and_tells_manual_ones(
        api, deps, temporal_client, hub, pg_pool, monkeypatch, capsys):  # noqa: F811
    stand_in_queue = unique_queue("standin")
    async with running_worker(temporal_client, deps), Worker(
            temporal_client, task_queue=stand_in_queue, workflows=[StandInWorkload],
            workflow_runner=UnsandboxedWorkflowRunner()):
        old = (await _register_and_approve(api, f"hf:{REPO}"))["id"]
        await _workload(pg_pool, "w-auto", old, "auto")
        await _workload(pg_pool, "w-manual", old, None)
        await _workload(pg_pool, "w-refuses", old, "auto")
        await _workload(pg_pool, "w-later", old, "manual")
        await _workload(pg_pool, "w-gone", old, "auto", state="deleted")
        handles = {}
        for wid, refusal in (("w-auto", ""), ("w-refuses", "an upgrade is already running"), ("w-later", "")):
            handles[wid] = await temporal_client.start_workflow(
                StandInWorkload.run, refusal, id=workload_workflow_id(wid), task_queue=stand_in_queue,
                execution_timeout=timedelta(minutes=10))

        # The follow policy is shown, and can be changed later by an operator (validated).
        got = (await api.get("/v1/workloads/w-manual", headers=as_("tok-vic"))).json()
        assert got["follow"] == "manual", got
        r = await api.patch("/v1/workloads/w-later/follow", json={"follow": "auto"}, headers=as_("tok-olga"))
        assert r.status_code == 200 and r.json() == {"workload_id": "w-later", "follow": "auto", "set_by": "olga"}
        assert (await api.get("/v1/workloads/w-later", headers=as_("tok-vic"))).json()["follow"] == "auto"
        r = await api.patch("/v1/workloads/w-later/follow", json={"follow": "sometimes"}, headers=as_("tok-olga"))
        assert r.status_code == 422 and set(r.json()["error"]) >= {"code", "message"}, r.text
        r = await api.patch("/v1/workloads/nobody/follow", json={"follow": "auto"}, headers=as_("tok-olga"))
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
        r = await api.patch("/v1/workloads/w-gone/follow", json={"follow": "auto"}, headers=as_("tok-olga"))
        assert r.status_code == 409 and r.json()["error"]["code"] == "workload_not_live", r.text
        r = await api.patch("/v1/workloads/w-auto/follow", json={"follow": "auto"}, headers=as_("tok-vic"))
        assert r.status_code == 403
        await sign_in(api, "tok-vic")
        page = (await api.get("/console/workloads/w-later")).text
        assert re.search(r'<tr id="follow"><th>Follow</th><td>auto ', page), page

        # Upstream moves; the watch opens a draft; a person approves it.
        monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", hub.url)
        get_settings.cache_clear()
        args = build_parser().parse_args(["hub", "commit", REPO, "--set",
                                          f"max_position_embeddings={random.randint(70_000, 90_000)}"])
        assert args.func(args) == 0
        new_sha = capsys.readouterr().out.strip()
        get_settings.cache_clear()
        r = await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        new = f"{REPO}@{new_sha}"
        await _approve(api, new)  # ana approves

        async def told(wid: str, kind: str):
            row = await workloads_store.get_workload(pg_pool, wid)
            return row if kind in _kinds(row) else None
        auto = await wait_until(lambda: told("w-auto", "follow_upgrade_started"), timeout=60, what="w-auto's upgrade")
        event = next(e for e in auto["events"] if e["kind"] == "follow_upgrade_started")
        assert event["actor"] == "ana" and event["detail"]["to"] == new and event["detail"]["from"] == old
        requests = await handles["w-auto"].query(StandInWorkload.requests)
        assert [(q.artifact_id, q.requested_by, q.reason) for q in requests] == [
            (new, "ana", f"follow: auto after approval of {new}")]
        await wait_until(lambda: told("w-later", "follow_upgrade_started"), timeout=20, what="the patched workload")
        manual = await wait_until(lambda: told("w-manual", "newer_version_approved"), timeout=20, what="w-manual")
        assert next(e for e in manual["events"] if e["kind"] == "newer_version_approved")["detail"]["to"] == new
        refused = await wait_until(lambda: told("w-refuses", "follow_upgrade_refused"), timeout=20, what="a refusal")
        reason = next(e for e in refused["events"] if e["kind"] == "follow_upgrade_refused")["detail"]["reason"]
        assert reason == "an upgrade is already running"
        assert await handles["w-refuses"].query(StandInWorkload.requests) == []
        gone = await workloads_store.get_workload(pg_pool, "w-gone")
        assert not {"follow_upgrade_started", "follow_upgrade_refused"} & set(_kinds(gone))

        # The update id makes a repeat a no-op: the workload holds one upgrade for this approval.
        again = await handles["w-auto"].start_update(UPGRADE_UPDATE, UpgradeRequest(artifact_id=new),
                                                     id=follow_update_id(new),
                                                     wait_for_stage=WorkflowUpdateStage.COMPLETED)
        assert again.id == follow_update_id(new)
        assert len(await handles["w-auto"].query(StandInWorkload.requests)) == 1
        for handle in handles.values():
            await handle.signal(StandInWorkload.finish)
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            approval = temporal_client.get_workflow_handle(artifact_workflow_id_of(new))
            save_history("artifact_approved_with_followers", approval.id, await history_json(approval))


def test_an_upgrade_keeps_the_follow_policy():
    """The new version's plan is made from the old one's request: a workload that follows keeps following."""
    from activities.upgrade import upgrade_request_of
    from tests.workloads.test_plan import KIMI_K3, _artifact, _plan
    plan = _plan(_artifact(*KIMI_K3), hardware="gb200", layout="multi_node_tp_dp", follow="auto")
    assert upgrade_request_of(plan, UpgradeRequest(artifact_id=plan.artifact_id)).follow == "auto"
