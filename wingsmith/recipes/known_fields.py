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


def _keys(block: Any) -> list[str]:
    return [str(k) for k in block] if isinstance(block, dict) else []


def _each(block: Any) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in block.items()] if isinstance(block, dict) else []


def unknown_fields(doc: dict[str, Any]) -> list[str]:
    """Dotted paths of the fields in a recipe document the importer does not know, in file order."""
    found = [k for k in _keys(doc) if k not in _TOP]
    found += [f"meta.{k}" for k in _keys(doc.get("meta")) if k not in _META]
    found += [f"model.{k}" for k in _keys(doc.get("model")) if k not in _MODEL]
    found += [f"omni.{k}" for k in _keys(doc.get("omni")) if k not in _OMNI]
    for block, known in (("variants", _VARIANT), ("features", _FEATURE), ("hardware_overrides", _OVERRIDE),
                         ("strategy_overrides", _STRATEGY_OVERRIDE)):
        for name, item in _each(doc.get(block)):
            found += [f"{block}.{name}.{k}" for k in _keys(item) if k not in known]
    return found
