"""The fleet page seen by another team (issue 52): a cluster whose 32 GPUs are all used by the red team's
workload showed the blue team "idle: reachable, with no deployments". A viewer sees its own team's
workloads only, so the page says the GPUs are used by workloads it cannot see; the red team sees its own.
Real Postgres; the cluster's inventory is declared (no worker needed to read it)."""

from __future__ import annotations

import json

from api.app import create_app
from api.auth import TokenTable
from tests.console.conftest import browser_for, sign_in
from tests.console.test_public_pages import rows
from wingsmith.adapters.inventory import ManualInventory, ManualPool
from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.clusters import ClusterSpec

TEAMS = {"tok-rita": {"name": "rita", "roles": ["operator"], "team": "red"},
         "tok-bo": {"name": "bo", "roles": ["viewer"], "team": "blue"}}
SPEC = {"engine": "vllm", "hardware": "h200", "layout": "multi_node_tp", "replicas": 2, "variant": "default",
        "features": [], "gpus_per_replica": 16}


async def _seed(pool) -> None:
    full = ManualInventory(pools=[ManualPool(hardware="h200", nodes=4, gpus_per_node=8, free_gpus=0)])
    empty = ManualInventory(pools=[ManualPool(hardware="h200", nodes=1, gpus_per_node=8)])
    await cluster_store.create_cluster(pool, ClusterSpec(name="red-full", kubeconfig="env:KUBECONFIG_RED",
                                                         manual_inventory=full))
    await cluster_store.create_cluster(pool, ClusterSpec(name="spare", kubeconfig="env:KUBECONFIG_SPARE",
                                                         manual_inventory=empty))
    await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                       "values ('org/red@abc', 'org/red', 'main', 'abc', 'approved', 'artifact/org/red@abc', 'rita') "
                       "on conflict do nothing")
    await workload_store.upsert_workload(pool, workload_id="red-kimi", artifact_id="org/red@abc", spec=SPEC,
                                         state="serving", workflow_id="workload/red-kimi", requested_by="rita",
                                         step="t", team="red")
    await workload_store.record_deployment(pool, workload_id="red-kimi", cluster="red-full", dgd_name="red-kimi-dgd",
                                           namespace="ns", replicas=2, state="serving", frontend_url=None,
                                           detail={}, source="workload/red-kimi", step="t")


async def _fleet(app, token: str) -> dict[str, str]:
    async with browser_for(app) as person:
        await sign_in(person, token)
        page = await person.get("/console/clusters")
    assert page.status_code == 200, page.text
    return rows(page.text.split('id="clusters"')[1], "cluster")


async def test_another_teams_gpus_are_not_called_idle(settings, pg_pool):
    await _seed(pg_pool)
    tokens = json.dumps(TEAMS)
    app = create_app(settings.model_copy(update={"auth_tokens": tokens}), tokens=TokenTable.from_json(tokens),
                     db=pg_pool)
    blue = await _fleet(app, "tok-bo")
    assert "red-kimi" not in blue["red-full"], "the blue team does not see the red team's workload"
    assert "idle" not in blue["red-full"], blue["red-full"]
    assert "busy" in blue["red-full"] and \
        "32 of 32 GPUs are used by workloads you cannot see here" in blue["red-full"], blue["red-full"]
    assert "idle" in blue["spare"] and "reachable, with no deployments" in blue["spare"], blue["spare"]
    red = await _fleet(app, "tok-rita")
    assert "red-kimi" in red["red-full"] and "healthy" in red["red-full"], red["red-full"]
