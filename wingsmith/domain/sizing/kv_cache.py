"""KV cache bytes: what one token costs, what one sequence costs, and how it lands on one GPU.

Each part carries its formula and inputs. The per-token figure (`bytes_per_token`) is the part that
grows with every token of context and is not bounded: full-attention layers (whole model, before
tensor-parallel sharding) plus MLA latents and sparse-attention indexer keys (per tensor-parallel
rank, because every rank keeps the whole latent). Sliding-window layers are bounded per sequence
by their window and linear-attention layers keep a fixed state per sequence; both are reported
separately. vLLM's page rounding (16-token blocks) is ignored: it changes the totals by well
under 1% at the context lengths sized here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.sizing.figures import Figure, SizingError, figure
from wingsmith.domain.sizing.model_config import TextModel, read_text_model

KV_DTYPES = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
# Recurrent states are kept in float32: they accumulate over the whole sequence, and vLLM
# offers a float32 state for exactly that reason. Sizing with it is the cautious choice.
LINEAR_STATE_BYTES = 4
# DeepSeek-V3.2 style indexer: one fp8 key of index_head_dim plus a float32 scale, per token and layer.
INDEXER_SCALE_BYTES = 4
# vLLM stores an fp8 KV cache of sparse MLA (the models with an indexer) in its `fp8_ds_mla` layout:
# the latent in fp8 with one float32 scale per 128 of its values, and the rope part unquantised in 16-bit
# (512 + 4 × 4 + 64 × 2 = 656 B per token and layer for DeepSeek-V3.2 and GLM-5; FlashMLASparseBackend's
# get_kv_cache_shape, which vLLM switches to whenever the kv-cache dtype starts with fp8).
DS_MLA_SCALE_GROUP = 128
DS_MLA_SCALE_BYTES = 4
DS_MLA_ROPE_BYTES = 2


class KvCacheSpec(BaseModel, frozen=True):
    model_type: str
    kv_dtype: str
    kv_dtype_bytes: int
    formula: Literal["gqa", "mla", "sliding", "hybrid_sliding", "hybrid_linear", "linear"]
    bytes_per_token: Figure
    bytes_per_token_scope: str
    full_attention_bytes_per_token: Figure  # whole model; split by KV heads across TP ranks
    mla_bytes_per_token: Figure  # per TP rank (replicated latent)
    indexer_bytes_per_token: Figure  # per TP rank (replicated)
    sliding_bytes_per_token: Figure  # whole model; only the last `sliding_window` tokens are kept
    sliding_window: int | None
    sliding_bytes_per_sequence_max: Figure
    linear_state_bytes_per_sequence: Figure  # whole model; split by heads across TP ranks
    num_kv_heads: int
    num_linear_heads: int | None

    def kv_heads_per_rank(self, tp: int) -> int:
        """vLLM splits KV heads across ranks and replicates them once ranks outnumber heads."""
        return max(1, self.num_kv_heads // tp)

    def per_rank_bytes_per_token(self, tp: int) -> int:
        """Unbounded per-token growth on one tensor-parallel rank."""
        gqa = self.full_attention_bytes_per_token.value
        share = gqa * self.kv_heads_per_rank(tp) // self.num_kv_heads if gqa else 0
        return int(share + self.mla_bytes_per_token.value + self.indexer_bytes_per_token.value)

    def per_rank_sequence_bytes(self, context: int, tp: int) -> int:
        """Bytes one sequence of `context` tokens occupies on one tensor-parallel rank."""
        head_share = self.kv_heads_per_rank(tp) / self.num_kv_heads
        sliding = self.sliding_bytes_per_token.value * min(context, self.sliding_window or 0) * head_share
        linear = self.linear_state_bytes_per_sequence.value
        if linear and self.num_linear_heads:
            linear = linear * max(1, self.num_linear_heads // tp) / self.num_linear_heads
        return int(self.per_rank_bytes_per_token(tp) * context + sliding + linear)


def _fp8_ds_mla(layers: int, kv_lora_rank: int, rope_dim: int) -> Figure:
    scales = -(-kv_lora_rank // DS_MLA_SCALE_GROUP)
    per_layer = kv_lora_rank + scales * DS_MLA_SCALE_BYTES + rope_dim * DS_MLA_ROPE_BYTES
    return figure(layers * per_layer, "B/token per TP rank",
                  "MLA layers × (kv_lora_rank × 1 B fp8 + ceil(kv_lora_rank / 128) × 4 B float32 scales"
                  " + qk_rope_head_dim × 2 B): vLLM's fp8_ds_mla layout",
                  layers=layers, kv_lora_rank=kv_lora_rank, qk_rope_head_dim=rope_dim,
                  bytes_per_layer=per_layer, layout="fp8_ds_mla")


def kv_dtype_bytes(model: TextModel, kv_dtype: str) -> int:
    if kv_dtype not in KV_DTYPES:
        raise SizingError(f"unknown kv-cache dtype {kv_dtype!r}; expected one of {', '.join(KV_DTYPES)}")
    return KV_DTYPES[kv_dtype] or model.dtype_bytes


def kv_cache_spec(config: dict, kv_dtype: str = "auto") -> KvCacheSpec:
    """KV cache bytes per token and per sequence for a model config (`auto` = the model dtype)."""
    return kv_cache_spec_for(read_text_model(config), kv_dtype)


def kv_cache_spec_for(model: TextModel, kv_dtype: str = "auto") -> KvCacheSpec:
    b = kv_dtype_bytes(model, kv_dtype)
    full, sliding, mla, linear = (model.count(k) for k in ("full", "sliding", "mla", "linear"))
    gqa_formula = "layers × num_key_value_heads × head_dim × 2 (K and V) × kv_dtype_bytes"
    full_fig = figure(full * model.num_kv_heads * model.head_dim * 2 * b, "B/token", gqa_formula,
                      layers=full, num_key_value_heads=model.num_kv_heads, head_dim=model.head_dim,
                      head_dim_source=model.head_dim_source, kv_dtype_bytes=b)
    sliding_fig = figure(sliding * model.num_kv_heads * model.head_dim * 2 * b, "B/token", gqa_formula,
                         layers=sliding, num_key_value_heads=model.num_kv_heads,
                         head_dim=model.head_dim, kv_dtype_bytes=b)
    window = model.sliding_window if sliding else None
    sliding_max = figure(sliding_fig.value * (window or 0), "B/sequence",
                         "sliding bytes per token × sliding_window",
                         sliding_bytes_per_token=sliding_fig.value, sliding_window=window)
    if mla:
        if model.kv_lora_rank is None or model.qk_rope_head_dim is None:  # read_text_model sets both for MLA
            raise SizingError("MLA layers need kv_lora_rank and qk_rope_head_dim")
        if model.index_head_dim and kv_dtype.startswith("fp8"):
            mla_fig = _fp8_ds_mla(mla, model.kv_lora_rank, model.qk_rope_head_dim)
        else:
            latent = model.kv_lora_rank + model.qk_rope_head_dim
            mla_fig = figure(mla * latent * b, "B/token per TP rank",
                             "MLA layers × (kv_lora_rank + qk_rope_head_dim) × kv_dtype_bytes",
                             layers=mla, kv_lora_rank=model.kv_lora_rank,
                             qk_rope_head_dim=model.qk_rope_head_dim, kv_dtype_bytes=b)
    else:
        mla_fig = figure(0, "B/token per TP rank", "no MLA layers")
    if model.index_head_dim and (mla or full):
        layers = mla or full
        indexer_fig = figure(layers * (model.index_head_dim + INDEXER_SCALE_BYTES), "B/token per TP rank",
                             "attention layers × (index_head_dim × 1 byte fp8 + float32 scale)",
                             layers=layers, index_head_dim=model.index_head_dim,
                             scale_bytes=INDEXER_SCALE_BYTES)
    else:
        indexer_fig = figure(0, "B/token per TP rank", "no sparse-attention indexer")
    lin = model.linear
    if linear and lin:
        recurrent = lin.num_heads * lin.key_head_dim * lin.value_head_dim * LINEAR_STATE_BYTES
        conv = lin.conv_channels * (lin.conv_kernel - 1) * model.dtype_bytes
        linear_fig = figure(linear * (recurrent + conv), "B/sequence",
                            "linear layers × (heads × key_head_dim × value_head_dim × state_bytes"
                            " + conv_channels × (conv_kernel − 1) × model_dtype_bytes)",
                            layers=linear, kind=lin.kind, heads=lin.num_heads,
                            key_head_dim=lin.key_head_dim, value_head_dim=lin.value_head_dim,
                            state_bytes=LINEAR_STATE_BYTES, conv_channels=lin.conv_channels,
                            conv_kernel=lin.conv_kernel, model_dtype_bytes=model.dtype_bytes)
    else:
        linear_fig = figure(0, "B/sequence", "no linear-attention layers")

    if mla:
        formula = "hybrid_linear" if linear else "mla"
        scope = "per tensor-parallel rank (the MLA latent is replicated on every rank)"
    else:
        formula = ("hybrid_linear" if linear and full else "linear" if linear
                   else "hybrid_sliding" if sliding and full else "sliding" if sliding else "gqa")
        scope = "whole model (split across tensor-parallel ranks by KV head)"
    unbounded = full_fig.value + mla_fig.value + indexer_fig.value
    per_token = figure(unbounded, "B/token",
                       "full-attention bytes/token + MLA bytes/token + indexer bytes/token",
                       full_attention=full_fig.value, mla=mla_fig.value, indexer=indexer_fig.value,
                       scope=scope)
    return KvCacheSpec(
        model_type=model.model_type, kv_dtype=kv_dtype, kv_dtype_bytes=b, formula=formula,
        bytes_per_token=per_token, bytes_per_token_scope=scope,
        full_attention_bytes_per_token=full_fig, mla_bytes_per_token=mla_fig,
        indexer_bytes_per_token=indexer_fig, sliding_bytes_per_token=sliding_fig,
        sliding_window=window, sliding_bytes_per_sequence_max=sliding_max,
        linear_state_bytes_per_sequence=linear_fig, num_kv_heads=model.num_kv_heads,
        num_linear_heads=lin.num_heads if (linear and lin) else None,
    )
