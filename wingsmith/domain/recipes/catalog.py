"""Build, serialise, check and search the catalog: pure (texts in, models out).

A catalog's version names the upstream commits it was built from plus a hash of its content, so
two builds of the same facts get the same version and a draft can always find the catalog its
evidence came from. Reading snapshots and storing, loading and choosing catalogs on disk (the shipped
one, stored versions, the one in force) is wingsmith/adapters/recipes/files.py."""

from __future__ import annotations

import hashlib
import json
import re

from pydantic import BaseModel, ValidationError

from wingsmith.domain.recipes.dynamo_import import import_dynamo
from wingsmith.domain.recipes.models import Catalog, Recipe, RecipeMatch, SourceStamp
from wingsmith.domain.recipes.problems import ImportProblem, Snapshot
from wingsmith.domain.recipes.vllm_import import RECIPE_FILES, import_vllm

_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
_REPO = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+")


class ImportReport(BaseModel):
    recipe_files: int = 0
    recipes: int
    strategies: int
    hardware_profiles: int
    dynamo_files: int
    dynamo_entries: int
    problems: list[ImportProblem]


def source_stamp(text: str | None) -> SourceStamp:
    """The repository and commit a snapshot's SOURCE.md says it came from, when it says so."""
    if text is None:
        return SourceStamp()
    commit = _COMMIT.search(text)
    repo = _REPO.search(text)
    return SourceStamp(repository=repo.group(0) if repo else None, commit=commit.group(0) if commit else None)


def catalog_version(body: dict) -> str:
    """`vllm-<commit12>.dynamo-<commit12>.<content hash12>`; `unknown` where a commit is not known."""
    canonical = json.dumps({k: v for k, v in body.items() if k != "version"}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    vllm = (body["vllm_source"].get("commit") or "unknown")[:12]
    dynamo = (body["dynamo_source"].get("commit") or "unknown")[:12]
    return f"vllm-{vllm}.dynamo-{dynamo}.{digest}"


def catalog_from_snapshots(vllm: Snapshot, dynamo: Snapshot, *, vllm_source: SourceStamp,
                           dynamo_source: SourceStamp) -> tuple[Catalog, ImportReport]:
    """The catalog of a vLLM recipes snapshot and a Dynamo snapshot, and what the import said about them."""
    recipes, strategies, hardware, problems = import_vllm(vllm)
    entries, dyn_problems, dyn_files = import_dynamo(dynamo)
    body = {
        "version": "",
        "vllm_source": vllm_source.model_dump(),
        "dynamo_source": dynamo_source.model_dump(),
        "recipes": {k: v.model_dump(mode="json") for k, v in sorted(recipes.items())},
        "strategies": {k: v.model_dump(mode="json") for k, v in sorted(strategies.items())},
        "hardware": {k: v.model_dump(mode="json") for k, v in sorted(hardware.items())},
        "dynamo": [e.model_dump(mode="json") for e in entries],
    }
    body["version"] = catalog_version(body)
    recipe_files = sum(1 for path in vllm if RECIPE_FILES.fullmatch(path))
    report = ImportReport(recipe_files=recipe_files, recipes=len(recipes), strategies=len(strategies),
                          hardware_profiles=len(hardware),
                          dynamo_files=dyn_files, dynamo_entries=len(entries),
                          problems=problems + [p.model_copy(update={"file": f"dynamo:{p.file}"}) for p in dyn_problems])
    return Catalog.model_validate(body), report


def catalog_json(catalog: Catalog) -> str:
    # Not key-sorted: variants, features and modes keep upstream's order (recipes are sorted at build).
    return json.dumps(catalog.model_dump(mode="json"), indent=1) + "\n"


def parse_catalog(text: str, where: object = "catalog") -> Catalog:
    """A stored catalog's text, refused when its content does not match its version (`where` names it)."""
    catalog = Catalog.model_validate_json(text)
    if catalog_version(json.loads(text)) != catalog.version:
        raise ValueError(f"{where}: content does not match its version {catalog.version} (edited by hand?)")
    return catalog


# Precision words a checkpoint id carries (`...-FP8`, `...-NVFP4`), as the recipes name their variants' precision.
_PRECISION_WORDS = ("nvfp4", "mxfp4", "mxfp8", "fp4", "fp8", "bf16", "int4", "int8", "awq", "gptq")


def precision_in_id(hf_id: str) -> str | None:
    """The precision a checkpoint id names (`nvidia/X-NVFP4` -> nvfp4), or None."""
    tokens = set(re.split(r"[-_./]", hf_id.lower()))
    return next((word for word in _PRECISION_WORDS if word in tokens), None)


def find_recipe(catalog: Catalog, hf_id: str, precision: str | None = None) -> RecipeMatch | None:
    """The recipe and variant a checkpoint id asks for: a variant whose own `model_id` is exactly this id
    first (a BF16 checkpoint that is also the recipe's id is that BF16 variant, not the default NVFP4 one);
    then, for the recipe's path or id, the variant of the precision given or named in the id; then the
    recipe's default variant."""
    wanted = hf_id.strip().lower()
    for recipe in catalog.recipes.values():
        for name, variant in recipe.variants.items():
            if variant.model_id and variant.model_id.lower() == wanted:
                return RecipeMatch(recipe=recipe, variant=name, matched_by="variant model_id")
    asked = (precision or precision_in_id(wanted) or "").lower()
    for recipe in catalog.recipes.values():
        if wanted in (recipe.path.lower(), recipe.model_id.lower()):
            # Only a variant that loads this very checkpoint (no model_id of its own) can match by precision.
            same = [n for n, v in recipe.variants.items() if not v.model_id and v.precision.lower() == asked]
            if asked and same and recipe.default_variant not in same:
                return RecipeMatch(recipe=recipe, variant=same[0], matched_by="variant precision")
            return RecipeMatch(recipe=recipe, variant=recipe.default_variant, matched_by="recipe path")
    return None


class RecipeEditRefused(ValueError):
    pass


def _assign(target: dict, dotted: str, value: object) -> None:
    *path, last = dotted.split(".")
    for part in path:
        child = target.get(part)
        if not isinstance(child, dict):
            raise RecipeEditRefused(f"{dotted}: {part!r} is not an object in this recipe")
        target = child
    target[last] = value


def edit_recipe(catalog: Catalog, hf_id: str, changes: dict[str, object]) -> Catalog:
    """A new catalog version in which the recipe `hf_id` finds has these fields set (dotted keys into
    the recipe as the catalog holds it, e.g. `variants.default.vram_minimum_gb`): the local stand-in
    for an upstream recipe change, so the watch's catalog trigger can be tried offline."""
    match = catalog.find(hf_id)
    if match is None:
        raise RecipeEditRefused(f"no recipe for {hf_id} in catalog {catalog.version}")
    body = catalog.model_dump(mode="json")
    recipe = body["recipes"][match.recipe.path]
    for key, value in changes.items():
        _assign(recipe, key, value)
    try:
        body["recipes"][match.recipe.path] = Recipe.model_validate(recipe).model_dump(mode="json")
    except ValidationError as exc:
        raise RecipeEditRefused(f"the edited recipe is not valid: {exc.errors()[0]['loc']}: "
                                f"{exc.errors()[0]['msg']}") from None
    body["version"] = catalog_version(body)
    return Catalog.model_validate(body)
