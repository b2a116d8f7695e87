"""A workload sized by traffic is answered at once with where to follow its plan (issue 52), through a real
plane with the perf worker searching for real (a cold cache of its own, so the search is seen under way):

- the dry-run answers 202 with `Location`, the status URL and the plan's workflow id, in a moment;
- the status URL shows the plan's progress (the perf worker's beats: which card it is planning);
- then it answers as the synchronous dry-run did: here a first token in 5 ms after 4,000 input tokens,
  which no card meets, a 422 `target_unreachable` naming the best each card reaches;
- every card the fleet's live inventories show is planned: the GB200 cluster declares no manual
  inventory, and its card is planned beside the H200 asked for;
- the console's form, checked while the plan runs, shows its progress and asks for itself again (no script
  needed); creating from it then lands on that page.

Before the change the dry-run held its request open for the whole search (one synchronous call), only
the card asked for was planned, and a card whose search found nothing said only "No feasible GPU
configuration found", with no figures.

The model is a small one (Qwen3-8B: about 18 CPU-s per card's search here, Kimi-K3's several times that):
the search is still seconds long, so it is seen under way."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from tests.console.conftest import browser_for, csrf_of, plane, sign_in  # noqa: F401  (plane: a fixture)
from tests.perf.conftest import ASYNC, perf_worker_running
from tests.perf.test_workload_target import _approved
from tests.support import wait_until
from tests.workloads.conftest import (  # noqa: F401  (the workload test bed's fixtures)
    api,
    as_,
    clusters,
    deps,
    hub,
    settings,
    sims,
)

MODEL = "Qwen/Qwen3-8B"
UNREACHABLE = {"requests_per_second": 20, "isl": 4000, "osl": 1000, "ttft_ms": 5, "tpot_ms": 40}


@pytest.mark.slow
async def test_a_plan_is_followed_at_its_status_url_and_answers_as_the_dry_run_did(
        api, plane, deps, temporal_client, temporal_server, clusters, tmp_path: Path):  # noqa: F811
    artifact = await _approved(api, deps, temporal_client, MODEL)
    body = {"artifact_id": artifact, "hardware": "h200", "target": UNREACHABLE, "dry_run": True,
            "name": "qwen-traffic"}
    # A perf home of its own: a cold search, so the plan is seen under way.
    async with perf_worker_running(temporal_server, temporal_client, deps, tmp_path / "perf-home",
                                   tmp_path / "perf-worker.log"):
        started = time.monotonic()
        r = await api.post("/v1/workloads", json=body, headers={**as_("tok-olga"), **ASYNC})
        answered_in = time.monotonic() - started
        assert r.status_code == 202, r.text
        planning = r.json()
        assert planning["state"] == "planning" and r.headers["location"] == planning["status_url"]
        assert planning["workflow_id"].startswith("traffic-plan/") and planning["workflow_url"].endswith(
            planning["workflow_id"].replace("/", "%2F"))
        # The live inventories' cards: sim-nvl's GB200 beside the H200 asked for.
        assert planning["cards"] == ["h200", "gb200"], planning
        assert answered_in < 15, answered_in  # the search takes minutes; the answer does not wait for it
        described = await temporal_client.get_workflow_handle(planning["workflow_id"]).describe()
        assert described.status is not None

        # The console, meanwhile: "Check again" joins the same plan and shows how far it is.
        form = {"artifact_id": artifact, "hardware": "h200", "layout": "single_node_tp", "sizing": "target",
                "name": "qwen-traffic", **{f"target.{k}": str(v) for k, v in UNREACHABLE.items()}}
        async with browser_for(plane) as olga:
            await sign_in(olga, "tok-olga")
            page = await olga.get("/console/workloads/new", params=form)
            assert page.status_code == 200 and 'id="check-planning"' in page.text, page.text
            assert page.headers["refresh"] == "3" and planning["workflow_id"] in page.text
            made = await olga.post("/console/workloads/new", content=urlencode({**form, "csrf": csrf_of(page.text)}),
                                   headers={"content-type": "application/x-www-form-urlencoded"})
            assert made.status_code == 303 and re.match(r"/console/workloads/new\?.*sizing=target",
                                                        made.headers["location"]), made.headers

        seen: list[dict] = []

        async def answered():
            got = await api.get(planning["status_url"], headers=as_("tok-olga"))
            if got.status_code == 200 and got.json().get("state") == "planning":
                seen.append(got.json()["progress"])
                return None
            return got
        final = await wait_until(answered, timeout=3600, interval=1, what="the plan's answer")

    searching = [p for p in seen if p["state"] == "searching"]
    assert searching, seen
    assert {p["searching"] for p in searching} <= {"h200", "gb200"} and searching[-1]["seconds"] > 0
    assert any(p["planned"] == ["h200"] and p["searching"] == "gb200" for p in searching) or len(
        {p["searching"] for p in searching}) == 1, searching  # h200 first, then gb200 (when seen that late)

    assert final.status_code == 422, final.text
    error = final.json()["error"]
    assert error["code"] == "target_unreachable"
    by_card = {c["plan"]["card"]: c["plan"] for c in error["details"]["candidates"]}
    assert set(by_card) == {"h200", "gb200"}
    # What H200 reaches, in figures: its closest configuration and by how much it misses.
    h200 = by_card["h200"]
    assert h200["configuration"] is not None and not h200["meets_target"]
    assert "best reachable on h200: TTFT" in h200["why_not"], h200["why_not"]
    assert "best reachable on h200" in error["message"]
    # GB200 misses it too, and says by how much.
    assert "best reachable on gb200" in by_card["gb200"]["why_not"], by_card["gb200"]


async def test_a_status_url_this_plane_did_not_give_is_not_found(api):  # noqa: F811
    r = await api.get("/v1/workloads/plans/not-a-ticket", headers=as_("tok-olga"))
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "plan_not_found"
