"""The facts sizing needs, read once from a Hugging Face `config.json`.

Multimodal wrappers (Kimi-K3, Llama-4, Qwen-VL, ...) keep the language model under `text_config`;
the language model is what holds the KV cache and nearly all the weights, so that is what is read.
Every attention layer is classified as one of four kinds, because each kind grows differently:

- `full`: standard MHA/GQA, grows with every token of the context;
- `sliding`: like `full` but keeps at most `sliding_window` tokens per sequence;
- `mla`: multi-head latent attention (DeepSeek, Kimi), one compressed latent per token per layer;
- `linear`: linear attention or recurrent layers (Kimi Delta Attention, gated delta net, Mamba-2), a
  fixed state per sequence whatever its length;
- `none`: a block with no mixer at all (Nemotron-H's MLP-only and MoE-only blocks).

Families are recognised by what their configs say, explicitly: dense, mixture of experts (routed and
shared), MLA, multi-token-prediction layers, sliding-window and per-layer attention (`layer_types`), and
hybrid state-space models (`hybrid_override_pattern`, `layers_block_type`, `mamba` in `layer_types`).
A config with state-space fields but no pattern the plane reads, or a block kind it does not know, is
refused with the reason (the draft says "not sized" and why) rather than sized as something it is not.
Every config passes the bounded schema (wingsmith/domain/hub/config_schema.py) before anything here reads it.
"""

from __future__ import annotations

from typing import Literal, overload

from pydantic import BaseModel

from wingsmith.domain.hub.config_schema import ConfigRefused, check_config
from wingsmith.domain.sizing.figures import SizingError

LayerKind = Literal["full", "sliding", "mla", "linear", "none"]
ATTENTION_KINDS: tuple[LayerKind, ...] = ("full", "sliding", "mla")

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1}


class LinearAttention(BaseModel, frozen=True):
    """Shape of one linear-attention or state-space layer's per-sequence state. For Mamba-2 the state per
    head is head_dim × ssm_state_size, so `key_head_dim` holds the state size and `value_head_dim` the head
    width: the same product as a delta net's key × value state."""
    kind: str  # "kda", "gated_delta_net" or "mamba2"
    num_heads: int  # heads the recurrent state is split over (sharded across TP ranks)
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    conv_channels: int  # channels of the short convolution whose last kernel-1 inputs are kept
    groups: int = 0  # Mamba-2's B/C groups

    def parameters(self, hidden: int) -> int:
        """Weights of one such layer."""
        width = self.num_heads * self.value_head_dim
        if self.kind == "mamba2":
            # in_proj (x, z, B, C, dt), the depthwise convolution, out_proj, the gated norm, A, D, dt bias
            in_proj = hidden * (2 * width + 2 * self.groups * self.key_head_dim + self.num_heads)
            return in_proj + self.conv_channels * self.conv_kernel + width * hidden + width + 3 * self.num_heads
        return 3 * hidden * width + 2 * hidden * width  # q, k, v, gate and output projections


class Experts(BaseModel, frozen=True):
    """Routed experts: the weights expert parallelism splits."""
    count: int
    moe_layers: int
    expert_hidden: int  # width experts work in (a latent width on Kimi-K3 and Nemotron-3 Super, else hidden_size)
    intermediate: int
    shared: int = 0
    shared_intermediate: int | None = None  # a shared expert's own width, where the config gives one
    matrices: int = 3  # gate, up and down; 2 for the non-gated (squared ReLU) MLPs of Nemotron
    mtp_layers: int = 0  # multi-token-prediction layers, each with a full set of routed experts

    @property
    def parameters(self) -> int:
        """Every routed expert the checkpoint holds, the MTP layers' included (expert parallelism splits
        those too: counted as dense they were replicated on every GPU)."""
        return self.count * (self.moe_layers + self.mtp_layers) * self.matrices * self.expert_hidden * self.intermediate

    def shared_parameters(self, hidden: int) -> int:
        """Shared experts, the router and, for a latent MoE (Kimi-K3, Nemotron-3 Super), the projections into
        and out of the experts' narrower width, per MoE layer."""
        width = self.shared_intermediate or self.intermediate
        latent = 2 * hidden * self.expert_hidden if self.expert_hidden != hidden else 0
        return self.shared * self.matrices * hidden * width + hidden * self.count + latent


class TextModel(BaseModel, frozen=True):
    model_type: str
    wrapper_model_type: str | None = None
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_source: str
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int | None
    dtype: str
    dtype_bytes: int
    layer_kinds: tuple[LayerKind, ...]
    sliding_window: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    index_head_dim: int | None = None
    linear: LinearAttention | None = None
    experts: Experts | None = None
    first_dense_layers: int = 0
    tie_word_embeddings: bool = False
    quantization: str = "none"  # scheme of the quantized linear weights, see weights.BYTES_PER_PARAMETER
    dense_quantized: bool = False  # whether attention and dense MLPs use that scheme too
    mtp_layers: int = 0  # multi-token-prediction layers stored beside the decoder layers
    vision_parameters: int = 0  # a wrapper's vision tower and projector, estimated from its config
    # Hybrid patterns say which blocks hold a dense MLP; None: every layer not holding experts does.
    dense_mlp_layers: int | None = None
    mlp_matrices: int = 3  # gate, up and down; 2 for non-gated MLPs

    def count(self, kind: LayerKind) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def attention_layers(self) -> int:
        return sum(1 for k in self.layer_kinds if k in ATTENTION_KINDS)

    @property
    def is_moe(self) -> bool:
        return self.experts is not None


@overload
def _int(cfg: dict, *keys: str, default: int | None = None, required: Literal[True] = True) -> int: ...
@overload
def _int(cfg: dict, *keys: str, default: int | None = None, required: bool) -> int | None: ...
def _int(cfg: dict, *keys: str, default: int | None = None, required: bool = True) -> int | None:
    """The first of `keys` the config sets, as an int; else `default`; else (when required) an error."""
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SizingError(f"config field {key!r} must be a number, got {value!r}")
            return int(value)
    if default is not None or not required:
        return default
    raise SizingError(f"config has none of {', '.join(repr(k) for k in keys)}; cannot size this model")


def text_config(config: dict) -> tuple[dict, str | None]:
    """The language-model part of a config and, for wrappers, the wrapper's model_type.

    Some wrappers keep a few language-model fields at the top level, so the top level fills in
    whatever the inner config leaves out.
    """
    if not isinstance(config, dict):
        raise SizingError("config must be a JSON object (the model's config.json)")
    for key in ("text_config", "language_config", "llm_config"):
        inner = config.get(key)
        if isinstance(inner, dict) and inner:
            outer = {k: v for k, v in config.items() if not k.endswith("_config")}
            return outer | inner, config.get("model_type")
    return config, None


def _dtype(cfg: dict, outer: dict) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or outer.get("torch_dtype") or outer.get("dtype")
    dtype = str(raw or "bfloat16").removeprefix("torch.")
    if dtype not in DTYPE_BYTES:
        raise SizingError(f"unsupported model dtype {raw!r}; expected one of {sorted(DTYPE_BYTES)}")
    return dtype


def _quantization(cfg: dict, outer: dict) -> tuple[str, bool]:
    """The scheme of the quantized linear weights, and whether the dense layers share it."""
    q = cfg.get("quantization_config") or outer.get("quantization_config")
    if not q:
        return "none", False
    method = str(q.get("quant_method", "")).lower()
    fmt = str(q.get("format", "") or q.get("fmt", "")).lower()
    if method == "mxfp4" or "mxfp4" in fmt:
        scheme = "mxfp4"
    elif "nvfp4" in fmt or method in ("modelopt_fp4", "nvfp4"):
        scheme = "nvfp4"
    elif method in ("fp8", "fbgemm_fp8") or "float-quantized" in fmt or fmt == "e4m3":
        scheme = "fp8"
    elif method in ("awq", "gptq") or "pack-quantized" in fmt:
        bits = q.get("bits") or q.get("w_bit") or 4
        scheme = "int4" if int(bits) == 4 else "int8"
    else:
        raise SizingError(f"unsupported quantization_config (quant_method={method!r}, format={fmt!r})")
    ignores = " ".join(str(x) for x in (q.get("ignore") or q.get("modules_to_not_convert") or []))
    # Checkpoints that leave attention in full precision say so in their ignore list (gpt-oss,
    # Kimi-K3); block-fp8 checkpoints (DeepSeek, Kimi-K2) quantize every linear layer.
    return scheme, "attn" not in ignores


# Hybrid state-space models (Nemotron-H) spell one block per layer, each a mixer or an MLP, not both.
_PATTERN_BLOCKS = {"M": "Mamba-2 mixer", "*": "attention", "-": "dense MLP", "E": "mixture of experts"}
_BLOCK_NAMES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
# Fields only state-space models carry: a config with them and no pattern above is not sized as attention.
_SSM_PREFIXES = ("mamba_", "ssm_", "attn_layer_period", "attn_layer_offset", "expert_layer_period")


def _hybrid_pattern(cfg: dict, n: int) -> str | None:
    """The block pattern of a hybrid SSM config, one character of `_PATTERN_BLOCKS` per layer, or None."""
    pattern = cfg.get("hybrid_override_pattern")
    blocks = cfg.get("layers_block_type")
    if blocks is not None:
        unknown = sorted({str(b) for b in blocks if b not in _BLOCK_NAMES})
        if unknown:
            raise SizingError(f"layers_block_type names block types the plane does not know ({', '.join(unknown)}); "
                              f"it reads {', '.join(_BLOCK_NAMES)}")
        spelled = "".join(_BLOCK_NAMES[b] for b in blocks)
        if pattern is not None and pattern != spelled:
            raise SizingError("hybrid_override_pattern and layers_block_type describe different layers")
        pattern = spelled
    if pattern is None:
        return None
    unknown = sorted(set(pattern) - set(_PATTERN_BLOCKS))
    if unknown:
        raise SizingError(f"hybrid_override_pattern has block kinds the plane does not know ({' '.join(unknown)}); "
                          f"it reads {', '.join(f'{k} ({v})' for k, v in _PATTERN_BLOCKS.items())}")
    if len(pattern) != n:
        raise SizingError(f"the hybrid pattern has {len(pattern)} blocks but num_hidden_layers is {n}")
    return pattern


def _mamba(cfg: dict) -> LinearAttention:
    """A Mamba-2 mixer's state, in Nemotron-H's spellings or Granite's (`mamba_n_heads`, ...)."""
    heads = _int(cfg, "mamba_num_heads", "mamba_n_heads")
    head_dim = _int(cfg, "mamba_head_dim", "mamba_d_head")
    state = _int(cfg, "ssm_state_size", "mamba_d_state")
    groups = _int(cfg, "n_groups", "mamba_n_groups", default=1)
    kernel = _int(cfg, "conv_kernel", "mamba_d_conv", default=4)
    # The convolution runs over x, B and C: the inner width plus two group-wide state projections.
    return LinearAttention(kind="mamba2", num_heads=heads, key_head_dim=state, value_head_dim=head_dim,
                           conv_kernel=kernel, conv_channels=heads * head_dim + 2 * groups * state, groups=groups)


def _layer_kinds(cfg: dict, n: int, mla: bool) -> tuple[tuple[LayerKind, ...], LinearAttention | None]:
    attention: LayerKind = "mla" if mla else "full"
    lin = cfg.get("linear_attn_config")
    if isinstance(lin, dict) and lin.get("kda_layers") is not None:
        # Kimi Linear / Kimi-K3 number layers from 1.
        kda = {int(i) for i in lin["kda_layers"]}
        if any(i < 1 or i > n for i in kda):
            raise SizingError(f"linear_attn_config.kda_layers must lie in 1..{n}")
        heads = _int(lin, "num_heads")
        head_dim = _int(lin, "head_dim")
        kernel = _int(lin, "short_conv_kernel_size", default=4)
        state = LinearAttention(kind="kda", num_heads=heads, key_head_dim=head_dim,
                                value_head_dim=head_dim, conv_kernel=kernel,
                                conv_channels=3 * heads * head_dim)  # q, k and v each convolved
        return tuple("linear" if i in kda else attention for i in range(1, n + 1)), state
    types = cfg.get("layer_types")
    if types is not None:
        if len(types) != n:
            raise SizingError(f"layer_types has {len(types)} entries but num_hidden_layers is {n}")
        kinds: list[LayerKind] = []
        recurrent: set[str] = set()
        for t in types:
            if t in ("full_attention", "attention", "global_attention"):
                kinds.append(attention)
            elif t in ("sliding_attention", "sliding_window_attention", "local_attention"):
                kinds.append("sliding")
            elif t in ("linear_attention", "mamba"):
                kinds.append("linear")
                recurrent.add(t)
            else:
                raise SizingError(f"unknown layer type {t!r} in layer_types")
        if len(recurrent) > 1:
            raise SizingError("layer_types mixes linear-attention and Mamba layers; the plane sizes one kind of "
                              "recurrent layer per model")
        linear_state: LinearAttention | None = None
        if "mamba" in recurrent:
            linear_state = _mamba(cfg)
        elif recurrent:
            k_heads = _int(cfg, "linear_num_key_heads")
            v_heads = _int(cfg, "linear_num_value_heads")
            k_dim = _int(cfg, "linear_key_head_dim")
            v_dim = _int(cfg, "linear_value_head_dim")
            kernel = _int(cfg, "linear_conv_kernel_dim", default=4)
            linear_state = LinearAttention(kind="gated_delta_net", num_heads=v_heads, key_head_dim=k_dim,
                                           value_head_dim=v_dim, conv_kernel=kernel,
                                           conv_channels=2 * k_heads * k_dim + v_heads * v_dim)
        return tuple(kinds), linear_state
    if cfg.get("block_configs") is not None:
        raise SizingError("the config gives each layer its own shape (block_configs, a searched architecture); the "
                          "plane reads models whose layers share one shape")
    ssm = sorted(k for k in cfg if k.startswith(_SSM_PREFIXES))
    if ssm:
        raise SizingError(f"the config has state-space (Mamba) fields ({', '.join(ssm[:4])}) but no layer pattern the "
                          "plane reads (hybrid_override_pattern, layers_block_type, or mamba in layer_types), so it "
                          "cannot tell which layers hold attention")
    if cfg.get("sliding_window") and cfg.get("use_sliding_window", True) and not mla:
        windowed: LayerKind = "sliding"
        return (windowed,) * n, None  # Mistral style: every layer windowed
    return (attention,) * n, None


def _experts(cfg: dict, n: int, hidden: int, *, moe_layers: int | None, matrices: int,
             mtp_layers: int) -> tuple[Experts | None, int]:
    """Routed experts; `moe_layers` when a hybrid pattern says which blocks hold them."""
    count = _int(cfg, "n_routed_experts", "num_experts", "num_local_experts", required=False)
    if not count:
        if moe_layers:
            raise SizingError("the layer pattern has mixture-of-experts blocks but the config gives no expert count")
        return None, 0
    first_dense = _int(cfg, "first_k_dense_replace", default=0)
    if moe_layers is None:
        freq = cfg.get("moe_layer_freq")
        if isinstance(freq, list):
            raise SizingError("moe_layer_freq as a per-layer list is a spelling the plane does not read")
        step = _int(cfg, "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", default=1) or 1
        dense_only = set(cfg.get("mlp_only_layers") or [])
        moe_layers = sum(1 for i in range(first_dense, n) if i % step == 0 and i not in dense_only)
    intermediate = _int(cfg, "moe_intermediate_size", "intermediate_size")
    shared_width = _int(cfg, "moe_shared_expert_intermediate_size", "shared_expert_intermediate_size",
                        required=False) or None
    shared = _int(cfg, "n_shared_experts", "num_shared_experts", default=1 if shared_width else 0)
    return Experts(count=count, moe_layers=moe_layers,
                   expert_hidden=_int(cfg, "routed_expert_hidden_size", "moe_latent_size", default=hidden),
                   intermediate=intermediate, shared=shared, shared_intermediate=shared_width,
                   matrices=matrices, mtp_layers=mtp_layers), first_dense


def _vision_parameters(config: dict) -> int:
    """Parameters of a wrapper's vision tower (ViT blocks: qkv and output projections plus a two-layer
    MLP) and the projector into the language model's width. Names differ per family, so read the
    common spellings; an absent or unreadable tower counts as zero."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return 0
    try:
        layers = _int(vc, "num_hidden_layers", "depth", "vt_num_hidden_layers", "num_layers", required=False)
        width = _int(vc, "hidden_size", "embed_dim", "vt_hidden_size", "width", required=False)
        if not layers or not width:
            return 0
        inter = _int(vc, "intermediate_size", "vt_intermediate_size", "mlp_dim", required=False) or 4 * width
        text = _int(vc, "text_hidden_size", "out_hidden_size", required=False) or _int(
            text_config(config)[0], "hidden_size", required=False) or width
    except SizingError:
        return 0
    merge = vc.get("merge_kernel_size") or vc.get("spatial_merge_size") or 1
    area = merge[0] * merge[1] if isinstance(merge, list) and len(merge) == 2 else int(merge) ** 2
    return layers * (4 * width * width + 2 * width * inter) + width * area * text + text * text


def read_text_model(config: dict) -> TextModel:
    """Parse a `config.json` (or a wrapper's `text_config`) into the facts sizing uses."""
    try:
        check_config(config)
    except ConfigRefused as exc:
        raise SizingError(exc.message) from None
    cfg, wrapper = text_config(config)
    n = _int(cfg, "num_hidden_layers", "n_layers", "num_layers")
    if n <= 0:
        raise SizingError("num_hidden_layers must be positive")
    hidden = _int(cfg, "hidden_size", "d_model")
    heads = _int(cfg, "num_attention_heads", "n_heads")
    kv_heads = _int(cfg, "num_key_value_heads", default=heads)
    mla = cfg.get("kv_lora_rank") is not None
    if "head_dim" in cfg and cfg["head_dim"]:
        head_dim, head_dim_source = _int(cfg, "head_dim"), "config head_dim"
    elif mla:
        # Unused by the MLA cache; kept for the query/key width the attention computes with.
        head_dim = _int(cfg, "qk_nope_head_dim", default=128) + _int(cfg, "qk_rope_head_dim", default=64)
        head_dim_source = "qk_nope_head_dim + qk_rope_head_dim (MLA)"
    else:
        if hidden % heads:
            raise SizingError(f"hidden_size {hidden} is not divisible by num_attention_heads {heads} "
                              "and the config gives no head_dim")
        head_dim, head_dim_source = hidden // heads, "hidden_size / num_attention_heads"
    pattern = _hybrid_pattern(cfg, n)
    if pattern is not None:
        kinds: tuple[LayerKind, ...] = tuple(
            ("mla" if mla else "full") if b == "*" else "linear" if b == "M" else "none" for b in pattern)
        linear = _mamba(cfg) if "M" in pattern else None
    else:
        kinds, linear = _layer_kinds(cfg, n, mla)
    # Squared-ReLU MLPs (Nemotron) are not gated: an up and a down projection, no gate.
    matrices = 2 if (cfg.get("mlp_hidden_act") or cfg.get("hidden_act")) == "relu2" else 3
    mtp = _int(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0
    experts, first_dense = _experts(cfg, n, hidden, moe_layers=pattern.count("E") if pattern else None,
                                    matrices=matrices, mtp_layers=mtp)
    # Every layer without experts holds a dense MLP: the first k, `mlp_only_layers`, every other layer of an
    # interleaved MoE (Llama 4).
    num_layers_dense = n - experts.moe_layers if experts else n
    quant, dense_quantized = _quantization(cfg, config)
    dtype = _dtype(cfg, config)
    sliding = _int(cfg, "sliding_window", required=False) if "sliding" in kinds else None
    if "sliding" in kinds and not sliding:
        raise SizingError("the config has sliding-attention layers but no sliding_window")
    return TextModel(
        model_type=str(cfg.get("model_type") or config.get("model_type") or "unknown"),
        wrapper_model_type=wrapper, num_layers=n, hidden_size=hidden, num_attention_heads=heads,
        num_kv_heads=kv_heads, head_dim=head_dim, head_dim_source=head_dim_source,
        vocab_size=_int(cfg, "vocab_size", default=0),
        # Llama 4 names its dense layers' width apart from the experts' (`intermediate_size` there).
        intermediate_size=_int(cfg, "intermediate_size_mlp", "intermediate_size", default=4 * hidden),
        max_position_embeddings=_int(cfg, "max_position_embeddings", required=False),
        dtype=dtype, dtype_bytes=DTYPE_BYTES[dtype], layer_kinds=kinds, sliding_window=sliding,
        kv_lora_rank=_int(cfg, "kv_lora_rank", required=False),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", default=64) if mla else None,
        q_lora_rank=_int(cfg, "q_lora_rank", required=False),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", required=False),
        v_head_dim=_int(cfg, "v_head_dim", required=False),
        index_head_dim=_int(cfg, "index_head_dim", required=False),
        linear=linear, experts=experts, first_dense_layers=first_dense,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        quantization=quant, dense_quantized=dense_quantized,
        mtp_layers=mtp, vision_parameters=_vision_parameters(config),
        dense_mlp_layers=pattern.count("-") if pattern else (num_layers_dense if experts else None),
        mlp_matrices=matrices,
    )
