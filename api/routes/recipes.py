"""Recipe evidence over HTTP: the catalog's recipes, and one model's evidence with its Dynamo entries."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from api.auth import Viewer
from api.errors import ApiError
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.recipes import DynamoEntry, Evidence, dynamo_entries, evidence_for

router = APIRouter(prefix="/v1/recipes", tags=["recipes"])


class RecipeSummary(BaseModel):
    recipe: str
    model_id: str
    title: str
    variants: list[str]
    checkpoints: list[str]
    hardware: dict[str, str]
    source_path: str


class RecipeList(BaseModel):
    catalog_version: str
    recipes: list[RecipeSummary]


class RecipeEvidence(BaseModel):
    catalog_version: str
    evidence: Evidence
    dynamo: list[DynamoEntry]


@router.get("", response_model=RecipeList, summary="Recipes in the catalog")
def list_recipes(_: Viewer) -> RecipeList:
    catalog = load_catalog()
    return RecipeList(catalog_version=catalog.version, recipes=[
        RecipeSummary(recipe=r.path, model_id=r.model_id, title=r.title, variants=list(r.variants),
                      checkpoints=[v.model_id or r.model_id for v in r.variants.values()],
                      hardware=r.hardware, source_path=r.source_path)
        for r in catalog.recipes.values()])


@router.get("/{org}/{name}", response_model=RecipeEvidence, summary="A model's recipe evidence and Dynamo entries")
def get_recipe(org: str, name: str, _: Viewer) -> RecipeEvidence:
    catalog = load_catalog()
    hf_id = f"{org}/{name}"
    match = catalog.find(hf_id)
    if match is None:
        raise ApiError(404, f"no recipe for {hf_id} in catalog {catalog.version}", details={"model": hf_id})
    return RecipeEvidence(catalog_version=catalog.version, evidence=evidence_for(match, catalog),
                          dynamo=dynamo_entries(hf_id, catalog))
