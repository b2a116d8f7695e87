"""Traffic and upgrades as pictures in Chromium (issue 37 parts 2 and 3, issue 36's predicted beside
measured): a real gateway serves chat requests to two backends of one workload (its serving version and
an upgrade's new revision), the plane's sampler stores the gateway's counters in real Postgres, and the
endpoint and workload pages draw them per backend with the figures in a table, the predicted time to
first token beside the measured one, and the upgrade's timeline from the events the upgrade records.
Each chart has lines with data, the pages pass axe-core and the CSP, and screenshots are kept."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from api.app import create_app
from api.auth import TokenTable
from tests.console.accessibility import serious_violations
from tests.console.browser import chromium, served, signed_in_page
from tests.gateway.conftest import RunningGateway, ScriptedBackend
from tests.support import wait_until
from wingsmith.adapters.gateway.traffic_sampler import TrafficSampler
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import traffic_samples
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway import Backend, EndpointRoutes

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots" / "traffic"
TOKENS = {"tok-vic": {"name": "vic", "roles": ["viewer"]}}
MODEL, WORKLOAD, ARTIFACT, NEXT = "traffic-model", "traffic-wl", "org/tm@aaa", "org/tm@bbb"
SPEC = {"engine": "vllm", "hardware": "h200", "layout": "single_node_tp", "replicas": 1, "variant": "default",
        "features": [], "gpus_per_replica": 8, "served_model_name": MODEL}
# The approved draft's estimate for the workload's card and layout, as the draft's performance workflow
# stores it (wingsmith.domain.draft_performance.PerformanceRow).
ESTIMATE = {"card": "h200", "layout": "single_node_tp", "mode": "agg", "backend": "vllm", "isl": 4000, "osl": 1000,
            "ttft_ms": 412.5, "tpot_ms": 23.4, "parallelism": "TP8", "concurrency": 64,
            "source": "AIConfigurator 0.12.0 (database h200_sxm vllm)"}


async def _seed(pool, started: datetime) -> None:
    await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                       "values ($1, 'org/tm', 'main', 'aaa', 'approved', 'artifact/org/tm@aaa', 'olga')", ARTIFACT)
    await pool.execute("insert into drafts (artifact_id, version, catalog_version, evidence, sizing) "
                       "values ($1, 1, 'test', '{}'::jsonb, $2)", ARTIFACT,
                       {"performance": {"status": "estimated", "entries": [ESTIMATE]}})
    await workload_store.upsert_workload(pool, workload_id=WORKLOAD, artifact_id=ARTIFACT, spec=SPEC, state="serving",
                                         workflow_id=f"workload/{WORKLOAD}", requested_by="olga", step="t")
    for cluster, revision in (("sim-alpha", 0), ("sim-beta", 1)):
        await workload_store.record_deployment(pool, workload_id=WORKLOAD, cluster=cluster, revision=revision,
                                               dgd_name=f"{WORKLOAD}-{cluster}-r{revision}", namespace="ns",
                                               replicas=1, state="serving", frontend_url=None, detail={},
                                               source=f"workload/{WORKLOAD}", step=f"t:{cluster}")
    # An upgrade as workflows/workload/upgrade.py records it: started, a healthy judgment at 10 %, one
    # that crossed the error threshold at 50 %, and the rollback with its failures.
    figures = {"old_requests": 60, "new_requests": 22, "old_error_rate": 0.0, "old_p99_seconds": 0.09,
               "new_p99_seconds": 0.11, "old_ttft_p99_seconds": 0.02, "new_ttft_p99_seconds": 0.03}
    steps = [
        (0, "started", "workload_upgrade_started", {"from": ARTIFACT, "to": NEXT, "steps": [10, 50, 100],
                                                     "dwell_seconds": 30, "clusters": ["sim-beta"], "reason": None}),
        (40, "sim-beta:10:0", "workload_upgrade_step", {
            "cluster": "sim-beta", "percent": 10, "healthy": True, "enough_traffic": True, "failures": [],
            "figures": {**figures, "new_error_rate": 0.0}}),
        (80, "sim-beta:50:0", "workload_upgrade_step", {
            "cluster": "sim-beta", "percent": 50, "healthy": False, "enough_traffic": True,
            "failures": ["error rate 9.1% vs 0.0% (over +1.0%; 2 of 22 failed)"],
            "figures": {**figures, "new_error_rate": 0.0909}}),
        (95, "rolled_back", "workload_upgrade_rolled_back", {
            "from": ARTIFACT, "to": NEXT, "failures": ["sim-beta at 50 %: error rate 9.1% vs 0.0% (over +1.0%)"]}),
    ]
    for seconds, step, kind, detail in steps:
        await workload_store.record_upgrade_event(
            pool, workload_id=WORKLOAD, source=f"workload/{WORKLOAD}", step=f"upgrade:1:{step}", kind=kind,
            actor="olga", detail={"upgrade_id": f"workload/{WORKLOAD}/upgrade/1", **detail})
        await pool.execute("update events set at = $1 where source = $2 and step = $3",
                           started + timedelta(seconds=seconds), f"workload/{WORKLOAD}", f"upgrade:1:{step}")


async def _lines_with_data(page, where: str) -> int:
    """Lines of the charts under `where` with two points or more, and lone figures (a dot between gaps):
    a chart drawn with data."""
    lines = await page.locator(f"{where} svg.chart polyline").evaluate_all(
        "lines => lines.filter(l => l.getAttribute('points').trim().split(' ').length > 1).length")
    return lines + await page.locator(f"{where} svg.chart circle.dot").count()


async def test_traffic_and_upgrade_pictures_in_chromium(pg_pool, temporal_client, tmp_path):
    from playwright.async_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await _seed(pg_pool, datetime.now(UTC) - timedelta(minutes=20))
    token = tmp_path / "gateway-token"
    token.write_text("gateway-admin-secret-for-tests\n")
    gateway = RunningGateway(tmp_path / "gateway-state", token)
    alpha, beta = ScriptedBackend("alpha", models=(MODEL,)), ScriptedBackend("beta", models=(MODEL,))
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json",
                        gateway_url=gateway.url, gateway_admin_token_ref=gateway.token_ref,
                        traffic_sample_seconds=0.5)
    sampler = TrafficSampler(pg_pool, settings.traffic_gateways, admin_token_ref=settings.gateway_admin_token_ref,
                             every_seconds=settings.traffic_sample_seconds)
    try:
        backends = [Backend(id="sim-alpha/traffic-wl", cluster="sim-alpha", workload_id=WORKLOAD, url=alpha.url,
                            weight=3),
                    Backend(id="sim-beta/traffic-wl/r1", cluster="sim-beta", workload_id=WORKLOAD, url=beta.url,
                            weight=1)]
        gateway.client.set_routes(EndpointRoutes(model_name=MODEL, backends=backends))
        await endpoint_store.upsert_endpoint(pg_pool, name=MODEL, workloads=[WORKLOAD], state="serving",
                                             workflow_id=f"endpoint/{MODEL}", routes=[b.model_dump(mode="json")
                                                                                       for b in backends], step="t")
        since = datetime.now(UTC) - timedelta(seconds=5)
        sampler.start()

        async def read_once():
            return sampler.readings >= 1
        await wait_until(read_once, what="the sampler's first reading (what came before it is not counted)")
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            for _ in range(4):  # traffic over a few readings, so each line has several points
                for i in range(6):
                    r = await http.post(f"{gateway.url}/v1/chat/completions", json={
                        "model": MODEL, "stream": i % 2 == 0, "messages": [{"role": "user", "content": "hi"}]})
                    assert r.status_code == 200, r.text
                readings = sampler.readings

                async def read_again(after=readings):
                    return sampler.readings >= after + 2
                await wait_until(read_again, what="the sampler to read the gateway again")

        async def stored():
            spans = await traffic_samples.traffic_by_backend(pg_pool, start=since, end=datetime.now(UTC),
                                                             endpoint=MODEL)
            return sum(i.counts.requests for s in spans.values() for i in s) == 24
        await wait_until(stored, what="24 requests in the stored samples")

        app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool,
                         temporal=temporal_client)
        async with served(app) as base, chromium() as browser:
            page, refused_by_csp = await signed_in_page(browser, base)

            problems: dict[str, list[str]] = {}
            for name, path in (("endpoint", f"/console/endpoints/{MODEL}"),
                               ("workload", f"/console/workloads/{WORKLOAD}")):
                await page.goto(base + path)
                await expect(page.locator("main h1")).to_be_visible()
                # One section per backend, each with a requests chart and a latency chart drawn with data.
                for backend in ("sim-alpha/traffic-wl", "sim-beta/traffic-wl/r1"):
                    where = f'[data-traffic-backend="{backend}"]'
                    assert await _lines_with_data(page, where) >= 3, f"{path}: {backend}'s charts are empty"
                    await page.locator(f"{where} details summary").click()
                    table = page.locator(f'[data-traffic-table="{backend}"] tbody tr')
                    counted = sum(int(c) for c in await table.locator("td:nth-child(2)").all_inner_texts())
                    assert counted == (18 if backend.startswith("sim-alpha") else 6), (backend, counted)
                svg_names = await page.locator("#traffic svg.chart title[id]").all_text_contents()
                assert any(n.startswith("Requests and errors per second") for n in svg_names)
                found = await serious_violations(page)
                if found:
                    problems[path] = found
                await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
                await page.locator("#traffic").screenshot(path=str(SCREENSHOTS / f"{name}-traffic.png"))

            # The workload page: predicted beside measured, and the upgrade's timeline.
            overall = page.locator("#traffic-overall")
            await expect(overall).to_contain_text("24")
            ttft = page.locator('#performance-table tr[data-figure="ttft"] td')
            assert (await ttft.nth(0).inner_text()) == f"{ESTIMATE['ttft_ms']:.1f} ms"
            assert re.fullmatch(r"\d+\.\d ms", await ttft.nth(2).inner_text())  # measured p99, from the gateway
            tpot = page.locator('#performance-table tr[data-figure="tpot"] td')
            assert (await tpot.nth(0).inner_text()) == f"{ESTIMATE['tpot_ms']:.1f} ms"
            timeline = page.locator('[data-upgrade="1"]')
            await expect(timeline.locator("[data-rolled-back]")).to_contain_text("error rate 9.1%")
            assert await _lines_with_data(page, '[data-upgrade="1"]') >= 4  # weights old/new, judge's figures
            assert await timeline.locator("svg.chart line.mark-0").count() >= 1  # the rollback, marked
            decisions = await timeline.locator("tr[data-decision]").evaluate_all(
                "rows => rows.map(r => r.getAttribute('data-decision'))")
            assert decisions == ["healthy", "rolled back"]
            await timeline.screenshot(path=str(SCREENSHOTS / "workload-upgrade.png"))
            (SCREENSHOTS / "axe-serious.json").write_text(json.dumps(problems, indent=1))
            assert refused_by_csp == [], refused_by_csp
            assert problems == {}, problems
    finally:
        await sampler.stop()
        gateway.stop()
        alpha.stop()
        beta.stop()
    for name in ("endpoint", "workload", "workload-upgrade"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 5_000
