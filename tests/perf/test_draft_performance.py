"""A draft's expected performance, through a real plane: the API, the worker, Temporal, Postgres, the offline
Hub, and the perf worker as its own process (`python -m worker.perf`, as `up` starts it). The draft appears
at once; AIConfigurator's figures follow and are its own (its CLI, run on the same inputs in the same test,
is the reference); without a perf worker the draft says why it has none."""

from __future__ import annotations

from pathlib import Path

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from contracts.draft_performance import performance_workflow_id
from contracts.perf import ACTIVITY_ESTIMATE
from tests.artifacts.conftest import api, as_, deps, hub, settings  # noqa: F401  (the artifact journey's test bed)
from tests.support import record_history_if_asked, running_worker, wait_until
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.config import perf_task_queue
from wingsmith.domain.draft_performance import NOT_INSTALLED, estimate_requests
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.perf.estimates import DEFAULT_ISL, DEFAULT_OSL
from wingsmith.domain.recipes import evidence_for

ROOT = Path(__file__).resolve().parents[2]
GPT_OSS = "openai/gpt-oss-120b"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
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


def test_a_card_that_cannot_hold_the_draft_s_layout_still_gets_its_figures_early() -> None:
    """DeepSeek-V3 sizes single-node on H200; a 4-GPU GB200 node cannot hold it (the recipe denies the
    layout there), so GB200 is asked at the first layout it allows, right after H200, before the rest."""
    catalog = load_catalog()
    match = catalog.find(DEEPSEEK)
    assert match is not None
    evidence = evidence_for(match, catalog)
    fleet = ["h200", "gb200"]
    target = sizing_target(evidence, fleet_cards=fleet)
    proposal = ArtifactProposal.model_construct(**{"repo_id": DEEPSEEK, "sha": "d" * 40, "config": {}})
    requests = estimate_requests(proposal, evidence, target, fleet)
    denied_on_gb200 = [lay.name for lay in evidence.layouts if "gb200" in lay.denied]
    assert target.layout in denied_on_gb200, "the case this test is about"
    allowed_on_gb200 = [lay.name for lay in evidence.layouts if "gb200" not in lay.denied]
    first_on_gb200 = next(r for r in requests if r.card == "gb200")
    assert [(r.card, r.layout) for r in requests[:2]] == [(target.hardware, target.layout),
                                                          ("gb200", first_on_gb200.layout)]
    assert first_on_gb200.layout in allowed_on_gb200
    assert len({(r.card, r.layout) for r in requests}) == len(requests), "nothing asked twice"
    cards = {r.card for r in requests}
    assert [r.card for r in requests[:len(cards)]].count("gb200") == 1, "each card once before any twice"


async def test_without_a_perf_worker_the_draft_says_why_and_its_estimates_stay_queued(
        api, deps, settings, temporal_client):  # noqa: F811
    async with running_worker(temporal_client, deps):
        reg = await _register(api, f"hf:{GPT_OSS}")
        draft = await _draft(api, reg["id"], until=lambda d: d["performance_status"] != "pending")
        handle = temporal_client.get_workflow_handle(performance_workflow_id(reg["workflow_id"], draft["version"]))

        async def queued():
            pending = (await handle.describe()).raw_description.pending_activities
            return pending[0] if pending else None
        ask = await wait_until(queued, what="the estimate queued on the perf queue")
        await record_history_if_asked(temporal_client, handle.id, "draft_performance_unavailable")
        await handle.terminate("the test has seen it wait")
    assert draft["performance_status"] == "unavailable"
    reason = draft["performance_reason"]
    assert reason.startswith(NOT_INSTALLED), reason
    # Why, and that a perf worker starting later still gets the ask (tests/perf/test_draft_performance_proof.py
    # shows it answered), until when.
    assert f"nothing polls {perf_task_queue(settings.task_queue)}" in reason and "follow as soon as a perf " \
        "worker starts (until " in reason, reason
    assert ask.activity_type.name == ACTIVITY_ESTIMATE
    assert draft["performance"] == []
    assert "performance" not in draft["sizing"], "the figures are the draft's, not its sizing's"
