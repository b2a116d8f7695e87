"""The fleet pages and the model page's links to this plane's objects (issue 37): every cluster with its
cards, GPUs used and free drawn and tabled, region
and labels escaped, its workloads and its health as the watch recorded it; one cluster's deployments.
Real Postgres and Temporal; a cluster with a declared inventory, and one whose live read no worker answers."""

from __future__ import annotations

import re
from html import unescape

from console.words import card_name
from tests.console.conftest import browser_for, sign_in
from tests.console.test_public_pages import rows
from wingsmith.adapters.inventory import ManualInventory, ManualPool
from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.clusters import ClusterSpec

SPEC = {"engine": "vllm", "hardware": "h200", "layout": "single_node_tp", "replicas": 1, "variant": "default",
        "features": [], "gpus_per_replica": 8}
HOSTILE_REGION = "<script>alert(1)</script>"
POOLS = [ManualPool(hardware="h200", nodes=3, gpus_per_node=8, free_gpus=2),
         ManualPool(hardware="b200", nodes=1, gpus_per_node=8)]


async def _seed(pool) -> None:
    await cluster_store.create_cluster(pool, ClusterSpec(
        name="fleet-east", region=HOSTILE_REGION, labels={"tier": "gold"}, kubeconfig="env:KUBECONFIG_FLEET_EAST",
        manual_inventory=ManualInventory(pools=POOLS)))
    await cluster_store.create_cluster(pool, ClusterSpec(name="fleet-dark", kubeconfig="env:KUBECONFIG_FLEET_DARK"))
    await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                       "values ('org/m@abc', 'org/m', 'main', 'abc', 'approved', 'artifact/org/m@abc', 'olga') "
                       "on conflict do nothing")
    for wl, state in (("fleet-ok", "serving"), ("fleet-sick", "degraded")):
        await workload_store.upsert_workload(pool, workload_id=wl, artifact_id="org/m@abc", spec=SPEC, state="serving",
                                             workflow_id=f"workload/{wl}", requested_by="olga", step="t")
        await workload_store.record_deployment(pool, workload_id=wl, cluster="fleet-east", dgd_name=f"{wl}-dgd",
                                               namespace="ns", replicas=1, state=state, frontend_url=None,
                                               detail={}, source=f"workload/{wl}", step="t")


async def test_fleet_and_cluster_pages(plane, pg_pool):
    await _seed(pg_pool)
    total = sum(p.per_node * p.nodes for p in POOLS)
    free = sum((p.per_node if p.free_gpus is None else p.free_gpus) * p.nodes for p in POOLS)
    async with browser_for(plane) as vic:
        await sign_in(vic, "tok-vic")
        page = await vic.get("/console/clusters")
        assert page.status_code == 200, page.text
        assert HOSTILE_REGION not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        fleet = rows(page.text.split('id="clusters"')[1], "cluster")
        east, dark = fleet["fleet-east"], fleet["fleet-dark"]
        for p in POOLS:
            assert f"{p.per_node * p.nodes} × {card_name(p.hardware)}" in east
        assert "tier=gold" in east
        assert "fleet-ok" in east and "fleet-sick" in east
        assert "degraded" in east and "the watch found fleet-sick not serving" in east
        assert "unknown" in dark and "could not be read" in dark
        table = rows(page.text.split('id="gpu-table"')[1].split("</table>")[0], "cluster")
        assert table["fleet-east"].split()[1:4] == [str(total), str(total - free), str(free)]
        # The chart draws the same figures: one used and one free bar for the readable cluster only.
        svg = page.text.split('<svg class="chart"')[1].split("</svg>")[0]
        assert f"fleet-east: used {total - free} GPUs" in svg and f"fleet-east: free {free} GPUs" in svg
        assert "fleet-dark" not in svg

        one = await vic.get("/console/clusters/fleet-east")
        assert one.status_code == 200
        deployments = rows(one.text, "workload")
        assert set(deployments) == {"fleet-ok", "fleet-sick"}
        assert "fleet-sick-dgd" in deployments["fleet-sick"] and "degraded" in deployments["fleet-sick"]
        assert re.search(r'<rect class="series-0"', one.text)

        missing = await vic.get("/console/clusters/no-such")
        assert missing.status_code == 404 and "no-such" in unescape(missing.text)

        anonymous = await browser_for(plane).get("/console/clusters")
        assert anonymous.status_code == 303 and "/console/login" in anonymous.headers["location"]


async def test_model_page_links_this_models_artifacts_workloads_and_endpoints(plane, pg_pool):
    kimi, other = "moonshotai/Kimi-K3@" + "1" * 40, "org/other@" + "2" * 40
    for art, repo in ((kimi, "moonshotai/Kimi-K3"), (other, "org/other")):
        await pg_pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                              "values ($1, $2, 'main', $3, 'approved', $4, 'olga') on conflict do nothing",
                              art, repo, art.split("@")[1], f"artifact/{art}")
    for wl, art in (("kimi-here", kimi), ("other-here", other)):
        await workload_store.upsert_workload(pg_pool, workload_id=wl, artifact_id=art, spec={}, state="serving",
                                             workflow_id=f"workload/{wl}", requested_by="olga", step="t")
    await endpoint_store.upsert_endpoint(pg_pool, name="kimi-ep", workloads=["kimi-here"], state="serving",
                                         workflow_id="endpoint/kimi-ep", routes=[], step="t")
    await endpoint_store.upsert_endpoint(pg_pool, name="other-ep", workloads=["other-here"], state="serving",
                                         workflow_id="endpoint/other-ep", routes=[], step="t")
    async with browser_for(plane) as vic:
        await sign_in(vic, "tok-vic")
        page = await vic.get("/console/models/moonshotai/Kimi-K3")
    mine = rows(page.text, "mine")
    assert f"moonshotai/Kimi-K3@{'1' * 12}" in mine["artifacts"] and "org/other" not in mine["artifacts"]
    assert "kimi-here" in mine["workloads"] and "other-here" not in mine["workloads"]
    assert "kimi-ep" in mine["endpoints"] and "other-ep" not in mine["endpoints"]
    assert f'href="/console/artifacts/{kimi}"' in page.text and 'href="/console/endpoints/kimi-ep"' in page.text
