"""The recipe evidence a draft carries: what upstream tested, stated as facts the reviewer can check
against the recipe file at its pinned commit."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.hardware import HARDWARE, NVIDIA_HARDWARE
from wingsmith.domain.recipes.command import offered_command
from wingsmith.domain.recipes.models import Catalog, Dependency, InstallPath, OmniTask, Recipe, RecipeMatch
from wingsmith.domain.recipes.rules import (
    MULTI_NODE_OF,
    BelowFloor,
    InvalidChoice,
    exclusions,
    hardware_status,
    is_opt_in,
    layout_allowed,
)


class VariantEvidence(BaseModel, frozen=True):
    name: str
    precision: str
    label: str | None
    checkpoint: str
    vram_minimum_gb: float
    is_estimate: bool
    supported_hardware: list[str] | None = None
    precision_hardware: dict[str, list[str]] = {}
    matched: bool = False


class TestedShape(BaseModel, frozen=True):
    """The GPU count a variant runs on with the default layout on one card: the TP its recipe pins, else the
    smallest shape that holds its floor (the same count `serve_command` builds).
    Where that single-node shape holds less than the variant's floor, the layout's multi-node form,
    with a note saying so."""
    variant: str
    hardware: str
    layout: str
    gpus: int
    nodes: int
    note: str | None = None
    reason: str = ""  # why this GPU count (serve_command's shape_reason)
    pin: str | None = None  # the recipe's pin the shape keeps, naming it


class LayoutEvidence(BaseModel, frozen=True):
    name: str
    default: bool
    deploy_type: str
    compatible: bool  # listed in compatible_strategies (else only opted in per hardware)
    allowed: list[str]
    denied: dict[str, str]  # hardware -> why
    # Per allowed hardware: the GPUs the default variant's command takes there (what the planner builds
    # when no count is asked for), never merely the layout's bare minimum.
    minimum_gpus: dict[str, int]


class HardwareEvidence(BaseModel, frozen=True):
    id: str
    display_name: str
    brand: str
    generation: str
    status: Literal["verified", "supported", "unsupported", "not_stated"]
    gpus_per_node: int | None
    memory_gb_per_node: float | None
    memory_gb_per_gpu: float | None
    placeable: bool


class FeatureModeEvidence(BaseModel, frozen=True):
    args: list[str]
    variants: list[str] | None
    hardware_overrides: dict[str, list[str]]
    unsupported_on: list[str]


class FeatureEvidence(BaseModel, frozen=True):
    name: str
    default: Literal["on", "opt_in"]
    opt_in_on: list[str]  # hardware where an on-by-default feature becomes opt-in
    args: list[str]
    env: dict[str, str]
    hardware_overrides: dict[str, list[str]]  # replaces args on that hardware
    unsupported_on: list[str] = []  # cards the feature is never built for
    strategies: list[str] | None  # None: every layout
    modes: dict[str, FeatureModeEvidence]
    default_mode: str | None
    excludes: list[str]


class Links(BaseModel, frozen=True):
    recipe: str | None
    strategies: dict[str, str]
    repository: str | None
    commit: str | None


class Evidence(BaseModel, frozen=True):
    catalog_version: str
    recipe: str
    model_id: str
    matched_variant: str
    matched_by: str | None
    architecture: str | None
    parameter_count: str | None
    context_length: int | None
    min_vllm_version: str | None
    default_variant: str
    variants: list[VariantEvidence]
    default_layout: str | None  # None: no layout (vLLM-Omni recipes, or none that imported)
    layouts: list[LayoutEvidence]
    tested_shapes: list[TestedShape] = []
    omni: bool = False
    omni_tasks: list[OmniTask] = []
    docker_images: dict[str, str] = {}
    supports_dcp: bool | None = None
    kv_offload_support: dict[str, str] = {}
    nightly_required: bool = False
    flashinfer_autotune: bool | None = None
    install: dict[str, InstallPath] = {}
    dependencies: list[Dependency] = []
    default_hardware: str | None
    hardware: list[HardwareEvidence]
    features: list[FeatureEvidence]
    exclusions: list[tuple[str, str]]
    links: Links


def _link(repo: str | None, commit: str | None, path: str) -> str | None:
    return f"{repo}/blob/{commit}/{path}" if repo and commit else None


def _hardware(catalog: Catalog, recipe: Recipe) -> list[HardwareEvidence]:
    # The recipe's list as it states it, then the placeable cards it says nothing about.
    ids = list(recipe.hardware) + [h.id for h in NVIDIA_HARDWARE if h.id not in recipe.hardware]
    out = []
    for hw in ids:
        profile = catalog.hardware.get(hw)
        plane = HARDWARE.get(hw)
        out.append(HardwareEvidence(
            id=hw, display_name=(profile.display_name if profile else plane.display_name if plane else hw),
            brand=profile.brand if profile else (plane.vendor if plane else "unknown"),
            generation=profile.generation if profile else (plane.generation if plane else "unknown"),
            status=hardware_status(recipe, hw),
            gpus_per_node=profile.gpu_count if profile else (plane.gpus_per_node if plane else None),
            memory_gb_per_node=profile.vram_gb if profile else None,
            memory_gb_per_gpu=round(profile.vram_gb / profile.gpu_count, 1) if profile else
            (plane.memory_gb_per_gpu if plane else None),
            placeable=bool(plane and plane.placeable)))
    return out


def evidence_for(match_or_recipe: RecipeMatch | Recipe, catalog: Catalog) -> Evidence:
    if isinstance(match_or_recipe, RecipeMatch):
        recipe, matched, matched_by = match_or_recipe.recipe, match_or_recipe.variant, match_or_recipe.matched_by
    else:
        recipe, matched, matched_by = match_or_recipe, "default", None
    hardware = _hardware(catalog, recipe)
    stated = [h.id for h in hardware if h.status != "unsupported" and h.id in catalog.hardware]

    names = list(recipe.compatible_strategies) + [
        s for s, grants in recipe.strategy_hardware.items()
        if s not in recipe.compatible_strategies and "supported" in grants.values()]
    default_layout = recipe.default_strategy or ("single_node_tp" if "single_node_tp" in names
                                                  else names[0] if names else None)
    default_variant = recipe.default_variant
    layouts = []
    for name in names:
        strategy = catalog.strategies.get(name)
        if strategy is None:
            continue
        allowed, denied, floors = [], {}, {}
        for hw in stated:
            ok, why = layout_allowed(recipe, strategy, hw, catalog.hardware.get(hw))
            if not ok:
                denied[hw] = why
                continue
            # Offered only if the command for it can be built: one set of rules for both views, and its
            # GPU count is the one the planner builds.
            try:
                command = offered_command(recipe, default_variant, hw, name, [], catalog=catalog)
            except InvalidChoice as exc:
                denied[hw] = str(exc)
                continue
            allowed.append(hw)
            floors[hw] = command.gpus
        layouts.append(LayoutEvidence(name=name, default=name == default_layout, deploy_type=strategy.deploy_type,
                                      compatible=name in recipe.compatible_strategies, allowed=allowed,
                                      denied=denied, minimum_gpus=floors))

    pairs = exclusions(recipe)
    features = []
    for name, feature in recipe.features.items():
        features.append(FeatureEvidence(
            name=name, default="opt_in" if name in recipe.opt_in_features else "on",
            opt_in_on=sorted(hw for hw in recipe.hardware_opt_in_features
                             if name not in recipe.opt_in_features and is_opt_in(recipe, name, hw)),
            args=feature.args, env=feature.env, hardware_overrides=feature.hardware_overrides,
            unsupported_on=sorted(h for h, v in feature.hardware.items() if v == "unsupported"),
            strategies=feature.strategies,
            modes={m: FeatureModeEvidence(args=spec.args, variants=spec.variants,
                                          hardware_overrides=spec.hardware_overrides,
                                          unsupported_on=sorted(h for h, v in spec.hardware.items()
                                                                if v == "unsupported"))
                   for m, spec in feature.modes.items()},
            default_mode=feature.default_mode,
            excludes=[b if a == name else a for a, b in pairs if name in (a, b)]))

    repo, commit = catalog.vllm_source.repository, catalog.vllm_source.commit
    return Evidence(
        catalog_version=catalog.version, recipe=recipe.path, model_id=recipe.model_id, matched_variant=matched,
        matched_by=matched_by, architecture=recipe.architecture, parameter_count=recipe.parameter_count,
        context_length=recipe.context_length, min_vllm_version=recipe.min_vllm_version,
        default_variant=default_variant, tested_shapes=_tested_shapes(catalog, recipe, default_layout, layouts),
        omni=recipe.omni, omni_tasks=recipe.omni_tasks, docker_images=recipe.docker_images,
        supports_dcp=recipe.supports_dcp, kv_offload_support=recipe.kv_offload_support,
        nightly_required=recipe.nightly_required, flashinfer_autotune=recipe.flashinfer_autotune,
        install=recipe.install, dependencies=recipe.dependencies,
        variants=[VariantEvidence(name=n, precision=v.precision, label=v.label,
                                  checkpoint=v.model_id or recipe.model_id,
                                  vram_minimum_gb=v.vram_minimum_gb, is_estimate=v.is_estimate,
                                  supported_hardware=v.supported_hardware, precision_hardware=v.precision_hardware,
                                  matched=n == matched)
                  for n, v in recipe.variants.items()],
        default_layout=default_layout, layouts=layouts, default_hardware=recipe.default_hardware,
        hardware=hardware, features=features, exclusions=pairs,
        links=Links(recipe=_link(repo, commit, recipe.source_path),
                    strategies={n: link for n in names if n in catalog.strategies
                                and (link := _link(repo, commit, catalog.strategies[n].source_path))},
                    repository=repo, commit=commit))


def _tested_shapes(catalog: Catalog, recipe: Recipe, layout: str | None,
                   layouts: list[LayoutEvidence]) -> list[TestedShape]:
    """Each variant's GPU count on every card its default layout is offered on: what serve_command
    builds when no count is asked for, so the draft, `size --gpus` and the command agree."""
    entry = next((e for e in layouts if e.name == layout), None)
    if entry is None or layout is None:
        return []
    # Every card the layout is stated for: the default variant may be below its floor on one where a
    # smaller variant is not.
    cards = entry.allowed + [hw for hw, why in entry.denied.items() if "below its floor" in why]
    wider = MULTI_NODE_OF.get(layout)
    shapes = []
    for name in recipe.variants:
        for hw in cards:
            note = None
            try:
                command = offered_command(recipe, name, hw, layout, [], catalog=catalog)
            except BelowFloor as exc:
                allowed_wider = wider and any(e.name == wider and hw in e.allowed for e in layouts)
                if not allowed_wider or exc.pin:  # a pinned size is kept, never traded for a wider layout
                    continue
                try:
                    command = offered_command(recipe, name, hw, wider or "", [], catalog=catalog)
                except InvalidChoice:
                    continue
                note = f"{exc}; the recipe's {wider} shape instead"
            except InvalidChoice:
                continue  # this variant does not run there (e.g. supported_hardware)
            shapes.append(TestedShape(variant=name, hardware=hw, layout=command.layout, gpus=command.gpus,
                                      nodes=command.nodes, note=note, reason=command.shape_reason, pin=command.pin))
    return shapes
