"""What the console's browser tests share: Debian's Chromium driven by Playwright, and the app served
by uvicorn on a loopback port (a browser needs a real socket)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from tests.support import wait_until
from wingsmith.local.ports import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@asynccontextmanager
async def served(app) -> AsyncIterator[str]:
    """The app on a free loopback port for the duration; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started
    try:
        await wait_until(started, timeout=10, what="uvicorn to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def _chromium_path() -> str:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-browser.sh")
    return str(CHROMIUM)


@asynccontextmanager
async def chromium():
    """A headless Chromium; a missing one fails the test (CI installs it), never skips it."""
    executable = _chromium_path()
    from playwright.async_api import async_playwright
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


def csp_violations(page) -> list[str]:
    """Every Content-Security-Policy refusal Chromium reports on `page` from now on (it logs each one to
    the console): a page that needs an inline script, handler or style the policy forbids shows up here."""
    seen: list[str] = []

    def heard(message) -> None:
        if "Content Security Policy" in message.text:
            seen.append(message.text)
    page.on("console", heard)
    return seen


async def signed_in_page(browser, base: str, token: str = "tok-vic", *, timeout_ms: int = 15_000):
    """A desktop-sized page signed in to the console with `token`, and the list its CSP refusals go to."""
    from playwright.async_api import expect
    page = await browser.new_page(viewport={"width": 1360, "height": 900})
    page.set_default_timeout(timeout_ms)
    refused_by_csp = csp_violations(page)
    await page.goto(f"{base}/console/login")
    await page.get_by_label("Your API token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_text("Signed in as")).to_be_visible()
    return page, refused_by_csp
