"""Facts read from a model's `config.json`: the text model inside multimodal wrappers, its
architecture, context length and quantization. Pure functions over the raw dict."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "max_sequence_length", "seq_length",
                 "n_positions", "model_max_length")


class Quantization(BaseModel, frozen=True):
    method: str
    format: str | None = None
    bits: int | None = None
    group_size: int | None = None
    block_size: list[int] | None = None
    # Module patterns the checkpoint keeps in high precision, as the config states them.
    high_precision: list[str] = []
    scale_dtype: str | None = None
    activation_scheme: str | None = None


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal wrappers (Kimi-K3, Llava, Qwen-VL, ...) keep the language model under
    `text_config`; sizing and serving care about that one."""
    inner = config.get("text_config") or config.get("language_config") or config.get("llm_config")
    return inner if isinstance(inner, dict) and inner else config


def architecture(config: dict[str, Any]) -> str | None:
    archs = config.get("architectures") or []
    return archs[0] if archs else None


def context_length(config: dict[str, Any]) -> int | None:
    for cfg in (text_config(config), config):
        for key in _CONTEXT_KEYS:
            value = cfg.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


def dtype(config: dict[str, Any]) -> str | None:
    for cfg in (text_config(config), config):
        value = cfg.get("torch_dtype") or cfg.get("dtype")
        if isinstance(value, str):
            return value.removeprefix("torch.")
    return None


def quantization(config: dict[str, Any]) -> Quantization | None:
    qc = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not isinstance(qc, dict) or not qc:
        return None
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "unknown").lower()
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    high = qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("exclude_modules") or []
    block = qc.get("weight_block_size")
    bits = qc.get("bits") or qc.get("w_bit") or qc.get("num_bits")
    fmt = qc.get("fmt") or qc.get("format") or qc.get("quant_algo")
    if method == "fp8":
        bits = bits or 8
    elif method in ("mxfp4", "nvfp4"):
        # MX/NV FP4 fix the block size by definition (OCP MX: 32, NVFP4: 16).
        bits, fmt = bits or 4, fmt or method
        group = qc.get("group_size") or (32 if method == "mxfp4" else 16)
        return Quantization(method=method, format=str(fmt), bits=bits, group_size=group,
                            high_precision=list(high))
    elif method == "bitsandbytes":
        bits = 4 if qc.get("load_in_4bit") else 8 if qc.get("load_in_8bit") else bits
        fmt = fmt or qc.get("bnb_4bit_quant_type")
    return Quantization(method=method, format=str(fmt) if fmt else None, bits=bits,
                        group_size=qc.get("group_size") or qc.get("q_group_size"),
                        block_size=list(block) if isinstance(block, list) else None,
                        high_precision=list(high), activation_scheme=qc.get("activation_scheme"))


def _compressed_tensors(qc: dict[str, Any]) -> Quantization:
    groups = qc.get("config_groups") or {}
    found = next((g.get("weights") for g in groups.values() if isinstance(g, dict) and g.get("weights")), None)
    weights: dict[str, Any] = found or {}
    block = weights.get("block_structure")
    scale = weights.get("scale_dtype")
    return Quantization(method="compressed-tensors", format=qc.get("format"),
                        bits=weights.get("num_bits"), group_size=weights.get("group_size"),
                        block_size=list(block) if isinstance(block, list) else None,
                        high_precision=list(qc.get("ignore") or []),
                        scale_dtype=scale.removeprefix("torch.") if isinstance(scale, str) else None)
