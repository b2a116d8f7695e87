"""The console's pictures in Chromium (issue 37): the fleet, a cluster, the model index with filters, the
Kimi-K3 model page, its draft with the memory chart, a workload's grouped events and the run-locally
page. Each chart is drawn with data (bars wider than nothing), each page passes axe-core with no serious
or critical violation, no page trips the CSP, and a screenshot of each is kept under test-output/."""

from __future__ import annotations

import json
from pathlib import Path

from tests.console.accessibility import serious_violations
from tests.console.browser import chromium, served, signed_in_page
from tests.console.conftest import KIMI
from tests.console.test_fleet_pages import _seed
from tests.console.test_review_pages import _register_and_wait
from tests.support import running_worker

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots" / "pictures"


async def _drawn_bars(page, where: str) -> int:
    """Bars of the charts under `where` that have a width: a chart with data, not an empty frame."""
    return await page.locator(f"{where} svg.chart rect").evaluate_all(
        "rects => rects.filter(r => parseFloat(r.getAttribute('width')) > 0).length")


async def test_pictures_in_chromium(plane, deps, temporal_client, pg_pool):
    from playwright.async_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await _seed(pg_pool)
    async with served(plane) as base:
        async with running_worker(temporal_client, deps):
            artifact = await _register_and_wait(plane)

            async with chromium() as browser:
                page, refused_by_csp = await signed_in_page(browser, base)

                visits = {
                    "fleet": ("/console/clusters", "#gpus"),
                    "cluster": ("/console/clusters/fleet-east", "#gpus"),
                    "models": ("/console/models?card=h200&layout=multi_node_tp_dp", None),
                    "model": (f"/console/models/{KIMI}", None),
                    "draft": (f"/console/artifacts/{artifact}", "#memory"),
                    "workload": ("/console/workloads/fleet-sick", None),
                    "run-locally": ("/console/run-locally", None),
                }
                problems: dict[str, list[str]] = {}
                for name, (path, chart) in visits.items():
                    await page.goto(base + path)
                    await expect(page.locator("main h1")).to_be_visible()
                    if chart:
                        assert await _drawn_bars(page, chart) > 0, f"the chart on {path} is empty"
                    found = await serious_violations(page)
                    if found:
                        problems[path] = found
                    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
                    if chart:
                        await page.locator(chart).screenshot(path=str(SCREENSHOTS / f"{name}-chart.png"))

                await page.goto(f"{base}/console/models?card=h200&layout=multi_node_tp_dp")
                await expect(page.locator(f'tr[data-model="{KIMI}"]')).to_be_visible()
                await page.goto(f"{base}/console/models/{KIMI}")
                await expect(page.locator("#faq-serve")).to_contain_text("Yes")
                await expect(page.locator("#attribution")).to_contain_text("Apache License 2.0")
                await page.goto(f"{base}/console/workloads/fleet-sick")
                groups = page.locator("details.events")
                await expect(groups.first).to_have_attribute("open", "")
                (SCREENSHOTS / "axe-serious.json").write_text(json.dumps(problems, indent=1))
                assert refused_by_csp == [], refused_by_csp
                assert problems == {}, problems
    for name in visits:
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 5_000
