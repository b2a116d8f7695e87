"""Team quotas through the API, on the real Postgres and Temporal with the simulated clusters: an admin sets a
quota, the team reads its own (another team's answers 404), and a create, a scale or an upgrade past it is
refused with 403 `quota_exceeded` and the numbers (used, asked, quota), for GPUs per card, `*` and the budget;
a dry run says whether it fits; two creates at once cannot both take the last GPUs; a team without a quota is
not limited. Kimi-K3 takes 16 H200 per replica (multi_node_tp_dp), 12 or 16 GB200 (multi_node_tp, _tp_pp)."""

from __future__ import annotations

import asyncio
import re
from html import unescape

from tests.quotas.conftest import as_
from tests.support import running_worker, wait_for_pollers, wait_until

RED, ROOT, VERA, OLGA = as_("tok-rita"), as_("tok-root"), as_("tok-vera"), as_("tok-olga")
QUOTA = "/v1/teams/red/quota"
CSRF = "quota-csrf"


def _kimi(artifact: str, name: str, replicas: int, **extra) -> dict:
    return {"artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": replicas,
            "name": name, **extra}


def _lines(answer: dict) -> list[tuple]:
    return [(line["limit"], line["used"], line["asked"], line["quota"], line["fits"]) for line in answer["lines"]]


def _refused(r) -> dict:
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "quota_exceeded", error
    return error


async def _console(api, artifact: str) -> None:
    """The console says the same: the new-workload form's check says whether it fits, the scale form refuses
    with the numbers, the fleet page shows use against quota (the team's own to its members; to an admin, every
    team with a quota or a live workload)."""
    try:
        api.cookies.update({"wingsmith_token": "tok-rita", "wingsmith_csrf": CSRF})
        check = await api.get("/console/workloads/new/check", params={
            "artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": "1"})
        assert check.status_code == 200 and 'id="check-quota" class="alert error" data-fits="false"' in check.text
        assert "h200: 32 used + 16 asked &gt; 32 GPUs" in check.text, check.text[-2000:]
        page = await api.post("/console/workloads/red-a/scale", data={"csrf": CSRF, "replicas": "2"})
        assert page.status_code == 403 and "Past team red's quota: h200: 32 used + 16 asked > 32 GPUs" in \
            unescape(page.text), page.text[-2000:]
        for token, teams in (("tok-vera", {"red"}), ("tok-olga", {"default"}), ("tok-root", {"red"})):
            api.cookies.set("wingsmith_token", token)
            fleet = await api.get("/console/clusters")
            assert fleet.status_code == 200, fleet.text
            assert set(re.findall(r'<tr data-team="([^"]+)"', fleet.text)) == teams, (token, fleet.text[-3000:])
        row = re.search(r'data-team="red" data-limit="h200".*?data-used>(\d+)<.*?data-quota>(\d+) GPUs', fleet.text,
                        re.S)
        assert row is not None and row.groups() == ("32", "32"), fleet.text[-3000:]
    finally:
        api.cookies.clear()


async def _until_stage(api, workload_id: str, stages: set[str]) -> dict:
    async def reached():
        live = (await api.get(f"/v1/workloads/{workload_id}", headers=ROOT)).json().get("live") or {}
        return live if live.get("stage") in stages else None
    return await wait_until(reached, timeout=90, interval=0.2, what=f"workload {workload_id} to be {stages}")


async def _delete(api, *names: str) -> None:
    for name in names:
        await api.delete(f"/v1/workloads/{name}", headers=ROOT)
    for name in names:
        await _until_stage(api, name, {"deleted"})


async def test_an_admin_sets_a_quota_and_the_team_reads_its_own(api, pg_pool):
    body = {"gpus": {"H200": 32, "*": 48}, "budget_per_hour": 500}
    r = await api.put(QUOTA, json=body, headers=RED)
    assert r.status_code == 403 and "rita lacks the admin role" in r.json()["error"]["message"], r.text
    r = await api.put(QUOTA, json=body, headers=ROOT)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["quota"] == {"gpus": {"h200": 32, "*": 48}, "budget_per_hour": 500.0, "policy": "refuse"}
    assert answer["set_by"] == "root" and answer["use"]["total_gpus"] == 0
    assert _lines(answer) == [("h200", 0, 0, 32, True), ("*", 0, 0, 48, True), ("budget", 0, 0, 500, True)]

    for who in (VERA, RED, ROOT):  # the team itself, or an admin
        shown = await api.get(QUOTA, headers=who)
        assert shown.status_code == 200 and shown.json()["quota"]["gpus"] == {"h200": 32, "*": 48}, shown.text
    other = await api.get(QUOTA, headers=OLGA)  # another team's: as if absent
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found", other.text
    own = (await api.get("/v1/teams/default/quota", headers=OLGA)).json()
    assert own["quota"] is None and own["words"] == "team default has no quota: nothing is limited"

    for bad, words in (({"gpus": {"h900": 8}}, "unknown hardware 'h900'"), ({"gpus": {"mi355x": 8}}, "AMD"),
                       ({"gpus": {"h200": -1}}, "whole number"), ({"budget_per_hour": -5}, "budget_per_hour"),
                       ({"policy": "wait"}, "policy"), ({"gpu": {"h200": 1}}, "Extra inputs")):
        r = await api.put(QUOTA, json=bad, headers=ROOT)
        assert r.status_code == 422 and words in r.json()["error"]["message"], (bad, r.text)
    r = await api.put("/v1/teams/Not_A_Team/quota", json=body, headers=ROOT)
    assert r.status_code == 422, r.text
    assert (await api.get(QUOTA, headers=VERA)).json()["quota"]["budget_per_hour"] == 500  # nothing refused was kept

    assert (await api.delete(QUOTA, headers=RED)).status_code == 403
    assert (await api.delete(QUOTA, headers=ROOT)).status_code == 204
    gone = await api.delete(QUOTA, headers=ROOT)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "no_quota"
    assert (await api.get(QUOTA, headers=VERA)).json()["quota"] is None
    assert await pg_pool.fetchval("select count(*) from team_quotas") == 0


async def test_creates_and_scales_past_the_quota_are_refused_with_the_numbers(api, deps, temporal_client, clusters,
                                                                             approved_kimi, pg_pool):
    assert (await api.put(QUOTA, json={"gpus": {"h200": 32}}, headers=ROOT)).status_code == 200
    async with running_worker(temporal_client, deps):
        await wait_for_pollers(temporal_client, deps.settings)
        # A dry run says whether it would fit, and writes nothing.
        dry = await api.post("/v1/workloads", json=_kimi(approved_kimi, "red-dry", 3, dry_run=True), headers=RED)
        assert dry.status_code == 202, dry.text
        assert dry.json()["quota"]["fits"] is False and _lines(dry.json()["quota"]) == [("h200", 0, 48, 32, False)]

        assert (await api.post("/v1/workloads", json=_kimi(approved_kimi, "red-a", 1), headers=RED)).status_code == 202
        # At once, before red-a's workflow has recorded anything: its 16 GPUs are held already.
        error = _refused(await api.post("/v1/workloads", json=_kimi(approved_kimi, "red-b", 2), headers=RED))
        assert error["details"]["lines"] == [{"limit": "h200", "unit": "GPUs", "used": 16, "asked": 32, "quota": 32,
                                              "fits": False}]
        assert error["message"].startswith("Past team red's quota: h200: 16 used + 32 asked > 32 GPUs. Ask an admin")

        # Two creates at once for the last 16 GPUs: one gets them, the other the numbers.
        both = await asyncio.gather(*(api.post("/v1/workloads", json=_kimi(approved_kimi, name, 1), headers=RED)
                                      for name in ("red-c", "red-d")))
        assert sorted(r.status_code for r in both) == [202, 403], [r.text for r in both]
        won = next(r.json()["id"] for r in both if r.status_code == 202)
        assert _lines(_refused(next(r for r in both if r.status_code == 403))["details"]) == [
            ("h200", 32, 16, 32, False)]

        await _until_stage(api, "red-a", {"serving"})
        for who in (RED, ROOT):  # an admin's scale counts against the owner team's quota too
            error = _refused(await api.patch("/v1/workloads/red-a", json={"replicas": 2}, headers=who))
            assert "h200: 32 used + 16 asked > 32 GPUs" in error["message"], error
        shown = (await api.get(QUOTA, headers=VERA)).json()
        assert shown["use"]["gpus"] == {"h200": 32} and shown["use"]["workloads"] == 2
        assert _lines(shown) == [("h200", 32, 0, 32, True)]
        await _console(api, approved_kimi)

        # The default team has no quota: as before quotas, nothing is limited.
        free = await api.post("/v1/workloads", json=_kimi(approved_kimi, "olga-dry", 4, dry_run=True), headers=OLGA)
        assert free.json()["quota"] == {"team": "default", "fits": True, "policy": None, "lines": [],
                                        "words": "team default has no quota: nothing is limited"}

        # Freed GPUs are room again: red-a scales once the other is gone.
        await _delete(api, won)
        r = await api.patch("/v1/workloads/red-a", json={"replicas": 2}, headers=RED)
        assert r.status_code == 200 and r.json()["replicas"] == 2, r.text
        await _delete(api, "red-a")
    assert await pg_pool.fetchval("select count(*) from workloads where id in ('red-b', 'red-dry')") == 0
    assert (await api.delete(QUOTA, headers=ROOT)).status_code == 204


async def test_the_budget_counts_cost_per_hour_where_the_clusters_carry_a_price(api, deps, temporal_client,
                                                                                clusters, approved_kimi):
    for name in ("sim-east", "sim-west"):
        assert (await api.patch(f"/v1/clusters/{name}", json={"cost_per_gpu_hour": 2.5},
                                headers=ROOT)).status_code == 200
    assert (await api.put(QUOTA, json={"budget_per_hour": 60}, headers=ROOT)).status_code == 200
    try:
        async with running_worker(temporal_client, deps):
            await wait_for_pollers(temporal_client, deps.settings)
            one = await api.post("/v1/workloads", json=_kimi(approved_kimi, "red-priced", 1), headers=RED)
            assert one.status_code == 202, one.text  # 16 GPUs × 2.5 = 40 per hour
            error = _refused(await api.post("/v1/workloads", json=_kimi(approved_kimi, "red-dear", 1), headers=RED))
            assert error["details"]["lines"] == [{"limit": "budget", "unit": "per hour", "used": 40.0,
                                                  "asked": 40.0, "quota": 60.0, "fits": False}]
            await _until_stage(api, "red-priced", {"serving"})
            shown = (await api.get(QUOTA, headers=VERA)).json()  # now priced where it is placed
            assert shown["use"]["cost_per_hour"] == 40.0 and shown["use"]["unpriced_gpus"] == 0
            await _delete(api, "red-priced")
    finally:
        for name in ("sim-east", "sim-west"):
            await api.patch(f"/v1/clusters/{name}", json={"cost_per_gpu_hour": None}, headers=ROOT)
        await api.delete(QUOTA, headers=ROOT)


async def test_an_upgrade_that_adds_gpus_per_replica_counts_against_the_quota(api, deps, temporal_client, clusters,
                                                                              approved_kimi):
    body = {"artifact_id": approved_kimi, "hardware": "gb200", "layout": "multi_node_tp", "replicas": 2,
            "name": "red-nvl"}
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/workloads", json=body, headers=RED)
        assert r.status_code == 202 and r.json()["plan"]["gpus_per_replica"] == 12, r.text
        await _until_stage(api, "red-nvl", {"serving"})
        assert (await api.put(QUOTA, json={"gpus": {"gb200": 28}}, headers=ROOT)).status_code == 200
        # multi_node_tp_pp takes 16 GB200 per replica: 8 more for its two replicas.
        error = _refused(await api.post("/v1/workloads/red-nvl/upgrade", headers=RED,
                                        json={"artifact_id": approved_kimi, "layout": "multi_node_tp_pp"}))
        assert "gb200: 24 used + 8 asked > 28 GPUs" in error["message"], error
        # An upgrade that adds no GPU takes no quota: the workflow answers it (here: nothing to change).
        same = await api.post("/v1/workloads/red-nvl/upgrade", json={"artifact_id": approved_kimi}, headers=RED)
        assert same.status_code == 422 and same.json()["error"]["details"]["reason"] == "SameArtifact", same.text
        await _delete(api, "red-nvl")
    assert (await api.delete(QUOTA, headers=ROOT)).status_code == 204
