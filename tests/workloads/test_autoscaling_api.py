"""A workload's autoscaling policy through the running API, the real worker and Temporal (issue 53): a wrong
policy is refused in the one error shape and starts nothing; a policy given at creation starts the
workload's autoscaler (`autoscaler/<id>`), whose decisions the API shows with their inputs; another team's
principal does not see them; `PATCH` with `"autoscaling": null` removes the policy and the loop ends."""

from __future__ import annotations

import os

import pytest
from temporalio.client import WorkflowExecutionStatus

from tests.support import history_json, running_worker, save_history, wait_until
from tests.workloads.conftest import as_

NAME = "kimi-scaler"
POLICY = {"min_replicas": 1, "max_replicas": 2, "ttft_p95_ms": 1000, "scale_up_window_s": 30,
          "scale_down_window_s": 60, "cooldown_s": 30}


@pytest.fixture
def settings(settings):  # the test bed's, deciding every second
    return settings.model_copy(update={"autoscaler_period_seconds": 1})


async def test_a_policy_is_checked_shown_with_its_decisions_and_removed(api, deps, temporal_client, clusters,
                                                                         approved_kimi, pg_pool):
    body = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1,
            "name": NAME}
    for wrong, words in (({**POLICY, "min_replicas": 3}, "min_replicas"),
                         ({"min_replicas": 1, "max_replicas": 2}, "target")):
        r = await api.post("/v1/workloads", json={**body, "autoscaling": wrong}, headers=as_("tok-olga"))
        assert r.status_code == 422, r.text
        assert words in r.json()["error"]["message"] + str(r.json()["error"].get("details")), r.text
    assert await pg_pool.fetchval("select count(*) from workloads where id = $1", NAME) == 0

    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json={**body, "autoscaling": POLICY}, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text

        async def decided():
            got = await api.get(f"/v1/workloads/{NAME}/autoscaling", headers=as_("tok-vic"))
            return got.json() if got.status_code == 200 and got.json()["decisions"] else None
        shown = await wait_until(decided, timeout=120, interval=0.5, what="the autoscaler's first decision")
        assert shown["policy"]["max_replicas"] == 2 and shown["policy"]["ttft_p95_ms"] == 1000
        assert shown["workflow_id"] == f"autoscaler/{NAME}"
        newest = shown["decisions"][0]
        # No traffic yet: nothing to add, and one replica is the policy's floor.
        assert newest["action"] == "hold" and newest["replicas_to"] == 1, newest
        assert newest["words"] and newest["inputs"], newest
        loop = temporal_client.get_workflow_handle(shown["workflow_id"])
        assert (await loop.describe()).status == WorkflowExecutionStatus.RUNNING

        r = await api.patch(f"/v1/workloads/{NAME}", json={"autoscaling": {**POLICY, "max_replicas": 0}},
                            headers=as_("tok-olga"))
        assert r.status_code == 422 and r.json()["error"]["code"], r.text

        r = await api.patch(f"/v1/workloads/{NAME}", json={"autoscaling": None}, headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        assert (await api.get(f"/v1/workloads/{NAME}/autoscaling", headers=as_("tok-vic"))).json()["policy"] is None

        async def ended():
            return (await loop.describe()).status == WorkflowExecutionStatus.COMPLETED
        await wait_until(ended, timeout=60, what="the autoscaler to end once its policy is gone")
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            save_history("autoscaler_hold_then_removed", loop.id, await history_json(loop))

        r = await api.delete(f"/v1/workloads/{NAME}", headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
