"""A workload page during and after a real progressive upgrade, in Chromium (issue 37 part 3): the real
plane (Temporal dev server, Postgres, offline Hub, simulated clusters, the local gateway) upgrades a
workload under client traffic while the plane's sampler stores the gateway's counters. Held after its
first step, the page draws the weights so far, the judge's figures and both versions' traffic; after the
upgrade, the weights reach 100 % and the decisions table lists every judgment the registry recorded.
Then the fleet, endpoint, draft, model index and model pages of the same plane, each chart drawn with data.
Each view passes axe-core and the CSP; screenshots are kept under test-output/screenshots/upgrade/."""

from __future__ import annotations

import json
from pathlib import Path

from api.app import create_app
from api.auth import TokenTable
from tests.console.accessibility import serious_violations
from tests.console.browser import chromium, served, signed_in_page
from tests.console.test_browser_pictures import _drawn_bars
from tests.console.test_browser_traffic import _lines_with_data
from tests.support import running_worker, wait_until
from tests.upgrade.test_upgrade_journey import MODEL, WORKLOAD, _new_commit, client_loops, two_cluster_workload
from tests.watch.test_watch import REPO, WATCH, _approve
from tests.workloads.conftest import as_
from wingsmith.adapters.gateway.traffic_sampler import TrafficSampler

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots" / "upgrade"


async def _look(page, base: str, name: str, problems: dict[str, list[str]]) -> None:
    await page.goto(f"{base}/console/workloads/{WORKLOAD}")
    found = await serious_violations(page)
    if found:
        problems[name] = found
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    await page.locator("#upgrade-timelines").screenshot(path=str(SCREENSHOTS / f"{name}-timeline.png"))


async def test_the_workload_page_during_and_after_an_upgrade(api, deps, temporal_client, clusters, gateway, hub,
                                                             pg_pool, settings, monkeypatch, capsys):  # noqa: F811
    from playwright.async_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    sampler = TrafficSampler(pg_pool, [gateway.url], admin_token_ref=gateway.token_ref, every_seconds=0.5)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    problems: dict[str, list[str]] = {}
    try:
        sampler.start()
        async with running_worker(temporal_client, deps):
            await two_cluster_workload(api, WORKLOAD)
            r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": MODEL,
                                                                              "workloads": [WORKLOAD]})
            assert r.status_code == 202, r.text

            async def routed():
                route = gateway.client.get_route(MODEL)
                return route if route and len([b for b in route.backends if b.weight > 0]) == 2 else None
            await wait_until(routed, timeout=30, what="both clusters routed")
            seen = {a.action.first_execution_run_id
                    for a in (await temporal_client.get_schedule_handle(WATCH).describe()).info.recent_actions}
            new_id = await _new_commit(api, temporal_client, hub, monkeypatch, capsys, seen,
                                       "max_position_embeddings=65536")
            await _approve(api, new_id)

            async with client_loops(gateway.url) as traffic, served(app) as base, chromium() as browser:
                page, refused_by_csp = await signed_in_page(browser, base)

                r = await api.post(f"/v1/workloads/{WORKLOAD}/upgrade", headers=as_("tok-olga"), json={
                    "artifact_id": new_id, "steps": [50, 100], "dwell_seconds": 2,
                    "thresholds": {"min_requests": 2, "latency_floor_seconds": 30}})
                assert r.status_code == 202, r.text
                # Held after its first step (pause stops after the current one), so "during" is a state.
                r = await api.post(f"/v1/workloads/{WORKLOAD}/upgrade/pause", headers=as_("tok-olga"),
                                   json={"reason": "look at the pictures"})
                assert r.status_code == 200, r.text

                async def judged_once():
                    got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
                    steps = [e for e in got["events"] if e["kind"] == "workload_upgrade_step"]
                    return got if steps and got["upgrade"]["state"] == "paused" else None
                await wait_until(judged_once, timeout=90, interval=0.3, what="the first judgment, then the hold")

                await _look(page, base, "during", problems)
                timeline = page.locator('[data-upgrade="1"]')
                await expect(timeline.locator("h3 .state")).to_have_text("paused")
                assert await _lines_with_data(page, '[data-upgrade="1"]') >= 3  # weights, and the judge's figures
                assert await timeline.locator("tr[data-decision]").count() >= 1
                # Both versions of the canary cluster took traffic, and each is drawn.
                backends = await page.locator("[data-traffic-backend]").evaluate_all(
                    "els => els.map(e => e.getAttribute('data-traffic-backend'))")
                assert any(b.endswith("/r1") for b in backends), backends
                for b in backends:
                    assert await _lines_with_data(page, f'[data-traffic-backend="{b}"]') >= 2, b

                r = await api.post(f"/v1/workloads/{WORKLOAD}/upgrade/resume", headers=as_("tok-olga"))
                assert r.status_code == 200, r.text

                async def ended():
                    got = (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()
                    return got if (got.get("upgrade") or {}).get("finished_at") else None
                done = await wait_until(ended, timeout=120, interval=0.3, what="the upgrade to end")
                assert done["upgrade"]["state"] == "succeeded", done["upgrade"]
                judgments = [e for e in (await api.get(f"/v1/workloads/{WORKLOAD}", headers=as_("tok-vic"))).json()[
                    "events"] if e["kind"] == "workload_upgrade_step"]

                await _look(page, base, "after", problems)
                await expect(timeline.locator("h3 .state")).to_have_text("succeeded")
                assert await timeline.locator("tr[data-decision]").count() == len(judgments)
                # The new version's weight ends at 100 % on every cluster: the top of the weight chart.
                weights = timeline.locator("svg.chart").first
                tops = await weights.locator("polyline:not([stroke-dasharray])").evaluate_all(
                    "ls => ls.map(l => l.getAttribute('points').trim().split(' ').pop().split(',')[1])")
                assert tops and len(set(tops)) == 1, tops

                # The rest of the console, of this same plane after it served traffic: each chart drawn
                # with data, each page clean for axe.
                for name, path, chart in (("fleet", "/console/clusters", "#gpus"),
                                          ("endpoint", f"/console/endpoints/{MODEL}", "#traffic"),
                                          ("draft", f"/console/artifacts/{new_id}", "#memory"),
                                          ("models", "/console/models", None),
                                          ("model", f"/console/models/{REPO}", "#faq")):
                    await page.goto(base + path)
                    await expect(page.locator("main h1")).to_be_visible()
                    if chart == "#traffic":
                        assert await _lines_with_data(page, chart) >= 2, f"the traffic on {path} is not drawn"
                    elif chart == "#faq":  # no chart without estimates (the perf extra): the questions answered
                        await expect(page.locator("#faq-serve")).to_contain_text("Yes")
                    elif chart:
                        assert await _drawn_bars(page, chart) > 0, f"the chart on {path} is empty"
                    found = await serious_violations(page)
                    if found:
                        problems[name] = found
                    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
                assert refused_by_csp == [], refused_by_csp
            assert traffic.errors == [], traffic.errors[:5]
    finally:
        await sampler.stop()
    (SCREENSHOTS / "axe-serious.json").write_text(json.dumps(problems, indent=1))
    assert problems == {}, problems
