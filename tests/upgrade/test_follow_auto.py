"""`follow: auto` against the real upgrade: a workload created with `follow: auto` serves; upstream moves,
the watch opens a draft and a person approves it; the approval alone starts the workload's progressive
upgrade (the real `WorkloadWorkflow.upgrade`), sent as update `follow:<new artifact>` by the approver."""

from __future__ import annotations

from tests.support import running_worker, wait_until
from tests.upgrade.test_upgrade_journey import _new_commit
from tests.watch.test_watch import REPO, WATCH, _approve, _register_and_approve
from tests.workloads.conftest import as_
from tests.workloads.test_workload_journey import _until_stage

WORKLOAD = "gpt-follows"


async def test_approval_starts_the_upgrade_of_a_following_workload(
        api, deps, temporal_client, clusters, hub, pg_pool, monkeypatch, capsys):  # noqa: F811
    async with running_worker(temporal_client, deps):
        approved = await _register_and_approve(api, f"hf:{REPO}")
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": approved["id"], "hardware": "h200", "replicas": 1, "name": WORKLOAD, "follow": "auto",
            "constraints": {"allowed_clusters": ["sim-east"]}})
        assert r.status_code == 202 and r.json()["plan"]["follow"] == "auto", r.text
        await _until_stage(api, WORKLOAD, {"serving"})

        seen = {a.action.first_execution_run_id
                for a in (await temporal_client.get_schedule_handle(WATCH).describe()).info.recent_actions}
        new_id = await _new_commit(api, temporal_client, hub, monkeypatch, capsys, seen,
                                   "max_position_embeddings=70000")
        await _approve(api, new_id)  # ana approves; nobody asks for the upgrade

        async def upgrading():
            got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
            return got if (got.get("upgrade") or {}).get("to_artifact_id") == new_id else None
        got = await wait_until(upgrading, timeout=60, what="the upgrade that following starts")
        up = got["upgrade"]
        assert up["update_id"] == f"follow:{new_id}" and up["requested_by"] == "ana", up
        assert up["from_artifact_id"] == approved["id"] and up["state"] in ("running", "paused", "succeeded"), up
        # The follow activity records its event once the workload accepted the update, which can be a
        # moment after the upgrade already shows.

        async def told():
            events = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()["events"]
            return [e for e in events if e["kind"] == "follow_upgrade_started"]
        started = await wait_until(told, timeout=20, what="the follow_upgrade_started event")
        assert [(e["actor"], e["detail"]["to"]) for e in started] == [("ana", new_id)], started
        r = await api.post(f"/v1/workloads/{WORKLOAD}/upgrade/abort", headers=as_("tok-olga"), json={})
        assert r.status_code in (200, 202, 409), r.text  # 409: it ended already
