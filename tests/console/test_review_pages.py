"""The artifact list, the draft page and the review form, against a real Temporal and Postgres."""

from __future__ import annotations

import math
import re
from html import unescape

from tests.console.conftest import KIMI, as_, browser_for, csrf_of, sign_in
from tests.console.test_public_pages import rows
from tests.support import running_worker, wait_until
from wingsmith.adapters.recipes.files import load_catalog


async def _register_and_wait(plane, source: str = f"hf:{KIMI}") -> str:
    async with browser_for(plane) as api:
        r = await api.post("/v1/artifacts", json={"source": source}, headers=as_("tok-olga"))
        assert r.status_code == 202, r.text
        artifact = r.json()["id"]

        async def drafted():
            got = await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))
            return got.status_code == 200 and got.json().get("draft") is not None
        await wait_until(drafted, what="the draft to be saved")
    return artifact


async def test_list_draft_page_and_review(plane, deps, temporal_client, pg_pool):
    async with running_worker(temporal_client, deps):
        artifact = await _register_and_wait(plane)
        page_url = f"/console/artifacts/{artifact}"

        async with browser_for(plane) as vic:
            await sign_in(vic, "tok-vic")
            listing = await vic.get("/console")
            assert listing.status_code == 200 and f'data-artifact="{artifact}"' in listing.text
            assert "waiting for review" in rows(listing.text, "artifact")[artifact]
            only_approved = await vic.get("/console", params={"state": "approved"})
            assert artifact not in only_approved.text and "No artifacts in state" in only_approved.text
            bad_state = await vic.get("/console", params={"state": "done"})
            assert bad_state.status_code == 422 and "There is no state called &#39;done&#39;" in bad_state.text

            draft = await vic.get(page_url)
            assert draft.status_code == 200, draft.text
            html = unescape(draft.text)
            variants = rows(draft.text, "variant")
            assert "1680 GB" in variants["default"] and "1874 GB" in variants["default"]
            assert "1650 GB" in variants["nvfp4"]
            assert len(rows(draft.text, "layout")) == 7 and "default" in rows(draft.text, "layout")["single_node_tp"]
            assert "https://github.com/vllm-project/recipes/blob/" in html
            assert "/workflows/artifact%2Fmoonshotai%2FKimi-K3%40" in html
            assert "vllm serve moonshotai/Kimi-K3" in html
            assert "Only approvers can approve or reject a draft" in html and 'id="review-form"' not in html

            # A viewer's POST is refused even with a valid CSRF token.
            refused = await vic.post(f"{page_url}/review", data={
                "csrf": csrf_of(draft.text), "decision": "approve", "draft_version": "1"})
            assert refused.status_code == 403 and "needs the approver role" in refused.text

            chosen = await vic.get(page_url, params={"hardware": "gb200", "layout": "multi_node_tp"})
            # One command per tray, on as many trays as hold the default variant's floor (two at least).
            catalog = load_catalog()
            floor = catalog.recipes["moonshotai/Kimi-K3"].variants["default"].vram_minimum_gb
            trays = max(2, math.ceil(floor / catalog.hardware["gb200"].vram_gb))
            assert unescape(chosen.text).count("vllm serve moonshotai/Kimi-K3") == trays

        async with browser_for(plane) as ana:
            await sign_in(ana, "tok-ana")
            draft = await ana.get(page_url)
            assert 'id="review-form"' in draft.text and 'name="draft_version" value="1"' in draft.text
            token = csrf_of(draft.text)

            no_csrf = await ana.post(f"{page_url}/review", data={"decision": "approve", "draft_version": "1"})
            assert no_csrf.status_code == 403 and "did not come from this console" in no_csrf.text

            stale = await ana.post(f"{page_url}/review", data={
                "csrf": token, "decision": "approve", "draft_version": "2", "comment": "looks right"})
            assert stale.status_code == 409 and 'id="review-error"' in stale.text
            assert "draft version 2 is stale" in unescape(stale.text)
            assert "looks right" in stale.text, "the comment survives a refusal"

            unknown = await ana.post(f"{page_url}/review", data={
                "csrf": token, "decision": "maybe", "draft_version": "1"})
            assert unknown.status_code == 422 and "could not be read" in unknown.text
            assert await pg_pool.fetchval("select count(*) from reviews where artifact_id = $1", artifact) == 0

            done = await ana.post(f"{page_url}/review", data={
                "csrf": token, "decision": "approve", "draft_version": "1", "comment": "floors and layouts checked",
                "variant": "default", "features": "spec_decoding"})
            assert done.status_code == 303 and done.headers["location"].endswith("?decided=approve")

            async def recorded():
                return await pg_pool.fetchval("select state from artifacts where id = $1", artifact) == "approved"
            await wait_until(recorded, what="the decision to be recorded")
            row = await pg_pool.fetchrow("select * from reviews where artifact_id = $1", artifact)
            assert row["reviewer"] == "ana" and row["via"] == "api" and row["comment"] == "floors and layouts checked"
            assert row["selections"] == {"variant": "default", "features": ["spec_decoding"]}

            after = await ana.get(done.headers["location"])
            assert re.search(r'id="artifact-state">approved<', after.text)
            assert "Your decision (approve) was recorded" in after.text and 'id="review-form"' not in after.text
            again = await ana.post(f"{page_url}/review",
                                   data={"csrf": token, "decision": "reject", "draft_version": "1"})
            # Refused either by the workflow (still telling the watch and the followers) or, once it
            # has ended, by the API: both say the decision stands.
            assert again.status_code == 409 and re.search(r"no longer waiting for a review|already decided: approve",
                                                          unescape(again.text))


async def test_unknown_and_malformed_artifacts(plane):
    async with browser_for(plane) as vic:
        await sign_in(vic, "tok-vic")
        missing = await vic.get("/console/artifacts/nobody/nothing@" + "0" * 40)
        assert missing.status_code == 404 and "not found" in missing.text
        assert "text/html" in missing.headers["content-type"]
        malformed = await vic.get("/console/artifacts/nobody/nothing")
        assert malformed.status_code == 422 and "artifact ids look like" in malformed.text
