"""Upstream's rules for reading a recipe on a given card and layout, shared by the evidence view
and command synthesis so the two can never disagree."""

from __future__ import annotations

from typing import TypeVar

from wingsmith.recipes.models import Catalog, Feature, HardwareProfile, Recipe, Strategy, Variant

T = TypeVar("T")

# Stated by upstream only in feature descriptions, so the importer cannot read it as data.
EXCLUSIVE_FEATURES: list[tuple[str, str]] = [("text_only", "encoder_parallel")]


class InvalidChoice(ValueError):
    """A (variant, hardware, layout, features) choice the recipe does not allow; the message says why."""


def hardware_keys(profile: HardwareProfile) -> list[str]:
    """Override keys that can address a card, most specific first: its id, its generation, its brand."""
    return [profile.id, profile.generation, profile.brand.lower()]


def pick(overrides: dict[str, T], profile: HardwareProfile) -> tuple[str | None, T | None]:
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


def hardware_status(recipe: Recipe, hardware_id: str) -> str:
    """verified / unsupported / not_stated, as the recipe states it."""
    value = recipe.hardware.get(hardware_id)
    if value in ("verified", "unsupported"):
        return value
    return "not_stated" if value is None else value


def layout_allowed(recipe: Recipe, strategy: Strategy, hardware_id: str) -> tuple[bool, str]:
    """Whether a layout is offered on a card: compatible strategies, then per-hardware opt-in/out."""
    grant = recipe.strategy_hardware.get(strategy.name, {}).get(hardware_id)
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


def minimum_gpus(recipe: Recipe, strategy: Strategy, hardware_id: str) -> int:
    # A hardware key in strategy_min_gpus raises the floor of every layout on that card. An explicit
    # per-card grant is the recipe's own validated shape, so the layout's generic floor yields to it.
    # pd_cluster pools are sized by the recipe's own per-role node counts, not by a GPU picker.
    granted = (recipe.strategy_hardware.get(strategy.name, {}).get(hardware_id) == "supported"
               or strategy.deploy_type == "pd_cluster")
    return max(1 if granted else strategy.min_gpus, recipe.strategy_min_gpus.get(strategy.name, 1),
               recipe.strategy_min_gpus.get(hardware_id, 1))


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


def _args_tp(args: list[str]) -> int | None:
    """A `--tensor-parallel-size N` (or `-tp N`) the variant's own args set: the size upstream tested."""
    found = None
    for i, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in ("--tensor-parallel-size", "-tp"):
            raw = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            found = int(raw) if raw.isdigit() else found
    return found


def pinned_tp(recipe: Recipe, layout: str, profile: HardwareProfile, variant: Variant | None = None) -> int | None:
    """The tensor-parallel size the recipe tests for a layout on a card: its strategy override's
    size (per card, or for all cards), else the variant's `tp` (per card or one size), else a
    `--tensor-parallel-size` in the variant's own args."""
    override = recipe.strategy_overrides.get(layout)
    tp = _for_card(override.tp if override else None, profile)
    if tp is None and variant is not None:
        tp = _for_card(variant.tp, profile) or _args_tp(variant.args)
    return tp


def feature_unsupported(feature: Feature, hardware_id: str) -> bool:
    return feature.hardware.get(hardware_id) == "unsupported"


def precision_problem(recipe: Recipe, variant: Variant, hardware_id: str) -> str | None:
    """Why the recipe's `precision_hardware` rules a variant's precision out on a card, if it does."""
    support = recipe.precision_hardware.get(variant.precision)
    if not support:
        return None
    status = support.get(hardware_id)
    if status == "unsupported" or (status is None and "supported" in support.values()
                                   and "unsupported" not in support.values()):
        cards = sorted(h for h, v in support.items() if v != "unsupported")
        return (f"{variant.precision} runs only on {', '.join(cards)} (precision_hardware)" if cards
                else f"{variant.precision} is unsupported on {hardware_id} (precision_hardware)")
    return None
