"""The bounded, typed schema every model `config.json` passes before any code computes on it.

A config comes from whoever pushed the commit (a Hub model, a watched model's next commit): nobody here
wrote it. Its numbers drive tuples and loops in sizing and arithmetic everywhere else, so each field the
plane reads has a type and a range here, and the document as a whole a depth and a size. What lies
outside is refused with the field's path and the bound (`ConfigRefused`), never computed on: the resolve
answers 422, a draft fails with the reason.

The bounds are an order of magnitude above the largest published models (layers: 126 on Llama-3.1-405B,
hidden size: 18,432, experts: 896 on Kimi-K3, context: 10 M tokens on Llama-4-Scout), so a real model never
meets them, and low enough that the cost of sizing stays in milliseconds. Fields the plane does not read
are kept as they are, bounded only by the document's depth and node count.

Types are loose where upstream is (an integral `4096.0` reads as 4096, a field may be null); never where a
wrong type would reach arithmetic (a string, a bool, NaN or a fraction where a count belongs).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

# Published models reach 126 layers; hybrid patterns spell one block per layer.
MAX_LAYERS = 1024
MAX_WIDTH = 262_144          # hidden, intermediate and head widths
MAX_HEADS = 16_384
MAX_EXPERTS = 16_384
MAX_VOCAB = 16_777_216
MAX_CONTEXT = 1 << 30        # tokens
MAX_KERNEL = 64              # convolution kernels, expansion factors, merge sizes
MAX_BITS = 64
MAX_LIST = 100_000           # module-name lists (quantization ignore lists name hundreds)
MAX_TEXT = 4_096             # a string the plane reads
# The document as a whole: a real config is a few hundred nodes, 5 levels deep.
MAX_DEPTH = 32
MAX_NODES = 200_000


class ConfigRefused(ValueError):
    """A config the plane will not compute on: `field` names where (dotted path), `message` why."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


def _whole_number(value: Any) -> Any:
    """A count: an int, or a float with no fraction (JSON writers emit `4096.0`); never a bool, a string,
    NaN or infinity (Python's JSON reader accepts `NaN` and `Infinity`)."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not a boolean")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError("must be a whole number")
        return int(value)
    if not isinstance(value, int):
        raise ValueError(f"must be a whole number, not {type(value).__name__}")
    return value


Layers = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_LAYERS)]
LayerIndex = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_LAYERS)]
LayerCount = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_LAYERS)]
Width = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_WIDTH)]
# An MLP width: 0 where a family has none (a shared expert of width 0).
Size = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_WIDTH)]
Heads = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_HEADS)]
Experts = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_EXPERTS)]
Vocab = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_VOCAB)]
Context = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=MAX_CONTEXT)]
Kernel = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_KERNEL)]
Bits = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_BITS)]
GroupSize = Annotated[int, BeforeValidator(_whole_number), Field(ge=-1, le=MAX_WIDTH)]  # GPTQ: -1, one group a channel
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
Names = Annotated[list[Text], Field(max_length=MAX_LIST)]


class _Part(BaseModel):
    """A part of the config: the fields listed are checked, any other is kept unchecked."""
    model_config = ConfigDict(extra="allow", strict=False, frozen=True)


class LinearAttentionConfig(_Part):
    """Kimi's linear-attention block (`linear_attn_config`)."""
    kda_layers: Annotated[list[LayerIndex], Field(max_length=MAX_LAYERS)] | None = None
    num_heads: Heads | None = None
    head_dim: Width | None = None
    short_conv_kernel_size: Kernel | None = None


class QuantizedWeights(_Part):
    num_bits: Bits | None = None
    group_size: GroupSize | None = None
    block_structure: Annotated[list[Width], Field(max_length=8)] | None = None
    scale_dtype: Text | None = None


class QuantizationGroup(_Part):
    weights: QuantizedWeights | None = None


class QuantizationConfig(_Part):
    quant_method: Text | None = None
    quant_algo: Text | None = None
    format: Text | None = None
    fmt: Text | None = None
    bits: Bits | None = None
    w_bit: Bits | None = None
    num_bits: Bits | None = None
    group_size: GroupSize | None = None
    q_group_size: GroupSize | None = None
    weight_block_size: Annotated[list[Width], Field(max_length=8)] | None = None
    ignore: Names | None = None
    modules_to_not_convert: Names | None = None
    exclude_modules: Names | None = None
    load_in_4bit: bool | None = None
    load_in_8bit: bool | None = None
    bnb_4bit_quant_type: Text | None = None
    activation_scheme: Text | None = None
    config_groups: Annotated[dict[Text, QuantizationGroup], Field(max_length=1024)] | None = None


class VisionConfig(_Part):
    """A multimodal wrapper's vision tower, in the spellings the families use."""
    num_hidden_layers: LayerCount | None = None
    depth: LayerCount | None = None
    vt_num_hidden_layers: LayerCount | None = None
    num_layers: LayerCount | None = None
    hidden_size: Width | None = None
    embed_dim: Width | None = None
    vt_hidden_size: Width | None = None
    width: Width | None = None
    intermediate_size: Size | None = None
    vt_intermediate_size: Size | None = None
    mlp_dim: Size | None = None
    text_hidden_size: Width | None = None
    out_hidden_size: Width | None = None
    merge_kernel_size: Kernel | Annotated[list[Kernel], Field(min_length=1, max_length=4)] | None = None
    spatial_merge_size: Kernel | None = None


class TextModelConfig(_Part):
    """The language model's fields: the top level of a config, or a wrapper's `text_config`."""
    model_type: Text | None = None
    architectures: Annotated[list[Text], Field(max_length=64)] | None = None
    torch_dtype: Text | None = None
    dtype: Text | None = None
    # Shape
    num_hidden_layers: Layers | None = None
    n_layers: Layers | None = None
    num_layers: Layers | None = None
    hidden_size: Width | None = None
    d_model: Width | None = None
    num_attention_heads: Heads | None = None
    n_heads: Heads | None = None
    num_key_value_heads: Heads | None = None
    head_dim: Width | None = None
    vocab_size: Vocab | None = None
    intermediate_size: Size | None = None
    intermediate_size_mlp: Size | None = None
    tie_word_embeddings: bool | None = None
    attention_bias: bool | None = None
    hidden_act: Text | None = None
    mlp_hidden_act: Text | None = None
    # Context
    max_position_embeddings: Context | None = None
    max_seq_len: Context | None = None
    max_sequence_length: Context | None = None
    seq_length: Context | None = None
    n_positions: Context | None = None
    sliding_window: Context | None = None
    use_sliding_window: bool | None = None
    # Per-layer kinds: standard (`layer_types`), hybrid SSM (`layers_block_type`, Nemotron-H's pattern)
    layer_types: Annotated[list[Text], Field(max_length=MAX_LAYERS)] | None = None
    layers_block_type: Annotated[list[Text], Field(max_length=MAX_LAYERS)] | None = None
    hybrid_override_pattern: Annotated[str, StringConstraints(max_length=MAX_LAYERS)] | None = None
    # Multi-head latent attention and the sparse-attention indexer
    kv_lora_rank: Width | None = None
    q_lora_rank: Width | None = None
    qk_rope_head_dim: Width | None = None
    qk_nope_head_dim: Width | None = None
    v_head_dim: Width | None = None
    index_head_dim: Width | None = None
    # Mixture of experts
    n_routed_experts: Experts | None = None
    num_experts: Experts | None = None
    num_local_experts: Experts | None = None
    num_experts_per_tok: Experts | None = None
    n_shared_experts: Experts | None = None
    num_shared_experts: Experts | None = None
    moe_intermediate_size: Size | None = None
    moe_shared_expert_intermediate_size: Size | None = None
    shared_expert_intermediate_size: Size | None = None
    routed_expert_hidden_size: Width | None = None
    moe_latent_size: Width | None = None
    first_k_dense_replace: LayerCount | None = None
    moe_layer_freq: LayerCount | Annotated[list[LayerCount], Field(max_length=MAX_LAYERS)] | None = None
    decoder_sparse_step: LayerCount | None = None
    interleave_moe_layer_step: LayerCount | None = None
    mlp_only_layers: Annotated[list[LayerIndex], Field(max_length=MAX_LAYERS)] | None = None
    num_nextn_predict_layers: LayerCount | None = None
    mtp_num_hidden_layers: LayerCount | None = None
    # Linear attention (gated delta net) and state-space (Mamba-2) mixers
    linear_attn_config: LinearAttentionConfig | None = None
    linear_num_key_heads: Heads | None = None
    linear_num_value_heads: Heads | None = None
    linear_key_head_dim: Width | None = None
    linear_value_head_dim: Width | None = None
    linear_conv_kernel_dim: Kernel | None = None
    mamba_num_heads: Heads | None = None
    mamba_head_dim: Width | None = None
    ssm_state_size: Width | None = None
    n_groups: Heads | None = None
    conv_kernel: Kernel | None = None
    expand: Kernel | None = None
    mamba_ssm_cache_dtype: Text | None = None
    mamba_n_heads: Heads | None = None
    mamba_d_head: Width | None = None
    mamba_d_state: Width | None = None
    mamba_n_groups: Heads | None = None
    mamba_d_conv: Kernel | None = None
    mamba_expand: Kernel | None = None
    # Quantization and towers
    quantization_config: QuantizationConfig | None = None
    vision_config: VisionConfig | None = None


class ModelConfig(TextModelConfig):
    """A whole `config.json`: the text model's fields, or a wrapper holding them."""
    text_config: TextModelConfig | None = None
    language_config: TextModelConfig | None = None
    llm_config: TextModelConfig | None = None


def check_config(config: Any) -> dict[str, Any]:
    """`config` itself once it is within the schema, else `ConfigRefused` naming the field and the bound.
    Bounded work: the shape is checked first, without recursion, so the schema never walks a deep or
    huge document."""
    if not isinstance(config, dict):
        raise ConfigRefused("config.json must be a JSON object")
    _check_shape(config)
    try:
        ModelConfig.model_validate(config)
    except ValidationError as exc:
        raise _refusal(exc) from None
    return config


def _check_shape(config: dict[str, Any]) -> None:
    nodes = 0
    stack: list[tuple[Any, int, str]] = [(config, 1, "")]  # iterative: a recursive walk is what deep input breaks
    while stack:
        value, depth, path = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ConfigRefused(f"config.json has more than {MAX_NODES:,} values; a model config has hundreds")
        if depth > MAX_DEPTH:
            raise ConfigRefused(f"config.json nests deeper than {MAX_DEPTH} levels (at {path or 'the top'})",
                                field=path or None)
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))


def _refusal(exc: ValidationError) -> ConfigRefused:
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = _path(first["loc"])
    got = repr(first.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    reason = str(first["msg"]).removeprefix("Value error, ")
    more = f" ({len(errors) - 1} more field{'s' if len(errors) > 2 else ''} out of bounds)" if len(errors) > 1 else ""
    return ConfigRefused(f"config.json field {field}: {reason[:1].lower()}{reason[1:]} (got {got}){more}", field=field)


def _path(loc: tuple[int | str, ...]) -> str:
    # Union members appear in the location as their type names; the user knows only the keys.
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part in ("int", "list[int]", "function-before[_whole_number(), int]", "constrained-int") or \
                part.startswith(("function-", "list[")):
            continue
        else:
            parts.append(("." if parts else "") + part)
    return "".join(parts)
