"""Artifact pages: the list with its states, the draft page (evidence and sizing side by side, the
tested command, links), and the review form, which sends the same `review` update as the API."""

from __future__ import annotations

from typing import get_args
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError

from api.deps import DbDep, SettingsDep, TemporalDep, temporal_or_none
from api.errors import ApiError
from api.responses import answer_fields
from api.services import artifacts as artifacts_service
from api.services.artifacts import artifact_id_of
from api.services.estimates import ask_for_estimates as ask
from console.memory import memory_chart, memory_rows
from console.rendering import ConsoleRoute, first, read_form, redirect, render
from console.session import ConsoleApprover, ConsoleOperator, ConsoleViewer, check_csrf
from console.tradeoff import draft_tradeoff
from console.views import (
    CommandChoice,
    command_view,
    default_choice,
    feature_rows,
    hardware_rows,
    layout_rows,
    max_num_seqs_rows,
    variant_rows,
)
from contracts.artifact import Stage
from wingsmith.adapters.recipes.files import load_catalog, load_catalog_version
from wingsmith.adapters.store import artifacts as store
from wingsmith.domain.draft_performance import PerformanceRow
from wingsmith.domain.drafts import SizingTarget, VariantSizing
from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.recipes.evidence import Evidence
from wingsmith.domain.recipes.layouts_compared import ChosenLayout, layouts_compared
from wingsmith.domain.review import ReviewDecision, Selections

router = APIRouter(route_class=ConsoleRoute)

STATES = list(get_args(Stage))


@router.get("")
async def artifact_list(request: Request, principal: ConsoleViewer, db: DbDep, state: str | None = Query(None)):
    state = state or None
    if state is not None and state not in STATES:
        raise ApiError(422, f"There is no state called {state!r}. States are: {', '.join(STATES)}.")
    rows = await store.list_artifacts(db, state=state, limit=500)
    return render(request, "artifacts.html", principal=principal, artifacts=rows, states=STATES, state=state)


def draft_path(artifact_id: str) -> str:
    return "/console/artifacts/" + quote(artifact_id, safe="/@")


def _catalog_for(version: str | None, settings) -> tuple[Catalog, str | None]:
    """The catalog the draft was built from, else the shipped one with a note saying so."""
    shipped = load_catalog()
    if not version:
        return shipped, None
    try:
        return load_catalog_version(version, settings.home_dir / "catalogs"), None
    except (LookupError, ValueError):
        return shipped, (f"This draft was built from recipe catalog {version}, which this plane no longer holds; "
                         f"the command below comes from catalog {shipped.version}.")


async def _draft_page(request: Request, org: str, name_at_sha: str, principal, db, settings, *,
                      choice: dict[str, str | None], status_code: int = 200, error: str | None = None,
                      comment: str = ""):
    art = answer_fields(await artifacts_service.get_artifact(artifact_id_of(org, name_at_sha), db=db, settings=settings,
                                                            temporal=temporal_or_none(request.app.state)))
    draft = art.get("draft") or None
    live = art.get("live") or {}
    state = live.get("stage") or art.get("state")
    evidence = sizing = target = catalog_note = command = seqs = None
    compared: list = []
    warnings: list[str] = []
    if draft:
        evidence = Evidence.model_validate(draft["evidence"]) if draft.get("evidence") else None
        sizing = [VariantSizing.model_validate(s) for s in (draft.get("sizing") or {}).get("sizing", [])]
        target_raw = (draft.get("sizing") or {}).get("target")
        target = SizingTarget.model_validate(target_raw) if target_raw else None
        warnings = list(draft.get("warnings") or [])
        if evidence is not None:
            catalog, catalog_note = _catalog_for(draft.get("catalog_version"), settings)
            recipe = catalog.recipes.get(evidence.recipe)
            if recipe is not None:
                base = default_choice(evidence, *((target.hardware, target.layout) if target else (None, None)))
                picked = CommandChoice(variant=choice.get("variant") or base.variant,
                                       hardware=choice.get("hardware") or base.hardware,
                                       layout=choice.get("layout") or base.layout)
                command = command_view(recipe, evidence, catalog, picked)
            seqs = max_num_seqs_rows(art.get("repo_id") or evidence.model_id, evidence, catalog)
            card = HARDWARE.get(target.hardware) if target else None
            chosen = {card.id: ChosenLayout(layout=target.layout, gpus=target.gpus, reason=target.reason,
                                            nodes=-(-target.gpus // card.gpus_per_node))} if card and target else {}
            compared = layouts_compared(art.get("repo_id") or evidence.model_id, evidence, catalog,
                                        [PerformanceRow.model_validate(r) for r in draft.get("performance") or []],
                                        chosen)
    memory = memory_rows(evidence, sizing or [])
    decided = request.query_params.get("decided")
    registered = request.query_params.get("registered")
    return render(
        request, "draft.html", status_code=status_code, principal=principal, art=art, state=state, live=live,
        draft=draft, evidence=evidence, target=target, warnings=warnings,
        variants=variant_rows(evidence, sizing or []), memory=memory,
        memory_picture=memory_chart(memory), tradeoff=draft_tradeoff(draft) if draft else None,
        layouts=layout_rows(evidence) if evidence else [], hardware=hardware_rows(evidence) if evidence else [],
        features=feature_rows(evidence) if evidence else [], command=command, seqs=seqs, catalog_note=catalog_note,
        compared=compared,
        can_review=principal.has("approver"), error=error, comment=comment, decided=decided, registered=registered,
        page_path=draft_path(art["id"]))


@router.get("/artifacts/{org}/{name_at_sha}")
async def draft_page(request: Request, org: str, name_at_sha: str, principal: ConsoleViewer, db: DbDep,
                     settings: SettingsDep, variant: str | None = None, hardware: str | None = None,
                     layout: str | None = None):
    return await _draft_page(request, org, name_at_sha, principal, db, settings,
                             choice={"variant": variant, "hardware": hardware, "layout": layout})


@router.post("/artifacts/{org}/{name_at_sha}/review")
async def review(request: Request, org: str, name_at_sha: str, principal: ConsoleApprover, db: DbDep,
                 settings: SettingsDep, temporal: TemporalDep):
    form = await read_form(request)
    check_csrf(request, form)
    comment = first(form, "comment")
    try:
        decision = ReviewDecision(
            decision=first(form, "decision"), comment=comment, draft_version=first(form, "draft_version") or 0,
            selections=Selections(variant=first(form, "variant") or None,
                                  features=[f for f in form.get("features", []) if f]))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return await _draft_page(request, org, name_at_sha, principal, db, settings, choice={},
                                 status_code=422, error=f"The decision could not be read ({problems}).",
                                 comment=comment)
    try:
        # The API's own review: same update, same validation, same error words.
        await artifacts_service.review(artifact_id_of(org, name_at_sha), decision, principal=principal,
                                       temporal=temporal)
    except ApiError as err:
        return await _draft_page(request, org, name_at_sha, principal, db, settings, choice={},
                                 status_code=err.status, error=err.message, comment=comment)
    return redirect(draft_path(f"{org}/{name_at_sha}") + "?" + urlencode({"decided": decision.decision}))


@router.post("/artifacts/{org}/{name_at_sha}/performance")
async def ask_for_estimates(request: Request, org: str, name_at_sha: str, principal: ConsoleOperator, db: DbDep,
                            settings: SettingsDep, temporal: TemporalDep):
    """The draft page's "ask for estimates" button (a draft that predates them): the API's own action."""
    form = await read_form(request)
    check_csrf(request, form)
    try:
        version = int(first(form, "draft_version") or "0")
    except ValueError:
        version = 0
    try:
        await ask(artifact_id_of(org, name_at_sha), version, db=db, temporal=temporal, settings=settings)
    except ApiError as err:
        return await _draft_page(request, org, name_at_sha, principal, db, settings, choice={},
                                 status_code=err.status, error=err.message)
    return redirect(draft_path(f"{org}/{name_at_sha}") + "#performance")
