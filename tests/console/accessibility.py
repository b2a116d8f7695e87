"""axe-core, the accessibility checker, run inside a page by Playwright. It is installed from the npm
registry at a pinned version by scripts/install-js.sh (into .cache/npm) and evaluated through the
DevTools protocol, so the console's CSP (scripts from the plane only) stays as strict as in production."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

AXE = Path(__file__).resolve().parents[2] / ".cache" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")


@cache
def _axe_source() -> str:
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run scripts/install-js.sh")
    return AXE.read_text(encoding="utf-8")


async def serious_violations(page) -> list[str]:
    """Each serious or critical WCAG A/AA violation on the page, with the elements it found it on."""
    await page.evaluate(_axe_source())
    result = await page.evaluate(
        "async () => (await axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}, resultTypes: ['violations']})).violations")
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}; "
            f"{v['nodes'][0].get('failureSummary', '')}"
            for v in result if v.get("impact") in SERIOUS]
