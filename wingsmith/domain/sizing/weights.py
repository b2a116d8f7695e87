"""Weight bytes: the floor comparable with upstream's, the comparison with a published floor, bytes
for a variant whose checkpoint lives in another repo, and the split between routed experts and
everything else (the two shard differently under expert parallelism)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.sizing.figures import Figure, SizingError, figure
from wingsmith.domain.sizing.model_config import TextModel

# Upstream computes its per-replica floor as parameters × bytes per parameter × 1.2.
FLOOR_HEADROOM = 1.2
# A quarter or more apart, in either direction, is worth a reviewer's attention.
FLOOR_WARN_RATIO = 1.25

# Bytes per (logical) parameter including block scales: MXFP4 packs two values a byte plus one
# E8M0 scale per 32; NVFP4 one FP8 scale per 16; INT4 one 16-bit scale per group of 128;
# block-fp8 one float32 scale per 128×128 block.
BYTES_PER_PARAMETER: dict[str, float] = {
    "none": 2.0, "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "fp32": 4.0,
    "fp8": 1.0 + 4 / (128 * 128), "int8": 1.0 + 2 / 128,
    "mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16, "int4": 0.5 + 2 / 128, "mxfp8": 1.0 + 1 / 32,
}

# Other names upstream recipes and checkpoints use for the same storage formats. `fp4` in a vLLM
# recipe is NVIDIA's FP4 checkpoint (nvidia/*-FP4, ModelOpt NVFP4); w4a16/AWQ/GPTQ store 4-bit
# integer weights, w8a8 8-bit ones; fp8 block/dynamic/channel variants all store one byte a value.
SCHEME_ALIASES: dict[str, str] = {
    "fp4": "nvfp4", "modelopt_fp4": "nvfp4", "nvfp4a16": "nvfp4", "w4a4_nvfp4": "nvfp4",
    "w4a16": "int4", "w4a8": "int4", "awq": "int4", "gptq": "int4", "int4_awq": "int4", "int4_gptq": "int4",
    "compressed_tensors_w4a16": "int4", "w8a8": "int8", "w8a16": "int8", "int8_w8a8": "int8",
    "fp8_block": "fp8", "fp8_dynamic": "fp8", "fp8_channel": "fp8", "fp8_e4m3": "fp8", "w8a8_fp8": "fp8",
    "fbgemm_fp8": "fp8", "modelopt_fp8": "fp8", "e4m3": "fp8",
    # Gemma 4's "mobile" QAT checkpoints mix int2 (embeddings, lm_head, some MLPs), int4 (most of
    # the LLM) and int8 (vision, gates); upstream states 3.6-4.1x compression vs BF16, i.e. 0.49-0.56
    # bytes a parameter, which brackets int4's figure.
    "int2/4/8": "int4",
}


def known_scheme(scheme: str) -> str | None:
    """The storage format a precision name stands for, or None when the plane does not know it."""
    key = scheme.strip().lower().replace("-", "_").replace(" ", "_")
    key = SCHEME_ALIASES.get(key, key)
    return key if key in BYTES_PER_PARAMETER else None


def bytes_per_parameter(scheme: str) -> float:
    key = known_scheme(scheme)
    if key is None:
        raise SizingError(f"unknown quantization scheme {scheme!r}; known: "
                          f"{', '.join(sorted({*BYTES_PER_PARAMETER, *SCHEME_ALIASES}))}")
    return BYTES_PER_PARAMETER[key]


def weights_floor(weight_bytes: int) -> int:
    """Per-replica floor in decimal GB comparable with upstream's: ceil(bytes / 1e9 × 1.2)."""
    if weight_bytes < 0:
        raise SizingError(f"weight bytes must not be negative, got {weight_bytes}")
    # Round the product to a byte first so float noise cannot push an exact figure up a GB.
    return math.ceil(round(weight_bytes * FLOOR_HEADROOM) / 1e9)


class FloorComparison(BaseModel, frozen=True):
    variant: str
    ours_gb: int
    ours: Figure
    published_gb: float | None
    published_is_estimate: bool
    ratio: float | None  # ours / published
    level: Literal["ok", "warning", "informational", "no_published_floor"]
    message: str


def compare_floor(weight_bytes: int, weight_bytes_source: str, published_floor_gb: float | None,
                  published_is_estimate: bool, variant: str) -> FloorComparison:
    """Compare our floor with the recipe's published floor of the same variant.

    Warns when either is at least 25% above the other (the ratio of the larger to the smaller);
    only informs when upstream marks its floor an estimate.
    """
    ours_gb = weights_floor(weight_bytes)
    ours = figure(ours_gb, "GB", "ceil(weight_bytes / 1e9 × 1.2)", weight_bytes=weight_bytes,
                  weight_bytes_source=weight_bytes_source, headroom=FLOOR_HEADROOM)
    if published_floor_gb is None:
        return FloorComparison(variant=variant, ours_gb=ours_gb, ours=ours, published_gb=None,
                               published_is_estimate=published_is_estimate, ratio=None,
                               level="no_published_floor",
                               message=f"variant {variant}: our floor {ours_gb} GB (from "
                                       f"{weight_bytes_source}); the recipe publishes no floor")
    if published_floor_gb <= 0:
        raise SizingError(f"published floor for variant {variant!r} must be positive, got {published_floor_gb}")
    ratio = ours_gb / published_floor_gb
    apart = max(ratio, 1 / ratio) >= FLOOR_WARN_RATIO if ratio else True
    both = (f"variant {variant}: our floor {ours_gb} GB (ceil(weight bytes {weight_bytes:,} from "
            f"{weight_bytes_source} / 1e9 × 1.2)) vs the recipe's published floor "
            f"{published_floor_gb:g} GB{' (marked an estimate upstream)' if published_is_estimate else ''}; "
            f"ratio {ratio:.3f}")
    if published_is_estimate:
        level, message = "informational", both + "; informational because upstream's figure is an estimate"
    elif apart:
        level, message = "warning", both + "; they differ by 25% or more"
    else:
        level, message = "ok", both
    return FloorComparison(variant=variant, ours_gb=ours_gb, ours=ours, published_gb=published_floor_gb,
                           published_is_estimate=published_is_estimate, ratio=round(ratio, 4),
                           level=level, message=message)


class WeightBytes(BaseModel, frozen=True):
    bytes: int
    method: Literal["resolved", "derived", "estimated_from_config"]
    source: str
    figure: Figure


def variant_weight_bytes(checkpoint: str, resolved_bytes: int | None = None,
                         parameter_count: int | None = None, scheme: str | None = None) -> WeightBytes:
    """Weight bytes of a variant whose checkpoint may live in another repo.

    Uses the resolved checkpoint's bytes when there are any; otherwise derives them from the
    parameter count and the quantization scheme, assuming every parameter is stored in that scheme
    (so a partly quantized checkpoint comes out a little small). The result says which.
    """
    if resolved_bytes is not None:
        if resolved_bytes <= 0:
            raise SizingError(f"resolved weight bytes of {checkpoint} must be positive")
        return WeightBytes(bytes=resolved_bytes, method="resolved",
                           source=f"safetensors files of {checkpoint}",
                           figure=figure(resolved_bytes, "B", "sum of safetensors file sizes",
                                         checkpoint=checkpoint))
    if not parameter_count or not scheme:
        raise SizingError(f"cannot size {checkpoint}: it did not resolve, and no parameter count and "
                          "quantization scheme were given to derive its bytes from")
    per = bytes_per_parameter(scheme)
    value = round(parameter_count * per)
    return WeightBytes(bytes=value, method="derived",
                       source=f"derived from {parameter_count:,} parameters of {checkpoint} in {scheme}",
                       figure=figure(value, "B", "parameters × bytes per parameter of the scheme",
                                     parameters=parameter_count, scheme=scheme, bytes_per_parameter=per))


class WeightSplit(BaseModel, frozen=True):
    """Routed-expert bytes versus the rest (attention, dense MLPs, shared experts, embeddings)."""
    total: int
    experts: Figure
    dense: Figure


def split_weights(model: TextModel, weight_bytes: int) -> WeightSplit:
    """Estimate how many of the weight bytes are routed experts, from the config's shapes.

    Expert bytes = expert parameters × bytes per parameter of the checkpoint's quantization; the
    rest is whatever remains of the measured total, so the two always add up to the real bytes.
    """
    if model.experts is None:
        return WeightSplit(total=weight_bytes,
                           experts=figure(0, "B", "dense model: no routed experts"),
                           dense=figure(weight_bytes, "B", "all weight bytes", weight_bytes=weight_bytes))
    e = model.experts
    per = bytes_per_parameter(model.quantization) if model.quantization != "none" else model.dtype_bytes
    # Never let an estimate claim more than the checkpoint holds.
    experts = min(round(e.parameters * per), int(weight_bytes * 0.98))
    return WeightSplit(
        total=weight_bytes,
        experts=figure(experts, "B", "min(experts × (moe_layers + mtp_layers) × matrices × expert_hidden"
                       " × moe_intermediate × bytes_per_parameter, 98% of weight bytes)",
                       experts=e.count, moe_layers=e.moe_layers, mtp_layers=e.mtp_layers, matrices=e.matrices,
                       expert_hidden=e.expert_hidden,
                       moe_intermediate=e.intermediate, bytes_per_parameter=per,
                       scheme=model.quantization),
        dense=figure(weight_bytes - experts, "B", "weight_bytes − expert bytes",
                     weight_bytes=weight_bytes, expert_bytes=experts))


def estimate_parameters(model: TextModel) -> dict[str, int]:
    """Parameter counts from the config's shapes, for when no checkpoint bytes are known.

    Norms and biases are left out (well under 0.1%). Multi-token-prediction layers
    (`num_nextn_predict_layers`) ship in the checkpoint as extra decoder layers, each with its own
    copies of the embeddings and output head; a wrapper's vision tower is counted from its config.
    """
    h, n = model.hidden_size, model.num_layers
    attention_layers = model.attention_layers
    if model.kv_lora_rank is not None:
        q_dim = model.num_attention_heads * ((model.qk_nope_head_dim or 128) + (model.qk_rope_head_dim or 64))
        q = h * model.q_lora_rank + model.q_lora_rank * q_dim if model.q_lora_rank else h * q_dim
        kv = (h * (model.kv_lora_rank + (model.qk_rope_head_dim or 64))
              + model.kv_lora_rank * model.num_attention_heads * ((model.qk_nope_head_dim or 128)
                                                                  + (model.v_head_dim or 128)))
        o = model.num_attention_heads * (model.v_head_dim or 128) * h
        per_layer_attention = q + kv + o
    else:
        qo = 2 * h * model.num_attention_heads * model.head_dim
        kv = 2 * h * model.num_kv_heads * model.head_dim
        per_layer_attention = qo + kv
    attention = attention_layers * per_layer_attention
    linear = model.count("linear") * model.linear.parameters(h) if model.linear else 0
    dense_mlp = model.mlp_matrices * h * model.intermediate_size  # one dense MLP block
    experts = model.experts.parameters if model.experts else 0  # the MTP layers' experts included
    if model.experts:
        e = model.experts
        dense_layers = model.first_dense_layers if model.dense_mlp_layers is None else model.dense_mlp_layers
        mlp = dense_layers * dense_mlp + e.moe_layers * e.shared_parameters(h)
    else:
        mlp = (n if model.dense_mlp_layers is None else model.dense_mlp_layers) * dense_mlp
    embeddings = model.vocab_size * h * (1 if model.tie_word_embeddings else 2)
    if model.mtp_layers:
        # Each MTP layer: one more decoder layer of the last kind (MoE where the model is), the
        # projection joining embedding and hidden state (2h × h), and its own embedding and head.
        attention += model.mtp_layers * (per_layer_attention + 2 * h * h)
        mlp += model.mtp_layers * (model.experts.shared_parameters(h) if model.experts else dense_mlp)
        embeddings += model.mtp_layers * 2 * model.vocab_size * h
    return {"attention": attention, "linear_attention": linear, "dense_mlp": mlp,
            "experts": experts, "embeddings": embeddings, "vision": model.vision_parameters}


def estimate_weight_bytes(model: TextModel) -> WeightBytes:
    """Weight bytes estimated from the config alone (experts and, where quantized, dense layers in
    the checkpoint's scheme; the rest in the model dtype)."""
    params = estimate_parameters(model)
    quantized = bytes_per_parameter(model.quantization) if model.quantization != "none" else model.dtype_bytes
    dense_per = quantized if model.dense_quantized else model.dtype_bytes
    linear_part = params["attention"] + params["linear_attention"] + params["dense_mlp"]
    value = round(params["experts"] * quantized + linear_part * dense_per
                  + (params["embeddings"] + params["vision"]) * model.dtype_bytes)
    return WeightBytes(bytes=value, method="estimated_from_config",
                       source=f"estimated from the config's shapes ({model.quantization})",
                       figure=figure(value, "B", "experts × quantized bytes + attention and dense MLP ×"
                                     " dense bytes + (embeddings + vision tower) × dtype bytes",
                                     **params, quantized_bytes_per_parameter=quantized,
                                     dense_bytes_per_parameter=dense_per, dtype_bytes=model.dtype_bytes))
