"""Nothing from outside the plane runs script in the console (issue #31: a model card's
`license_link: "javascript:alert(document.domain)"` became a clickable href on the public model page
and the register page).

The offline Hub serves model cards written by an attacker (javascript: and data: links, HTML and SVG
in the licence's fields), and the recipe catalog carries the same in its text and links. The pages
must show them as text, link only http(s) URLs, and send headers that stop any script a mistake
would let through; Chromium confirms that no dialog opens and no such link exists."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from sim.hub import load_snapshot, start_hub_server
from tests.console.browser import chromium, csp_violations, served
from tests.console.conftest import TOKENS, sign_in
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.config import Settings

JS_LINK = "javascript:alert(document.domain)"
DATA_LINK = "data:text/html,<script>alert(document.domain)</script>"
SVG = "<svg onload=alert(document.domain)>"
IMG = '<img src=x onerror="alert(document.domain)">'
SCRIPT = "<script>alert(document.domain)</script>"
# Per model: its card's licence fields, as the attacker wrote them.
CARDS = {
    "openai/gpt-oss-20b": {"license": "other", "license_name": SVG, "license_link": JS_LINK},
    "openai/gpt-oss-120b": {"license": SCRIPT, "license_name": IMG, "license_link": DATA_LINK},
    "deepseek-ai/DeepSeek-R1": {"license": "other", "license_link": " JaVaScRiPt:alert(document.domain)"},
}
HOSTILE_MARKUP = (SVG, IMG, SCRIPT, "<svg", "<img src=x", "<script>alert")
BAD_HREF = re.compile(r"""(?:href|src|action)\s*=\s*["']?\s*(?:javascript|data|vbscript):""", re.I)


@pytest.fixture(scope="module")
def hostile_hub():
    snapshot = load_snapshot()
    for repo, card in CARDS.items():
        model = snapshot["models"][repo]
        model["cardData"] = {**model.get("cardData", {}), **card}
    handle = start_hub_server(snapshot=snapshot)
    yield handle
    handle.stop()


def hostile_catalog():
    """The shipped catalog with an attacker's words in a recipe and its sources' links."""
    catalog = load_catalog()
    recipe = catalog.find("openai/gpt-oss-20b").recipe
    hostile_recipe = recipe.model_copy(update={"title": SVG, "parameter_count": IMG,
                                               "base_args": [*recipe.base_args, "--served-model-name", SCRIPT]})
    recipes = {key: (hostile_recipe if r is recipe else r) for key, r in catalog.recipes.items()}
    return catalog.model_copy(update={
        "recipes": recipes,
        "vllm_source": catalog.vllm_source.model_copy(update={"repository": JS_LINK + "//"}),
        "dynamo_source": catalog.dynamo_source.model_copy(update={"repository": "data:text/html,x"}),
    })


@pytest.fixture
def hostile_app(hostile_hub, tmp_path, monkeypatch):
    monkeypatch.setattr("console.models.load_catalog", hostile_catalog)
    settings = Settings(home=tmp_path / "home", hf_endpoint=hostile_hub.url, auth_tokens=json.dumps(TOKENS),
                        log_format="json")
    return create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens))


@pytest_asyncio.fixture(loop_scope="session")
async def client(hostile_app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=hostile_app), base_url="http://plane") as c:
        yield c


def assert_inert(html: str) -> None:
    assert not BAD_HREF.search(html), BAD_HREF.search(html)
    for markup in HOSTILE_MARKUP:
        assert markup not in html, markup
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(h.startswith(("/", "#", "http://", "https://")) for h in hrefs), hrefs


def assert_locked_down(response: httpx.Response) -> None:
    csp = response.headers.get("content-security-policy", "")
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
    assert directives.get("script-src") == "'self'" and directives.get("frame-ancestors") == "'none'", csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp
    assert response.headers.get("x-content-type-options") == "nosniff"
    assert response.headers.get("x-frame-options") == "DENY"
    assert response.headers.get("referrer-policy") == "same-origin"


async def test_the_public_model_page_shows_a_hostile_card_and_recipe_as_text(client):
    for repo in CARDS:
        page = await client.get(f"/console/models/{repo}")
        assert page.status_code == 200, page.text[:300]
        assert_inert(page.text)
        assert_locked_down(page)
    page = await client.get("/console/models/openai/gpt-oss-20b")
    # The attacker's words are there to read, escaped, and the licence is not a link.
    assert "&lt;svg onload=alert(document.domain)&gt;" in page.text
    assert re.search(r'<td id="licence"><span>&lt;svg', page.text), page.text[page.text.find('id="licence"'):][:200]
    # The recipe's link (its repository is the attacker's) is text; its words are escaped too.
    assert re.search(r'<span id="recipe-link"><code>', page.text)
    assert "--served-model-name &#39;&lt;script&gt;" in page.text or "&lt;script&gt;alert" in page.text


async def test_the_register_page_shows_a_hostile_card_as_text(client):
    assert (await sign_in(client, "tok-olga")).status_code == 303
    for repo in CARDS:
        page = await client.get("/console/artifacts/new", params={"source": f"hf:{repo}"})
        assert page.status_code == 200 and 'id="proposal-sha"' in page.text, page.text[:500]
        assert_inert(page.text)
        assert_locked_down(page)
        licence = page.text[page.text.find('id="proposal-licence"'):][:300]
        assert "<a" not in licence.split("</td>")[0], licence


@pytest.mark.parametrize("path", ["/console/login", "/console/models", "/console/static/console.js", "/console",
                                  "/console/nowhere"])
async def test_every_console_answer_carries_the_policy(client, path):
    assert_locked_down(await client.get(path))


async def test_api_answers_carry_the_headers_too(client):
    for path in ("/healthz", "/v1/artifacts", "/docs"):
        r = await client.get(path)
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY", path
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
    assert (await client.get("/healthz")).headers["content-security-policy"].startswith("default-src 'none'")


async def test_in_chromium_no_script_of_the_attacker_runs(hostile_app):
    async with served(hostile_app) as base, chromium() as browser:
        page = await browser.new_page()
        page.set_default_timeout(15_000)
        dialogs: list[str] = []

        async def dismissed(dialog) -> None:
            dialogs.append(dialog.message)
            await dialog.dismiss()
        page.on("dialog", dismissed)
        refused_by_csp = csp_violations(page)

        pages = [f"/console/models/{repo}" for repo in CARDS]
        await page.goto(f"{base}/console/login")
        await page.get_by_label("Your API token").fill("tok-olga")
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(re.compile(r"/console$"))
        pages += [f"/console/artifacts/new?source=hf:{repo}" for repo in CARDS]
        for path in pages:
            await page.goto(base + path)
            await page.wait_for_load_state("load")
            hostile = await page.eval_on_selector_all(
                "a[href], [src], form[action]",
                "els => els.map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'))"
                ".filter(v => /^\\s*(javascript|data|vbscript):/i.test(v))")
            assert hostile == [], (path, hostile)
            assert await page.locator("svg, img[src='x'], script:not([src])").count() == 0, path
            # The licence is there to read, as text; clicking it goes nowhere.
            licence = page.locator("#licence, #proposal-licence")
            await licence.click()
            assert page.url == base + path
        await page.wait_for_timeout(300)  # a late onload/onerror would have fired by now
    assert dialogs == [], dialogs
    assert refused_by_csp == [], refused_by_csp
