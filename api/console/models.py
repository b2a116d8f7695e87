"""The public model pages: what the plane knows about serving a model, from the recipe catalog alone,
readable without a token (nothing here is registered or secret)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.console.journey import journey_steps
from api.console.rendering import ConsoleRoute, render
from api.console.views import (
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
from api.errors import ApiError
from wingsmith.recipes import dynamo_entries, evidence_for, load_catalog

router = APIRouter(route_class=ConsoleRoute)


@router.get("/models")
def model_index(request: Request):
    catalog = load_catalog()
    recipes = sorted(catalog.recipes.values(), key=lambda r: r.path.lower())
    return render(request, "models.html", recipes=recipes, catalog=catalog)


@router.get("/models/{org}/{name}")
def model_page(request: Request, org: str, name: str, variant: str | None = None, hardware: str | None = None,
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
    shown = command.command
    steps = journey_steps(str(request.base_url), match.recipe.model_id, hardware=choice.hardware,
                          gpus=shown.gpus if shown else 8, layout=choice.layout)
    entries = [(e, dynamo_link(catalog, e.source_path)) for e in dynamo_entries(hf_id, catalog)]
    return render(request, "model.html", catalog=catalog, recipe=match.recipe, evidence=evidence,
                  variants=published_variant_rows(evidence), layouts=layout_rows(evidence),
                  hardware=hardware_rows(evidence), features=feature_rows(evidence), command=command,
                  steps=steps, seqs=max_num_seqs_rows(hf_id, evidence, catalog), entries=entries,
                  page_path=f"/console/models/{org}/{name}")
