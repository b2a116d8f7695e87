"""An endpoint's model cannot be swapped: every workload of a new list must serve the Hugging Face
repository the endpoint serves, whether or not one of its workloads stays, and whatever served model
name the workload was given (a label its creator picks, not evidence of the model)."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from contracts.endpoint import SetWorkloads
from tests.support import running_worker, wait_until
from tests.workloads.conftest import as_
from workflows.endpoint import EndpointWorkflow

OTHER = "openai/gpt-oss-20b"


async def _approve(api, repo: str) -> str:
    r = await api.post("/v1/artifacts", json={"source": f"hf:{repo}"}, headers=as_("tok-olga"))
    assert r.status_code in (200, 201, 202), r.text
    artifact = r.json()["id"]

    async def draft():
        got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
        return got.get("state") in ("draft", "approved")
    await wait_until(draft, timeout=60, what=f"the {repo} draft")
    await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                   json={"decision": "approve", "draft_version": 1})
    return artifact


async def test_a_patch_cannot_swap_the_model_behind_an_endpoint(api, deps, temporal_client, clusters, approved_kimi,
                                                                gateway, pg_pool):
    async with running_worker(temporal_client, deps):
        other = await _approve(api, OTHER)
        workloads = {"swap-kimi": (approved_kimi, "kimi-k3", "multi_node_tp_dp"),
                     "swap-oss": (other, "gpt-oss-20b", "single_node_tp"),
                     # Another model under the endpoint's name: the served name proves nothing.
                     "swap-oss-named": (other, "kimi-k3", "single_node_tp")}
        for name, (artifact, served, layout) in workloads.items():
            r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
                "artifact_id": artifact, "hardware": "h200", "layout": layout, "replicas": 1, "name": name,
                "served_model_name": served})
            assert r.status_code == 202, r.text

        async def recorded():
            rows = await pg_pool.fetch("select id from workloads where id = any($1::text[])", list(workloads))
            return len(rows) == len(workloads)
        await wait_until(recorded, timeout=30, what="the workloads in the registry")

        # One endpoint serves one model: a mixed list is refused at creation.
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"),
                           json={"name": "kimi-k3", "workloads": ["swap-kimi", "swap-oss"]})
        assert r.status_code == 422 and "serve different models" in r.json()["error"]["message"], r.text
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"),
                           json={"name": "kimi-k3", "workloads": ["swap-kimi"]})
        assert r.status_code == 202, r.text

        # The swap of the issue: no workload of the old list stays, and the new one serves another model.
        for wanted in (["swap-oss"], ["swap-oss-named"], ["swap-kimi", "swap-oss"]):
            r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": wanted})
            assert r.status_code == 422, (wanted, r.text)
            error = r.json()["error"]
            assert error["code"] == "invalid_endpoint", error
            assert "serves moonshotai/kimi-k3" in error["message"] and "openai/gpt-oss-20b" in error["message"], error
        # The workflow checks too, for a change sent past the API (the Temporal UI, a script).
        handle = temporal_client.get_workflow_handle_for(EndpointWorkflow.run, "endpoint/kimi-k3")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(EndpointWorkflow.set_workloads, SetWorkloads(workloads=["swap-oss-named"]))
        assert isinstance(refused.value.cause, ApplicationError) and refused.value.cause.type == "InvalidWorkloads"
        assert "must serve that model" in refused.value.cause.message
        status = await temporal_client.get_workflow_handle("endpoint/kimi-k3").query("status")
        assert status["workloads"] == ["swap-kimi"] and status["model"] == "moonshotai/kimi-k3", status

        r = await api.delete("/v1/endpoints/kimi-k3", headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        await temporal_client.get_workflow_handle("endpoint/kimi-k3").result()
        # Deleting: a change is refused with why, not acknowledged (the workflow is gone too: still 409/404).
        r = await api.patch("/v1/endpoints/kimi-k3", headers=as_("tok-olga"), json={"workloads": ["swap-kimi"]})
        assert r.status_code == 409 and "being deleted" in r.json()["error"]["message"], r.text
        for name in workloads:
            assert (await api.delete(f"/v1/workloads/{name}", headers=as_("tok-olga"))).status_code == 202
