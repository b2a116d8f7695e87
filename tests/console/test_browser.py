"""The console in a real browser (issue #11's done-when): Playwright drives Debian's Chromium against
the API served by uvicorn on a loopback port, with the real Temporal, Postgres and worker behind it.

Screenshots of the draft page are kept under test-output/screenshots/."""

from __future__ import annotations

import asyncio
import math
import os
import re
from html import unescape
from pathlib import Path

import httpx

from tests.console.browser import chromium, csp_violations, served
from tests.console.conftest import KIMI, as_
from tests.support import running_worker, wait_until
from wingsmith.adapters.recipes.files import load_catalog

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
KIMI_LAYOUTS = ["single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_tp_pp", "multi_node_dep",
                "pd_cluster", "multi_node_tp_dp"]


async def _sha_from_the_model_page(api: httpx.AsyncClient) -> str:
    """Run the model page's first step as printed, with bash and curl, against this plane."""
    page = await api.get("/console/models/moonshotai/Kimi-K3")
    calls = [unescape(c) for c in re.findall(r'<pre class="command">(.*?)</pre>', page.text, re.S)]
    capture = next(c for c in calls if c.startswith("SHA=$("))
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", capture + '\nprintf %s "$SHA"', stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={"PATH": os.environ["PATH"], "WINGSMITH_TOKEN": "tok-vic"})
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_approve_kimi_in_the_browser(plane, deps, temporal_client):
    from playwright.async_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    async with served(plane) as base:
        async with running_worker(temporal_client, deps), httpx.AsyncClient(base_url=base) as api:
            r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"}, headers=as_("tok-olga"))
            assert r.status_code == 202, r.text
            artifact = r.json()["id"]

            async def drafted():
                got = await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))
                return got.json().get("draft") is not None
            await wait_until(drafted, what="the Kimi-K3 draft")
            assert await _sha_from_the_model_page(api) == r.json()["sha"]

            async with chromium() as browser:
                page = await browser.new_page(viewport={"width": 1360, "height": 900})
                page.set_default_timeout(15_000)
                refused_by_csp = csp_violations(page)

                # Signing in from the list page brings the approver back to it.
                await page.goto(f"{base}/console")
                await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
                await page.get_by_label("Your API token").fill("tok-ana")
                await page.get_by_role("button", name="Sign in").click()
                await expect(page.get_by_role("heading", name="Artifacts")).to_be_visible()
                await expect(page.get_by_text("Signed in as")).to_contain_text("ana")

                await page.get_by_role("link", name=KIMI).click()
                await expect(page.locator("#artifact-state")).to_have_text("draft")
                await page.screenshot(path=str(SCREENSHOTS / "kimi-k3-draft-top.png"))

                layouts = page.locator("#layouts tbody tr")
                assert await layouts.evaluate_all("rows => rows.map(r => r.dataset.layout)") == KIMI_LAYOUTS
                await expect(page.locator('tr[data-layout="single_node_tp"]')).to_contain_text("default")
                await expect(page.locator('tr[data-layout="multi_node_tp_dp"]')).to_contain_text(
                    "only on gb200, gb300, h200")
                await expect(page.locator('tr[data-variant="default"]')).to_contain_text("1680 GB")
                await expect(page.locator('tr[data-variant="nvfp4"]')).to_contain_text("1650 GB")
                recipe_blob = re.compile(r"/blob/[0-9a-f]{40}/models/moonshotai/Kimi-K3.yaml$")
                await expect(page.locator("#recipe-link")).to_have_attribute("href", recipe_blob)

                # Choose another card and layout: the command is rebuilt server-side.
                await page.locator("#command-form select[name=hardware]").select_option("gb200")
                await page.locator("#command-form select[name=layout]").select_option("multi_node_tp")
                await page.get_by_role("button", name="Show the command").click()
                # One command per tray, on as many trays as hold the default variant's floor (two at least).
                floor = load_catalog().recipes["moonshotai/Kimi-K3"].variants["default"].vram_minimum_gb
                trays = max(2, math.ceil(floor / load_catalog().hardware["gb200"].vram_gb))
                await expect(page.locator("#command pre.command")).to_have_count(trays)
                await page.screenshot(path=str(SCREENSHOTS / "kimi-k3-draft.png"), full_page=True)
                await page.locator("#layouts-section").screenshot(path=str(SCREENSHOTS / "kimi-k3-layouts.png"))
                await page.locator("#decision").screenshot(path=str(SCREENSHOTS / "kimi-k3-decision.png"))

                await page.get_by_label("Comment").fill("Floors and layouts checked against the recipe.")
                await page.get_by_role("button", name="Approve draft version 1").click()
                await expect(page.locator("#artifact-state")).to_have_text("approved")
                await expect(page.locator("#decision-recorded")).to_contain_text("ana")
                await page.screenshot(path=str(SCREENSHOTS / "kimi-k3-approved.png"), full_page=True)

                await page.goto(f"{base}/console?state=approved")
                await expect(page.locator(f'tr[data-artifact="{artifact}"]')).to_contain_text("approved")
                assert refused_by_csp == [], refused_by_csp
    assert (SCREENSHOTS / "kimi-k3-draft.png").stat().st_size > 10_000
