"""Upstream's rules for reading a recipe on a given card and layout, shared by the evidence view
and command synthesis so the two can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from wingsmith.domain.dynamo.engine_args import drop_flags
from wingsmith.domain.dynamo.ranks import PARALLEL_FLAGS
from wingsmith.domain.dynamo.rollout_spec import Engine
from wingsmith.domain.recipes.models import Catalog, Feature, HardwareProfile, Recipe, Strategy, Variant

T = TypeVar("T")

# Stated by upstream only in feature descriptions, so the importer cannot read it as data.
EXCLUSIVE_FEATURES: list[tuple[str, str]] = [("text_only", "encoder_parallel")]


class InvalidChoice(ValueError):
    """A (variant, hardware, layout, features) choice the recipe does not allow; the message says why."""


class BelowFloor(InvalidChoice):
    """The recipe's own shape for a variant on a card holds less memory than the variant's published
    floor for one replica: not a shape to offer (a multi-node layout may be, unless `pin` names the
    recipe's pin that fixed the shape: a pin is kept, or the shape refused)."""

    def __init__(self, message: str, pin: str | None = None):
        super().__init__(message)
        self.pin = pin


# The layout that runs a single-node layout's parallelism across whole nodes.
MULTI_NODE_OF = {"single_node_tp": "multi_node_tp", "single_node_tep": "multi_node_tep",
                 "single_node_dep": "multi_node_dep"}


def hardware_keys(profile: HardwareProfile) -> list[str]:
    """Override keys that can address a card, most specific first: its id, its generation, its brand."""
    return [profile.id, profile.generation, profile.brand.lower()]


def pick(overrides: Mapping[str, T], profile: HardwareProfile) -> tuple[str | None, T | None]:
    for key in hardware_keys(profile):
        if key in overrides:
            return key, overrides[key]
    return None, None


def profile_for(catalog: Catalog, hardware: str) -> HardwareProfile:
    profile = catalog.hardware.get(hardware.lower())
    if profile is None:
        raise InvalidChoice(f"unknown hardware {hardware!r}; the recipe vocabulary knows: "
                            f"{', '.join(sorted(catalog.hardware))}")
    return profile


# The words a recipe's `meta.hardware` uses for a card: a verified run; said to work without a
# verified run (`supported`, e.g. LTX-2.5 on rtx_pro_6000); or not to work.
HARDWARE_STATUSES = ("verified", "supported", "unsupported")


def hardware_status(recipe: Recipe, hardware_id: str) -> str:
    """verified / supported / unsupported / not_stated, as the recipe states it (the importer keeps
    only those words)."""
    value = recipe.hardware.get(hardware_id)
    if value in HARDWARE_STATUSES:
        return value
    return "not_stated" if value is None else value


def _grant(recipe: Recipe, strategy: str, hardware_id: str, profile: HardwareProfile | None) -> str | None:
    """The recipe's strategy_hardware word for a layout on a card: exact id > generation > brand >
    `default`, the first key present wins."""
    grants = recipe.strategy_hardware.get(strategy, {})
    keys = [*hardware_keys(profile), "default"] if profile else [hardware_id, "default"]
    return next((grants[k] for k in keys if k in grants), None)


def layout_allowed(recipe: Recipe, strategy: Strategy, hardware_id: str,
                   profile: HardwareProfile | None = None) -> tuple[bool, str]:
    """Whether a layout is offered on a card: compatible strategies, then per-hardware opt-in/out."""
    grant = _grant(recipe, strategy.name, hardware_id, profile)
    listed = strategy.name in recipe.compatible_strategies
    if grant == "unsupported":
        return False, f"the recipe marks {strategy.name} unsupported on {hardware_id}"
    if not listed and grant != "supported":
        granted = sorted(h for h, v in recipe.strategy_hardware.get(strategy.name, {}).items() if v == "supported")
        where = f" (only on {', '.join(granted)})" if granted else ""
        return False, f"{strategy.name} is not a compatible layout of {recipe.path}{where}"
    if strategy.moe_only and recipe.architecture != "moe":
        return False, f"{strategy.name} is for MoE models and {recipe.path} is {recipe.architecture}"
    return True, "listed in compatible_strategies" if listed else f"opted in for {hardware_id}"


def minimum_gpus(recipe: Recipe, strategy: Strategy, hardware_id: str,
                 profile: HardwareProfile | None = None) -> int:
    # A card key in strategy_min_gpus raises the floor of every layout on that card (or of the layouts
    # it names); the highest floor wins. An explicit per-card grant is the recipe's own validated
    # shape, so the layout's generic floor yields to it. pd_cluster pools are sized by the recipe's
    # own per-role node counts, not by a GPU picker.
    granted = (_grant(recipe, strategy.name, hardware_id, profile) == "supported"
               or strategy.deploy_type == "pd_cluster")
    floors = recipe.strategy_min_gpus
    card = floors.get(hardware_id, 1)
    card_floor = card.get(strategy.name, 1) if isinstance(card, dict) else card
    layout_floor = floors.get(strategy.name, floors.get("default", 1))
    return max(1 if granted else strategy.min_gpus, layout_floor if isinstance(layout_floor, int) else 1, card_floor)


def is_opt_in(recipe: Recipe, feature: str, hardware_id: str) -> bool:
    return feature in recipe.opt_in_features or feature in recipe.hardware_opt_in_features.get(hardware_id, [])


def exclusions(recipe: Recipe) -> list[tuple[str, str]]:
    return [(a, b) for a, b in EXCLUSIVE_FEATURES if a in recipe.features and b in recipe.features]


def feature_gated(feature: Feature, layout: str) -> bool:
    return feature.strategies is not None and layout not in feature.strategies


def _for_card(value: int | dict[str, int] | None, profile: HardwareProfile) -> int | None:
    if isinstance(value, dict):
        for key in (*hardware_keys(profile), "default"):
            if key in value:
                return value[key]
        return None
    return value


TP_FLAGS, PP_FLAGS, DP_FLAGS, DP_LOCAL_FLAGS = PARALLEL_FLAGS[Engine.vllm]
SIZE_FLAGS = TP_FLAGS + PP_FLAGS + DP_FLAGS + DP_LOCAL_FLAGS


def args_size(args: list[str], names: tuple[str, ...]) -> int | None:
    """The size the last of these flags (any spelling, `--flag N` or `--flag=N`) sets in `args`, as vLLM
    reads it."""
    found = None
    for i, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in names:
            raw = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            found = int(raw) if raw.isdigit() else found
    return found


def args_tp(args: list[str]) -> int | None:
    """A `--tensor-parallel-size N` (or `-tp N`) the args set: for a variant's own args, the size upstream tested."""
    return args_size(args, TP_FLAGS)


def without_sizes(args: list[str]) -> list[str]:
    """`args` without the parallel sizes (TP, PP, DP, DP per node, in any spelling): the layout states them."""
    return drop_flags(args, SIZE_FLAGS, ())


def pinned_tp(recipe: Recipe, layout: str, profile: HardwareProfile, variant: Variant | None = None) -> int | None:
    """The tensor-parallel size the recipe tests for a layout on a card: its strategy override's
    size (per card, or for all cards), else the variant's `tp` (per card or one size), else a
    `--tensor-parallel-size` in the variant's own args."""
    override = recipe.strategy_overrides.get(layout)
    tp = _for_card(override.tp if override else None, profile)
    if tp is None and variant is not None:
        tp = _for_card(variant.tp, profile) or args_tp(variant.args)
    return tp


def pinned_for_every_card(recipe: Recipe, layout: str, profile: HardwareProfile, variant: Variant) -> bool:
    """Whether the pinned size is one number for every card (`tp: 4`), rather than this card's own:
    upstream writes such a pin for its usual 8-GPU nodes, and runs smaller nodes whole."""
    override = recipe.strategy_overrides.get(layout)
    for value in (override.tp if override else None, variant.tp):
        if isinstance(value, dict) and _for_card(value, profile) is not None:
            return False
        if isinstance(value, int):
            return True
    return args_tp(variant.args) is not None


def shape_gb(profile: HardwareProfile, gpus: int) -> float:
    """Device memory of `gpus` GPUs of a card, in the taxonomy's decimal GB (it states it per node)."""
    return profile.vram_gb / profile.gpu_count * gpus


def unsupported_on(support: dict[str, str], profile: HardwareProfile) -> bool:
    """A feature's or mode's tri-state `hardware:` map, keyed by card id or generation (or brand)."""
    return any(support.get(key) == "unsupported" for key in hardware_keys(profile))


def feature_unsupported(feature: Feature, profile: HardwareProfile) -> bool:
    return unsupported_on(feature.hardware, profile)


# Upstream: FP4 storage formats need Blackwell unless a variant's precision_hardware widens that.
PRECISION_HARDWARE: dict[str, dict[str, list[str]]] = {
    "nvfp4": {"brand": ["nvidia"], "generation": ["blackwell"]},
    "fp4": {"brand": ["nvidia"], "generation": ["blackwell"]},
}


def precision_problem(variant: Variant, profile: HardwareProfile) -> str | None:
    """Why a variant's precision cannot run on a card, if it cannot: the hardware its storage format
    implies (FP4: NVIDIA Blackwell), as widened by the variant's own `precision_hardware`."""
    rule = variant.precision_hardware or PRECISION_HARDWARE.get(variant.precision.lower())
    if not rule:
        return None
    brands, generations = rule.get("brand"), rule.get("generation")
    if brands and profile.brand.lower() not in brands:
        return f"{variant.precision} needs {' or '.join(brands)} hardware, not {profile.brand}"
    if generations and profile.generation.lower() not in generations:
        return f"{variant.precision} needs {' or '.join(generations)}, not {profile.generation} ({profile.id})"
    return None
