"""The public model pages: what the plane knows about serving a model, from the recipe catalog, readable
without a token (nothing here is registered or secret). Where the plane can, the page adds the Hub's
licence and commit, and suggests a workload its registered clusters can place."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from api.deps import proposals_of, temporal_or_none
from api.errors import ApiError
from api.services.estimates import estimates_asked, with_performance
from console.journey import journey_steps
from console.model_faq import DynamoSummary, answers, attribution, dcp_note, on_this_plane
from console.model_index import IndexFilter, checked, choices, filtered, index_entries
from console.rendering import ConsoleRoute, render
from console.session import signed_in
from console.suggest import Candidate, placement_trial, suggest
from console.tradeoff import TradeoffView, draft_tradeoff
from console.views import (
    CommandChoice,
    command_view,
    default_choice,
    dynamo_link,
    feature_rows,
    hardware_rows,
    layout_rows,
    max_num_seqs_rows,
    published_variant_rows,
)
from console.words import UPSTREAM_LICENCE_URL
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.adapters.store import artifacts as artifact_store
from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.hub import ArtifactProposal, HubError, HubRateLimited, HubUnavailable, parse_source
from wingsmith.domain.recipes import Catalog, DynamoEntry, dynamo_entries, evidence_for
from wingsmith.domain.recipes.layouts_compared import layouts_compared

router = APIRouter(route_class=ConsoleRoute)

# The Hub's answer (licence, commit) is a nicety on a public page: it never holds the page up longer.
HUB_WAIT_SECONDS = 3.0
HUB_QUIET_SECONDS = 60.0
# The model page draws the trade-off of the newest artifact that has figures, looking this far back.
PERFORMANCE_STATES = ("draft", "approved")
PERFORMANCE_LOOKBACK = 20


class DynamoCard(BaseModel):
    """NVIDIA Dynamo's recipes for this model on one card, aggregated and disaggregated."""
    card: str | None
    name: str
    entries: list[tuple[DynamoEntry, str | None]]  # (entry, link at the pinned commit)


def dynamo_by_card(hf_id: str, catalog: Catalog) -> list[DynamoCard]:
    grouped: dict[str | None, list[tuple[DynamoEntry, str | None]]] = {}
    for entry in dynamo_entries(hf_id, catalog):
        grouped.setdefault(entry.card, []).append((entry, dynamo_link(catalog, entry.source_path)))
    cards = []
    for card, entries in grouped.items():
        hw = HARDWARE.get(card) if card else None
        entries.sort(key=lambda pair: (pair[0].mode != "aggregated", pair[0].backend, pair[0].source_path))
        cards.append(DynamoCard(card=card, name=hw.display_name if hw else (card or "Card not stated"),
                                entries=entries))
    return sorted(cards, key=lambda c: (c.card is None, c.name))


@dataclass(frozen=True)
class ModelPerformance:
    """The trade-off of the newest draft or approved artifact of a model that has figures, or why none."""
    artifact: dict[str, Any] | None = None
    view: TradeoffView | None = None
    why_none: str | None = None


async def model_performance(db, hf_id: str, temporal=None) -> ModelPerformance:
    listed = [a for a in await artifact_store.list_artifacts(db, model=hf_id, limit=PERFORMANCE_LOOKBACK)
              if a["state"] in PERFORMANCE_STATES]
    newest_reason = None
    for artifact in listed:
        draft = ((await artifact_store.get_artifact(db, artifact["id"])) or {}).get("draft")
        if not draft:
            continue
        # A draft that predates estimates says so, not "estimates follow" (api/services/estimates.estimates_asked).
        view = draft_tradeoff(with_performance(draft, asked=await estimates_asked(temporal, artifact["workflow_id"],
                                                                                 draft)))
        if view.why_none is None:
            return ModelPerformance(artifact=artifact, view=view)
        newest_reason = newest_reason or f"the newest, {artifact['id']}, says: {view.why_none}"
    if not listed:
        return ModelPerformance(why_none="no draft or approved artifact of this model is registered on this plane")
    return ModelPerformance(why_none=f"none of this model's draft or approved artifacts has figures yet"
                                     f"{'; ' + newest_reason if newest_reason else ''}")


async def hub_facts(request: Request, hf_id: str) -> ArtifactProposal | None:
    """The model's licence and current commit from the Hub, if it answers in time. A Hub that did not
    answer is left alone for a minute, so an offline plane's model pages do not each wait for it."""
    state = request.app.state
    if getattr(state, "hub_quiet_until", 0.0) > time.monotonic():
        return None
    try:
        source = parse_source(f"hf:{hf_id}")
        return await asyncio.wait_for(run_in_threadpool(proposals_of(state).resolver.resolve, source), HUB_WAIT_SECONDS)
    except (HubError, ValueError) as exc:
        if isinstance(exc, (HubUnavailable, HubRateLimited)):
            state.hub_quiet_until = time.monotonic() + HUB_QUIET_SECONDS
        return None
    except Exception:  # noqa: BLE001 - a timeout or a client error: the recipe's facts still show
        state.hub_quiet_until = time.monotonic() + HUB_QUIET_SECONDS
        return None


@router.get("/models")
def model_index(request: Request, q: str = "", card: str = "", task: str = "", size: str = "", layout: str = ""):
    catalog = load_catalog()
    entries = index_entries(catalog)
    offered = choices(entries)
    asked = checked(IndexFilter(q=q.strip(), card=card, task=task, size=size, layout=layout), offered)
    return render(request, "models.html", entries=filtered(entries, asked), total=len(entries), asked=asked,
                  offered=offered, size_words=dict(offered.sizes), catalog=catalog)


@router.get("/models/{org}/{name}")
async def model_page(request: Request, org: str, name: str, variant: str | None = None, hardware: str | None = None,
                     layout: str | None = None):
    catalog = load_catalog()
    hf_id = f"{org}/{name}"
    match = catalog.find(hf_id)
    if match is None:
        raise ApiError(404, f"There is no recipe for {hf_id} in the plane's catalog ({catalog.version}). "
                            "See the list of models for the ones it knows.")
    evidence = evidence_for(match, catalog)
    base = default_choice(evidence)
    choice = CommandChoice(variant=variant or base.variant, hardware=hardware or base.hardware,
                           layout=layout or base.layout)
    command = command_view(match.recipe, evidence, catalog, choice)
    default_command = command_view(match.recipe, evidence, catalog, base).command
    fallback = Candidate(hardware=base.hardware, layout=base.layout, gpus=default_command.gpus if default_command
                          else 8, nodes=default_command.nodes if default_command else 1)
    principal = await signed_in(request)
    db = getattr(request.app.state, "db", None)
    settings = request.app.state.settings
    trial = placement_trial(db, request, settings) if db is not None else None
    suggestion, hub = await asyncio.gather(suggest(match.recipe, evidence, catalog, trial, fallback),
                                           hub_facts(request, match.recipe.model_id))
    steps = journey_steps(str(request.base_url), match.recipe.model_id, hardware=suggestion.hardware,
                          gpus=suggestion.gpus, layout=suggestion.layout, gateway_url=settings.gateway_url)
    context: dict[str, Any] = dict(
        catalog=catalog, recipe=match.recipe, evidence=evidence, variants=published_variant_rows(evidence),
        layouts=layout_rows(evidence), hardware=hardware_rows(evidence), features=feature_rows(evidence),
        command=command, steps=steps, suggestion=suggestion, hub=hub,
        seqs=max_num_seqs_rows(hf_id, evidence, catalog), dynamo=dynamo_by_card(hf_id, catalog),
        has_dcp=any(f.name == "decode_context_parallelism" for f in evidence.features),
        show_clusters=principal is not None, page_path=f"/console/models/{org}/{name}")
    dynamo = [DynamoSummary(card=c.card, modes=[f"{e.mode} {e.backend}" for e, _ in c.entries])
              for c in context["dynamo"] if c.card]
    context.update(faq=answers(evidence, catalog, dynamo), dcp_note=dcp_note(match.recipe, evidence, catalog),
                   attribution=attribution(catalog), licence_url=UPSTREAM_LICENCE_URL,
                   mine=await on_this_plane(db, principal, match.recipe.model_id)
                   if db is not None and principal is not None else None,
                   performance=await model_performance(db, match.recipe.model_id,
                                                       temporal_or_none(request.app.state))
                   if db is not None and principal is not None else None)
    performance: ModelPerformance | None = context["performance"]
    rows = [r for card in performance.view.cards for r in card.rows] if performance and performance.view else []
    context["compared"] = layouts_compared(hf_id, evidence, catalog, rows)
    return render(request, "model.html", **context)
