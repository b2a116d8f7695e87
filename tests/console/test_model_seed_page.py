"""The model page, whole (issue 37): it answers the seed's four questions from the catalog's data, names the
recipe data's sources, commits and licence, carries the DCP note (TP8, FP8 KV) built from the recipe,
links to running the plane locally, and asks a signed-out reader to sign in for this model's objects."""

from __future__ import annotations

import math
import re
from html import unescape

from console.run_locally import README, readme_section
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.recipes import dynamo_entries, evidence_for

KIMI = "moonshotai/Kimi-K3"


def _answer(html: str, faq_id: str) -> str:
    found = re.search(rf'<dd id="{faq_id}">(.*?)</dd>', html, re.S)
    assert found, f"no answer {faq_id}"
    return unescape(found.group(1))


async def test_kimi_page_answers_the_four_questions(anon):
    catalog = load_catalog()
    evidence = evidence_for(catalog.find(KIMI), catalog)
    html = (await anon.get(f"/console/models/{KIMI}")).text

    memory = _answer(html, "faq-memory")
    default = next(v for v in evidence.variants if v.name == evidence.default_variant)
    assert f"At least {default.vram_minimum_gb:g} GB" in memory
    h200 = next(h for h in evidence.hardware if h.id == "h200")
    assert f"{math.ceil(default.vram_minimum_gb / h200.memory_gb_per_gpu)} × {h200.display_name}" in memory

    layouts = _answer(html, "faq-layouts")
    assert layouts.startswith(f"{len(evidence.layouts)}: ")

    serve = _answer(html, "faq-serve")
    assert serve.startswith("Yes: ")
    for h in evidence.hardware:
        if not h.placeable and h.status != "unsupported":
            assert h.display_name in serve.split("shown but")[0].split("other hardware")[1]

    dynamo = _answer(html, "faq-dynamo")
    published = [e for e in dynamo_entries(KIMI, catalog) if e.card]
    assert published, "NVIDIA publishes Dynamo recipes for Kimi-K3 in the shipped catalog"
    assert dynamo.startswith(f"Yes: {len(published)} recipes at commit {catalog.dynamo_source.commit[:12]}")


async def test_kimi_page_names_the_recipes_licence_and_commits(anon):
    catalog = load_catalog()
    html = unescape((await anon.get(f"/console/models/{KIMI}")).text)
    attribution = re.sub(r"<[^>]+>", "", html.split('id="attribution">')[1].split("</td>")[0])
    for source in (catalog.vllm_source, catalog.dynamo_source):
        assert f"{source.repository} at {source.commit[:12]}, Apache License 2.0" in attribution
    assert 'href="https://www.apache.org/licenses/LICENSE-2.0"' in html


async def test_dcp_note_comes_from_the_recipe(anon):
    recipe = load_catalog().recipes[KIMI]
    size = recipe.features["decode_context_parallelism"].args[1]
    html = unescape((await anon.get(f"/console/models/{KIMI}")).text)
    note = html.split('<div id="dcp-note">')[1].split("</div>")[0]
    assert f"DCP size {size}" in note and "TP8" in note and "FP8 KV" in note
    # A model whose recipe has no DCP feature gets no note.
    other = next(r for r in load_catalog().recipes.values() if "decode_context_parallelism" not in r.features
                 and not r.omni)
    assert 'id="dcp-note"' not in (await anon.get(f"/console/models/{other.path}")).text


async def test_run_locally_link_and_sign_in_for_this_models_objects(anon):
    html = (await anon.get(f"/console/models/{KIMI}")).text
    assert 'href="/console/run-locally"' in html
    assert 'id="sign-in-for-mine"' in html and "/console/login?next=/console/models/moonshotai/Kimi-K3" in html
    page = await anon.get("/console/run-locally")
    assert page.status_code == 200
    section = readme_section(README.read_text(encoding="utf-8"))
    assert unescape(page.text.split('id="readme-section">')[1].split("</pre>")[0]) == section
    assert "scripts/up.sh" in section
