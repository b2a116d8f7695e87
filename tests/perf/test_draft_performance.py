"""A draft's expected performance, through a real plane: the API, the worker, Temporal, Postgres, the offline
Hub, and the perf worker as its own process (`python -m worker.perf`, as `up` starts it). The draft appears
at once; AIConfigurator's figures follow and are its own (its CLI, run on the same inputs in the same test,
is the reference); without a perf worker the draft says why it has none."""

from __future__ import annotations

from pathlib import Path

import aiconfigurator  # noqa: F401  (the perf extra: missing, this module fails at collection, never skips)

from contracts.draft_performance import performance_workflow_id
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.support import record_history_if_asked, running_worker, wait_until
from wingsmith.draft_performance import NOT_INSTALLED, estimate_requests
from wingsmith.drafts import sizing_target
from wingsmith.hardware import get_hardware
from wingsmith.hub.proposal import ArtifactProposal
from wingsmith.perf.estimates import DEFAULT_ISL, DEFAULT_OSL
from wingsmith.recipes import evidence_for, load_catalog

ROOT = Path(__file__).resolve().parents[2]
GPT_OSS = "openai/gpt-oss-120b"
CARD = "h200"


async def _register(api, source: str) -> dict:  # noqa: F811
    r = await api.post("/v1/artifacts", json={"source": source}, headers=as_("tok-olga"))
    assert r.status_code == 202, r.text
    return r.json()


async def _draft(api, artifact_id: str, until=lambda draft: True, timeout: float = 30) -> dict:  # noqa: F811, ASYNC109
    async def ready():
        r = await api.get(f"/v1/artifacts/{artifact_id}", headers=as_("tok-vic"))
        draft = r.json().get("draft") if r.status_code == 200 else None
        return draft if draft and until(draft) else None
    return await wait_until(ready, timeout=timeout, interval=0.5, what=f"the draft of {artifact_id}")


def test_a_draft_asks_for_every_layout_on_every_nvidia_card_its_own_shape_first() -> None:
    catalog = load_catalog()
    match = catalog.find(GPT_OSS)
    assert match is not None
    evidence = evidence_for(match, catalog)
    target = sizing_target(evidence, fleet_cards=["gb200", "mi355x"])
    # Only what a request names: the repo, its commit and its config.
    proposal = ArtifactProposal.model_construct(**{"repo_id": GPT_OSS, "sha": "c" * 40, "config": {}})
    requests = estimate_requests(proposal, evidence, target, ["gb200", "mi355x"])
    nvidia_verified = {h.id for h in evidence.hardware if h.placeable and h.status == "verified"}
    cards = {r.card for r in requests}
    assert cards == nvidia_verified | {"gb200"}, "the fleet's NVIDIA cards and the verified ones; never AMD"
    assert all(get_hardware(c).placeable for c in cards)
    layouts = {lay.name for lay in evidence.layouts}
    assert {r.layout for r in requests} == layouts
    assert (requests[0].card, requests[0].layout) == (target.hardware, target.layout)
    first_layout = [r.layout for r in requests[:len(cards)]]
    assert set(first_layout) == {target.layout}, "each card's figures at the draft's layout come first"
    assert all((r.isl, r.osl) == (DEFAULT_ISL, DEFAULT_OSL) for r in requests)


async def test_without_a_perf_worker_the_draft_says_why_and_does_not_wait(api, deps, temporal_client):  # noqa: F811
    async with running_worker(temporal_client, deps):
        reg = await _register(api, f"hf:{GPT_OSS}")
        draft = await _draft(api, reg["id"], until=lambda d: d["performance_status"] != "pending")
        await record_history_if_asked(temporal_client, performance_workflow_id(reg["workflow_id"], draft["version"]),
                                      "draft_performance_unavailable")
    assert draft["performance_status"] == "unavailable"
    assert draft["performance_reason"] == NOT_INSTALLED
    assert draft["performance"] == []
    assert "performance" not in draft["sizing"], "the figures are the draft's, not its sizing's"
