"""Every field of a vLLM recipe file the importer knows: the ones it reads, and the prose and page
layout it leaves out on purpose. Anything else is a field upstream added since, and the import says so
(once per file) instead of dropping it unseen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Per block: fields read into the catalog | fields left out on purpose (prose, the web page's layout).
_TOP = {"meta", "model", "features", "opt_in_features", "hardware_opt_in_features", "variants",
        "compatible_strategies", "strategy_hardware", "strategy_min_gpus", "default_strategy", "hardware_overrides",
        "strategy_overrides", "omni", "kv_offload_support", "dependencies"} | {"guide", "hardware_notes"}
_META = {"title", "tasks", "hardware", "default_hardware"} | {
    "slug", "provider", "description", "date_added", "date_updated", "difficulty", "performance_headline",
    "related_recipes"}
_MODEL = {"model_id", "min_vllm_version", "architecture", "parameter_count", "context_length", "base_args",
          "base_env", "docker_image", "install", "nightly_required", "supports_dcp", "flashinfer_autotune"} | {
    "active_parameters", "docker_source"}
_VARIANT = {"precision", "label", "model_id", "vram_minimum_gb", "min_vllm_version", "docker_image", "extra_args",
            "extra_env", "hardware_overrides", "supported_hardware", "tp", "precision_hardware",
            "default_modes"} | {"description"}
_FEATURE = {"args", "env", "hardware", "strategies", "hardware_overrides", "modes", "default_mode"} | {"description"}
_OVERRIDE = {"extra_args", "args", "extra_env", "env", "docker_image"} | {"install_note"}
_STRATEGY_OVERRIDE = {"extra_args", "vllm_args", "env", "extra_env", "hardware_overrides", "tp", "router",
                      "prefill", "decode", "pool_modes"}
# vllm-omni's own pipeline (stages and their config file) is the engine's business, not a serving choice.
_OMNI = {"tasks"} | {"port", "task_label", "task_hint", "task_axes", "variant_hint", "variant_label", "stages",
                     "stage_config"}
# One omni task, and its per-card block: the example request (`curl`) is prose for the web page.
_OMNI_TASK = {"id", "key", "label", "model_id", "axes", "endpoint", "vram_minimum_gb", "extra_args",
              "hardware_overrides"} | {"description", "curl"}
_OMNI_TASK_OVERRIDE = {"vram_minimum_gb", "extra_args"} | {"curl"}
_DEPENDENCY = {"command", "note", "optional", "brand", "install_modes"}
_INSTALL = {"command", "note"}
_FEATURE_OVERRIDE = {"args"}
_FEATURE_MODE = {"args", "hardware_overrides", "variants", "hardware"} | {"label", "description"}
_PD_ROLE = {"parallelism", "tp", "nodes", "vllm_args", "env", "hardware_overrides"}


def _keys(block: Any) -> list[str]:
    return [str(k) for k in block] if isinstance(block, dict) else []


def _each(block: Any) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in block.items()] if isinstance(block, dict) else []


def _unknown(where: str, block: Any, known: set[str]) -> list[str]:
    return [f"{where}.{k}" for k in _keys(block) if k not in known]


def _overrides(where: str, block: dict, known: set[str]) -> list[str]:
    """Each card's (or vendor's) block of the block's `hardware_overrides` map."""
    return [f for card, item in _each(block.get("hardware_overrides"))
            for f in _unknown(f"{where}.hardware_overrides.{card}", item, known)]


Check = Callable[[str, Any], list[str]]  # (the block's dotted path, the block) -> the unknown fields in it


def _with_overrides(known: set[str], override_known: set[str]) -> Check:
    """A handler for a block with fields of its own and per-card overrides of some of them."""
    return lambda where, block: _unknown(where, block, known) + (
        _overrides(where, block, override_known) if isinstance(block, dict) else [])


# ---- one handler per block ----------------------------------------------------------------------

def meta(where: str, block: Any) -> list[str]:
    return _unknown(where, block, _META)


def model(where: str, block: Any) -> list[str]:
    found = _unknown(where, block, _MODEL)
    if isinstance(block, dict):
        found += [f for name, path in _each(block.get("install")) for f in _unknown(f"{where}.install.{name}", path,
                                                                                     _INSTALL)]
    return found


# One omni task, one mode of a feature, one pool of a pd_cluster override: each with its per-card blocks.
omni_task = _with_overrides(_OMNI_TASK, _OMNI_TASK_OVERRIDE)
feature_mode = _with_overrides(_FEATURE_MODE, _FEATURE_OVERRIDE)
pd_role = _with_overrides(_PD_ROLE, _OVERRIDE)


def omni(where: str, block: Any) -> list[str]:
    found = _unknown(where, block, _OMNI)
    tasks = block.get("tasks") if isinstance(block, dict) else None
    if isinstance(tasks, list):
        found += [f for i, task in enumerate(tasks) for f in omni_task(f"{where}.tasks[{i}]", task)]
    return found


def variant_blocks(where: str, variant: dict) -> list[str]:
    return _overrides(where, variant, _OVERRIDE)


def feature_blocks(where: str, feature: dict) -> list[str]:
    modes = _each(feature.get("modes"))
    return _overrides(where, feature, _FEATURE_OVERRIDE) + [
        f for mode, spec in modes for f in feature_mode(f"{where}.modes.{mode}", spec)]


def strategy_override_blocks(where: str, override: dict) -> list[str]:
    pools = [f for role in ("prefill", "decode") for f in pd_role(f"{where}.{role}", override.get(role))]
    return _overrides(where, override, _OVERRIDE) + pools


def dependencies(where: str, block: Any) -> list[str]:
    items = list(enumerate(block)) if isinstance(block, list) else []
    return [f for i, dependency in items for f in _unknown(f"{where}[{i}]", dependency, _DEPENDENCY)]


def _items(known: set[str]) -> Check:
    """A handler for a map of named items (variants, features, ...): the fields of each item."""
    return lambda where, block: [f for name, item in _each(block) for f in _unknown(f"{where}.{name}", item, known)]


def _within_items(nested: Callable[[str, dict], list[str]]) -> Check:
    """A handler for the blocks nested in each named item of a map."""
    return lambda where, block: [f for name, item in _each(block) if isinstance(item, dict)
                                 for f in nested(f"{where}.{name}", item)]


# The recipe's blocks in the order their fields are reported: every named item's own fields before the
# blocks nested in items, so the shallow fields of the four maps come first.
_BLOCKS: tuple[tuple[str, Check], ...] = (
    ("meta", meta), ("model", model), ("omni", omni),
    ("variants", _items(_VARIANT)), ("features", _items(_FEATURE)), ("hardware_overrides", _items(_OVERRIDE)),
    ("strategy_overrides", _items(_STRATEGY_OVERRIDE)),
    ("variants", _within_items(variant_blocks)), ("features", _within_items(feature_blocks)),
    ("strategy_overrides", _within_items(strategy_override_blocks)),
    ("dependencies", dependencies),
)


def unknown_fields(doc: dict[str, Any]) -> list[str]:
    """Dotted paths of the fields in a recipe document the importer does not know, block by block (the
    nested ones too: omni tasks and their per-card blocks, per-card overrides, dependencies, install
    paths)."""
    return [k for k in _keys(doc) if k not in _TOP] + [f for name, check in _BLOCKS for f in check(name, doc.get(name))]
