"""Every field of a vLLM recipe file the importer knows: the ones it reads, and the prose and page
layout it leaves out on purpose. Anything else is a field upstream added since, and the import says so
(once per file) instead of dropping it unseen."""

from __future__ import annotations

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


def _listed(block: Any) -> list[tuple[int, Any]]:
    return list(enumerate(block)) if isinstance(block, list) else []


def _unknown(where: str, block: Any, known: set[str]) -> list[str]:
    return [f"{where}.{k}" for k in _keys(block) if k not in known]


def _overrides(where: str, block: Any, known: set[str]) -> list[str]:
    """Each card's (or vendor's) block of a `hardware_overrides` map."""
    return [f for card, item in _each(block) for f in _unknown(f"{where}.{card}", item, known)]


def unknown_fields(doc: dict[str, Any]) -> list[str]:
    """Dotted paths of the fields in a recipe document the importer does not know, block by block (the
    nested ones too: omni tasks and their per-card blocks, per-card overrides, dependencies, install
    paths)."""
    found = [k for k in _keys(doc) if k not in _TOP]
    found += _unknown("meta", doc.get("meta"), _META)
    model = doc.get("model")
    found += _unknown("model", model, _MODEL)
    if isinstance(model, dict):
        found += [f for name, path in _each(model.get("install")) for f in _unknown(f"model.install.{name}", path,
                                                                                     _INSTALL)]
    omni = doc.get("omni")
    found += _unknown("omni", omni, _OMNI)
    if isinstance(omni, dict):
        for i, task in _listed(omni.get("tasks")):
            where = f"omni.tasks[{i}]"
            found += _unknown(where, task, _OMNI_TASK)
            if isinstance(task, dict):
                found += _overrides(f"{where}.hardware_overrides", task.get("hardware_overrides"),
                                    _OMNI_TASK_OVERRIDE)
    for block, known in (("variants", _VARIANT), ("features", _FEATURE), ("hardware_overrides", _OVERRIDE),
                         ("strategy_overrides", _STRATEGY_OVERRIDE)):
        for name, item in _each(doc.get(block)):
            found += _unknown(f"{block}.{name}", item, known)
    for name, variant in _each(doc.get("variants")):
        if isinstance(variant, dict):
            found += _overrides(f"variants.{name}.hardware_overrides", variant.get("hardware_overrides"), _OVERRIDE)
    for name, feature in _each(doc.get("features")):
        if not isinstance(feature, dict):
            continue
        found += _overrides(f"features.{name}.hardware_overrides", feature.get("hardware_overrides"),
                            _FEATURE_OVERRIDE)
        for mode, spec in _each(feature.get("modes")):
            where = f"features.{name}.modes.{mode}"
            found += _unknown(where, spec, _FEATURE_MODE)
            if isinstance(spec, dict):
                found += _overrides(f"{where}.hardware_overrides", spec.get("hardware_overrides"), _FEATURE_OVERRIDE)
    for name, override in _each(doc.get("strategy_overrides")):
        if not isinstance(override, dict):
            continue
        found += _overrides(f"strategy_overrides.{name}.hardware_overrides", override.get("hardware_overrides"),
                            _OVERRIDE)
        for role in ("prefill", "decode"):
            where = f"strategy_overrides.{name}.{role}"
            found += _unknown(where, override.get(role), _PD_ROLE)
            if isinstance(override.get(role), dict):
                found += _overrides(f"{where}.hardware_overrides", override[role].get("hardware_overrides"),
                                    _OVERRIDE)
    for i, dependency in _listed(doc.get("dependencies")):
        found += _unknown(f"dependencies[{i}]", dependency, _DEPENDENCY)
    return found
