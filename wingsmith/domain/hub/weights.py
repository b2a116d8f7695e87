"""How many bytes of weights a checkpoint holds, and where that figure comes from.

Order of preference: the sizes of the `*.safetensors` files at the commit (exact); the index's
`total_size`; the Hub's parameter counts × dtype size (only when no dtype is packed: for 4-bit
checkpoints stored as U8/I32 the Hub counts logical parameters and the product overstates up to 2×);
an estimate from the config (last resort)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from wingsmith.domain.hub import config_facts

WeightSource = Literal["safetensors_files", "index_total_size", "parameter_counts", "config_estimate"]

DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2,
               "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}
# Dtypes that quantizers use as containers for packed 4-bit values.
PACKED_CONTAINERS = {"U8", "I8", "I32", "U32", "F4", "F6_E2M3", "F6_E3M2"}

_TORCH_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float8_e4m3fn": 1}


class WeightFigure(BaseModel, frozen=True):
    source: WeightSource
    bytes: int | None = None
    note: str = ""


def is_weight_file(path: str) -> bool:
    return path.endswith(".safetensors")


def ignored_reason(path: str) -> str | None:
    """Why a safetensors file is not part of the served checkpoint (None: it is)."""
    name = path.rsplit("/", 1)[-1]
    if "/" in path:
        # original/, metal/, consolidated copies in subfolders: alternative formats of the same weights.
        return f"in subfolder {path.split('/', 1)[0]}/ (a duplicate format of the weights)"
    if name.startswith("consolidated"):
        return "consolidated copy (a duplicate of the sharded weights)"
    return None


def packed(parameters: dict[str, int] | None, quant: config_facts.Quantization | None) -> bool:
    if quant is not None and quant.bits is not None and quant.bits < 8:
        return True
    return any(dt in PACKED_CONTAINERS for dt in (parameters or {}))


def from_parameters(parameters: dict[str, int] | None,
                    quant: config_facts.Quantization | None) -> WeightFigure:
    if not parameters:
        return WeightFigure(source="parameter_counts", note="the Hub lists no per-dtype parameter counts")
    if packed(parameters, quant):
        return WeightFigure(source="parameter_counts",
                            note="not usable: packed dtypes count logical parameters, the product overstates bytes")
    unknown = sorted(set(parameters) - set(DTYPE_BYTES))
    if unknown:
        return WeightFigure(source="parameter_counts", note=f"unknown dtype size for {', '.join(unknown)}")
    return WeightFigure(source="parameter_counts",
                        bytes=sum(n * DTYPE_BYTES[dt] for dt, n in parameters.items()),
                        note="parameter counts × dtype size (tensor bytes, without file headers)")


def estimate_from_config(config: dict[str, Any]) -> WeightFigure:
    """A rough byte count from the architecture numbers: embeddings, attention (GQA or MLA), dense
    or mixture-of-experts MLPs, at the checkpoint's precision. Good to a few percent for common
    decoder-only models; a last resort, and labelled as such."""
    try:
        parts = _parameter_parts(config_facts.text_config(config))
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        return WeightFigure(source="config_estimate", note=f"config lacks what an estimate needs ({exc})")
    quant = config_facts.quantization(config)
    base = _TORCH_DTYPE_BYTES.get(config_facts.dtype(config) or "bfloat16", 2)
    quantized_bytes = float(base)
    quantized_share: set[str] = set()
    scheme = ""
    if quant is not None and quant.bits:
        group = quant.group_size or 0
        # Scales: one byte per group for MX/compressed formats; block scales are negligible.
        quantized_bytes = quant.bits / 8 + (1 / group if group else 0)
        keeps_attention = any(re.search(r"attn|attention", p) for p in quant.high_precision)
        quantized_share = {"experts"} if keeps_attention and parts["experts"] else {"experts", "attention", "dense_mlp"}
        scheme = f"{quant.method} {quant.bits}-bit"
    total = 0.0
    for part, count in parts.items():
        total += count * (quantized_bytes if part in quantized_share else base)
    label = f"estimated from config ({sum(parts.values()):,} parameters"
    label += f", {scheme} on {', '.join(sorted(quantized_share))})" if quantized_share else ")"
    return WeightFigure(source="config_estimate", bytes=int(total), note=label)


def _parameter_parts(c: dict[str, Any]) -> dict[str, int]:
    hidden, vocab = c["hidden_size"], c["vocab_size"]
    # Multi-token-prediction layers (DeepSeek-V3 style) ship in the checkpoint as extra decoder layers.
    layers = c["num_hidden_layers"] + (c.get("num_nextn_predict_layers") or 0)
    heads = c["num_attention_heads"]
    embed = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    if c.get("kv_lora_rank"):
        nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        q_lora, kv_lora = c.get("q_lora_rank"), c["kv_lora_rank"]
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attn = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v) + heads * v * hidden
    else:
        head_dim = c.get("head_dim") or hidden // heads
        kv = c.get("num_key_value_heads") or heads
        attn = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
        if c.get("attention_bias"):
            attn += heads * head_dim + 2 * kv * head_dim + hidden
    experts = c.get("n_routed_experts") or c.get("num_experts") or c.get("num_local_experts") or 0
    dense_layers = layers
    expert_params = 0
    dense_mlp = 0
    if experts:
        moe_inter = c.get("moe_intermediate_size") or c["intermediate_size"]
        dense_layers = c.get("first_k_dense_replace") or 0
        moe_layers = moe_layers_count(c, layers)
        # Latent MoE (Kimi-K3): experts work in a narrower space, entered and left by two projections.
        expert_hidden = c.get("routed_expert_hidden_size") or hidden
        per_expert = 3 * expert_hidden * moe_inter
        if expert_hidden != hidden:
            dense_mlp += moe_layers_count(c, layers) * 2 * hidden * expert_hidden
        if c.get("model_type") == "gpt_oss":  # gpt-oss experts carry biases on both projections
            per_expert += 2 * moe_inter + hidden
        shared = c.get("n_shared_experts") or c.get("num_shared_experts") or 0
        expert_params = moe_layers * experts * per_expert
        dense_mlp += moe_layers * (shared * 3 * hidden * moe_inter + hidden * experts)
    dense_mlp += dense_layers * 3 * hidden * c["intermediate_size"]
    norms = layers * 2 * hidden + hidden
    return {"embeddings": embed, "attention": layers * attn, "dense_mlp": dense_mlp,
            "experts": expert_params, "norms": norms}


def moe_layers_count(c: dict[str, Any], layers: int) -> int:
    return layers - (c.get("first_k_dense_replace") or 0)


def estimated_parameters(config: dict[str, Any]) -> int | None:
    try:
        return sum(_parameter_parts(config_facts.text_config(config)).values())
    except (KeyError, TypeError, ZeroDivisionError):
        return None
