"""The draft sizes on the fleet's cards first (issue 34), end to end: with clusters registered that have
only H200 and GB200 (manual inventories, so no cluster is read), registering DeepSeek-V3 through the API
with a worker running drafts it on 8 × H200, a card the recipe verifies that the registered clusters
have, never on the recipe's default B200 that none has. The draft's JSON and the draft page say so. The
choice itself, tier by tier: tests/recipes/test_derived_shapes.py."""

from __future__ import annotations

import json
import re
import time
from html import unescape
from typing import Any

import pytest

from tests.artifacts.conftest import TOKENS, as_
from tests.console.conftest import sign_in
from tests.support import running_worker, wait_until
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import evidence_for

MODEL = "deepseek-ai/DeepSeek-V3"
FLEET: dict[str, dict[str, Any]] = {"fleet-h200": {"hardware": "h200", "nodes": 2},
                                    "fleet-gb200": {"hardware": "gb200", "nodes": 4}}


@pytest.fixture
def settings(settings):  # noqa: F811 - the artifact bed, with an admin to register clusters
    return settings.model_copy(update={"auth_tokens": json.dumps({
        **TOKENS, "tok-ada": {"name": "ada", "roles": ["admin"]}})})


async def _register_fleet(api) -> None:
    for name, pool in FLEET.items():
        # An env: reference nobody set: registered (checked again where the worker runs), never read here,
        # since the manual inventory stands in for a live read.
        r = await api.post("/v1/clusters", headers=as_("tok-ada"), json={
            "name": name, "kubeconfig": f"env:KUBECONFIG_{name.upper().replace('-', '_')}",
            "manual_inventory": {"pools": [pool]}})
        assert r.status_code == 201, r.text
    listed = (await api.get("/v1/clusters", headers=as_("tok-vic"))).json()["clusters"]
    assert {c["name"] for c in listed} == set(FLEET), listed


async def test_a_draft_sizes_on_a_card_the_registered_clusters_have(api, deps, temporal_client, pg_pool):
    catalog = load_catalog()
    evidence = evidence_for(catalog.recipes[MODEL], catalog)
    # Without a fleet the recipe's default card comes first: the case the issue saw.
    assert evidence.default_hardware == "b200" or sizing_target(evidence).hardware == "b200"
    await _register_fleet(api)
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": f"hf:{MODEL}"}, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        artifact = r.json()["id"]

        async def drafted():
            got = await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))
            body = got.json()
            return body if got.status_code == 200 and body.get("state") == "draft" and body.get("draft") else None
        art = await wait_until(drafted, timeout=60, what="the DeepSeek-V3 draft")
        # While the worker runs: the page asks the draft's workflow for its live status.
        await sign_in(api, "tok-vic")
        page = unescape((await api.get("/console/artifacts/" + artifact)).text)
        api.cookies.clear()

    sizing = art["draft"]["sizing"]
    target = sizing["target"]
    planner = sizing_target(evidence, fleet_cards=sorted(p["hardware"] for p in FLEET.values()))
    assert (target["hardware"], target["layout"], target["gpus"]) == ("h200", "single_node_tp", 8), target
    assert (planner.hardware, planner.layout, planner.gpus) == (target["hardware"], target["layout"], target["gpus"])
    assert "H200" in target["reason"] and "which the registered clusters have" in target["reason"], target["reason"]
    assert "B200" not in target["reason"].replace("GB200", ""), target["reason"]
    # Each variant that runs on H200 is sized there too, and its fit check is for that shape.
    for entry in sizing["sizing"]:
        if entry.get("target") is None:
            continue
        assert entry["target"]["hardware"] in {p["hardware"] for p in FLEET.values()}, entry["target"]
        if entry.get("report"):
            assert entry["report"]["fit"]["gpus"] == entry["target"]["gpus"], (entry["variant"], entry["report"]["fit"])
    assert next(e for e in sizing["sizing"] if e["variant"] == "default")["target"]["hardware"] == "h200"
    assert not [w for w in art["draft"].get("warnings") or [] if "no registered cluster has" in w]

    # The draft page says the same.
    fit = re.search(r"The plane's fit check is for (.+?)\.</p>", page, re.S)
    assert fit, page[:2000]
    words = " ".join(fit.group(1).split())
    assert words.startswith("8 × ") and "H200" in words and "which the registered clusters have" in words, words
    assert "B200" not in words.replace("GB200", ""), words

    # With no worker left to answer the draft's workflow, the page shows the registry's draft at once (it
    # waited about 30 s for the held query).
    await sign_in(api, "tok-vic")
    began = time.monotonic()
    later = await api.get("/console/artifacts/" + artifact)
    took = time.monotonic() - began
    api.cookies.clear()
    assert later.status_code == 200 and took < 10, took
    assert "which the registered clusters have" in unescape(later.text)
