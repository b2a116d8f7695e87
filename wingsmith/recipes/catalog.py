"""Build, store, load and search the catalog.

A catalog's version names the upstream commits it was built from plus a hash of its content, so
two builds of the same facts get the same version and a draft can always find the catalog its
evidence came from. Stored versions are written once and never rewritten."""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ValidationError

from wingsmith.recipes.dynamo_import import import_dynamo
from wingsmith.recipes.models import Catalog, Recipe, RecipeMatch, SourceStamp
from wingsmith.recipes.problems import ImportProblem
from wingsmith.recipes.vllm_import import import_vllm

SHIPPED_CATALOG = Path(__file__).with_name("catalog.json")
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


def read_source_stamp(root: Path) -> SourceStamp:
    """The repository and commit a snapshot says it came from (its SOURCE.md), when it says so."""
    source = root / "SOURCE.md"
    if not source.exists():
        return SourceStamp()
    text = source.read_text()
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


def build_catalog(vllm_dir: Path, dynamo_dir: Path, *, vllm_source: SourceStamp | None = None,
                  dynamo_source: SourceStamp | None = None) -> tuple[Catalog, ImportReport]:
    recipes, strategies, hardware, problems = import_vllm(Path(vllm_dir))
    entries, dyn_problems, dyn_files = import_dynamo(Path(dynamo_dir))
    body = {
        "version": "",
        "vllm_source": (vllm_source or read_source_stamp(Path(vllm_dir))).model_dump(),
        "dynamo_source": (dynamo_source or read_source_stamp(Path(dynamo_dir))).model_dump(),
        "recipes": {k: v.model_dump(mode="json") for k, v in sorted(recipes.items())},
        "strategies": {k: v.model_dump(mode="json") for k, v in sorted(strategies.items())},
        "hardware": {k: v.model_dump(mode="json") for k, v in sorted(hardware.items())},
        "dynamo": [e.model_dump(mode="json") for e in entries],
    }
    body["version"] = catalog_version(body)
    recipe_files = len(list((Path(vllm_dir) / "models").glob("*/*.yaml")))
    report = ImportReport(recipe_files=recipe_files, recipes=len(recipes), strategies=len(strategies),
                          hardware_profiles=len(hardware),
                          dynamo_files=dyn_files, dynamo_entries=len(entries),
                          problems=problems + [p.model_copy(update={"file": f"dynamo:{p.file}"}) for p in dyn_problems])
    return Catalog.model_validate(body), report


def catalog_json(catalog: Catalog) -> str:
    # Not key-sorted: variants, features and modes keep upstream's order (recipes are sorted at build).
    return json.dumps(catalog.model_dump(mode="json"), indent=1) + "\n"


def write_catalog(catalog: Catalog, path: Path) -> None:
    """Write (or replace) one file atomically: used for the shipped catalog and `--out`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(catalog_json(catalog))
    os.replace(tmp, path)


class CatalogVersionExists(Exception):
    pass


def store_catalog_version(catalog: Catalog, directory: Path) -> Path:
    """Add a catalog to a directory of versions. A version is never rewritten: drafts point at it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{catalog.version}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise CatalogVersionExists(f"catalog version {catalog.version} is already stored at {path}") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(catalog_json(catalog))
    return path


def read_catalog(path: Path) -> Catalog:
    catalog = Catalog.model_validate_json(Path(path).read_text())
    if catalog_version(json.loads(Path(path).read_text())) != catalog.version:
        raise ValueError(f"{path}: content does not match its version {catalog.version} (edited by hand?)")
    return catalog


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with the plane (built from ../shared/upstream by `wingsmith recipes import`)."""
    return read_catalog(SHIPPED_CATALOG)


def load_catalog_version(version: str, directory: Path | None = None) -> Catalog:
    """The catalog a draft was built from: the shipped one or a stored refresh."""
    shipped = load_catalog()
    if version == shipped.version:
        return shipped
    if directory is not None:
        path = Path(directory) / f"{version}.json"
        if path.exists():
            return read_catalog(path)
    raise LookupError(f"catalog version {version!r} is not the shipped one and is not stored"
                      + (f" in {directory}" if directory else ""))


def find_recipe(catalog: Catalog, hf_id: str) -> RecipeMatch | None:
    wanted = hf_id.strip().lower()
    for recipe in catalog.recipes.values():
        if wanted in (recipe.path.lower(), recipe.model_id.lower()):
            return RecipeMatch(recipe=recipe, variant="default", matched_by="recipe path")
    for recipe in catalog.recipes.values():
        for name, variant in recipe.variants.items():
            if variant.model_id and variant.model_id.lower() == wanted:
                return RecipeMatch(recipe=recipe, variant=name, matched_by="variant model_id")
    return None


# --- the catalog in force: what new drafts are built from ------------------------------------------
# The shipped catalog, unless `<catalogs dir>/in-force` names a stored version (a refresh, or a local
# edit). The watch compares it with the catalog an approved draft came from.

IN_FORCE = "in-force"


def catalog_in_force(directory: Path | None) -> Catalog:
    if directory is None:
        return load_catalog()
    try:
        version = (Path(directory) / IN_FORCE).read_text().strip()
    except FileNotFoundError:
        return load_catalog()
    return _stored_version(version, str(Path(directory)))


@lru_cache(maxsize=8)
def _stored_version(version: str, directory: str) -> Catalog:
    # Stored versions are never rewritten, so a version read once stays right.
    return load_catalog_version(version, Path(directory))


def catalog_of_draft(version: str | None, directory: Path | None) -> Catalog:
    """The catalog a draft's evidence came from, which a workload planned from that draft must use
    (its flags are what the reviewer approved); the shipped one if the draft names no other, or if
    this plane no longer holds that version."""
    if not version or version == load_catalog().version or directory is None:
        return load_catalog()
    try:
        return _stored_version(version, str(Path(directory)))
    except (LookupError, ValueError):
        return load_catalog()


def put_in_force(catalog: Catalog, directory: Path) -> Path:
    """Store the catalog (if it is new) and make it the one new drafts are built from."""
    directory = Path(directory)
    if catalog.version != load_catalog().version:
        try:
            store_catalog_version(catalog, directory)
        except CatalogVersionExists:
            pass
    directory.mkdir(parents=True, exist_ok=True)
    pointer = directory / IN_FORCE
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(catalog.version + "\n")
    os.replace(tmp, pointer)
    return pointer


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
