"""The draft's memory picture (issue 37): for each sized variant a stacked bar of one GPU (weights, KV
cache, activations, runtime overhead) against the card's memory, beside the published floor over the
same GPUs; the table under it carries the same figures. Figures come from the draft the API returns."""

from __future__ import annotations

import re

from tests.console.conftest import as_, browser_for, sign_in
from tests.console.test_public_pages import rows
from tests.console.test_review_pages import _register_and_wait
from tests.support import running_worker
from wingsmith.domain.hardware import HARDWARE

PARTS = ("weights", "kv_cache", "activations", "runtime_overhead")


async def test_draft_draws_memory_per_gpu(plane, deps, temporal_client):
    async with running_worker(temporal_client, deps):
        artifact = await _register_and_wait(plane)
    async with browser_for(plane) as vic:
        draft = (await vic.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()["draft"]
        await sign_in(vic, "tok-vic")
        page = await vic.get(f"/console/artifacts/{artifact}")
    assert page.status_code == 200
    floors = {v["name"]: v["vram_minimum_gb"] for v in draft["evidence"]["variants"]}
    sized = [s for s in draft["sizing"]["sizing"] if s.get("report")]
    assert sized, "the Kimi-K3 draft sizes at least one variant"
    table = rows(page.text.split('id="memory-table"')[1].split("</table>")[0], "memory")
    assert set(table) == {s["variant"] for s in sized}
    svg = page.text.split('id="memory-per-gpu"')[1].split("</svg>")[0]
    for s in sized:
        fit = s["report"]["fit"]
        usage = fit["per_gpu"]
        cells = table[s["variant"]]
        for part in PARTS:
            gb = round(usage[part]["value"] / 1e9, 2)
            assert f" {gb} " in f" {cells} ", (part, gb, cells)
        assert str(HARDWARE[fit["hardware"]].memory_gb_per_gpu) in cells
        floor = floors.get(s["variant"])
        if floor is not None:
            per_gpu = round(floor / fit["gpus"], 2)
            assert str(per_gpu) in cells
            assert f"published floor per GPU {per_gpu:,.3g}" in svg or f"published floor per GPU {per_gpu:,.0f}" in svg
        # Four segments drawn for this variant, none empty-labelled.
        drawn = re.findall(rf'<rect class="series-\d"[^>]*><title>{re.escape(s["variant"])} · ', svg)
        assert len(drawn) == len(PARTS)
