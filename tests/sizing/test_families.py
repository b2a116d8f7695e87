"""Model configs are read by architecture family, explicitly (issue 48, item 4).

A hybrid Mamba/attention config (Nemotron-3 Nano: 23 Mamba-2, 23 MoE and 6 attention blocks) used to be
sized as 52 attention layers: weights 210 GB against ~63 GB by hand, KV 53,248 against 6,144 bytes per
token, no SSM state. Each family below is checked against a count written here, independently of the
plane's code; a family the plane does not read is refused with the reason, never sized as another.

The hybrid fixtures are written in upstream's own config.json format (the facts of NVIDIA's published
Nemotron-3 Nano 30B-A3B config; Granite's spellings for a second hybrid).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hub.conftest import shipped_models
from wingsmith.domain.sizing import SizingError, read_text_model
from wingsmith.domain.sizing.kv_cache import kv_cache_spec_for
from wingsmith.domain.sizing.weights import estimate_parameters, split_weights

NEMOTRON_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NEMOTRON_NANO = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "torch_dtype": "bfloat16",
    "hidden_size": 2688, "num_hidden_layers": 52, "hybrid_override_pattern": NEMOTRON_PATTERN,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
    "intermediate_size": 1856, "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
    "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 6, "mlp_hidden_act": "relu2",
    "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
    "expand": 2, "mamba_ssm_cache_dtype": "float32", "max_position_embeddings": 262144, "sliding_window": None,
    "tie_word_embeddings": False,
}
BLOCK_NAMES = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def hand_count_nemotron(c: dict) -> dict[str, int]:
    """Parameters of a Nemotron-H config, block by block, as the modelling code lays them out."""
    h, pattern = c["hidden_size"], c["hybrid_override_pattern"]
    heads, p, state, groups = c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"]
    inner = heads * p
    mamba = (h * (2 * inner + 2 * groups * state + heads) + (inner + 2 * groups * state) * c["conv_kernel"]
             + inner * h + inner + 3 * heads)
    attention = 2 * h * c["num_attention_heads"] * c["head_dim"] + 2 * h * c["num_key_value_heads"] * c["head_dim"]
    moe = (c["n_routed_experts"] * 2 * h * c["moe_intermediate_size"]          # up and down, no gate (relu2)
           + 2 * h * c["moe_shared_expert_intermediate_size"] + h * c["n_routed_experts"])
    mlp = 2 * h * c["intermediate_size"]
    blocks = {"M": mamba, "*": attention, "E": moe, "-": mlp}
    return {"blocks": sum(blocks[b] for b in pattern), "embeddings": 2 * c["vocab_size"] * h}


def test_a_hybrid_mamba_model_is_sized_within_ten_percent_of_a_hand_count():
    model = read_text_model(NEMOTRON_NANO)
    params = estimate_parameters(model)
    hand = hand_count_nemotron(NEMOTRON_NANO)
    total, hand_total = sum(params.values()), sum(hand.values())
    assert abs(total - hand_total) / hand_total < 0.10
    assert 60e9 < total * 2 < 66e9  # ~63 GB in bfloat16, as published; the old reading said 210 GB
    kv = kv_cache_spec_for(model)
    # 6 attention blocks × 2 KV heads × 128 × (K and V) × 2 bytes; the old reading counted 52 layers: 53,248.
    assert kv.bytes_per_token.value == 6 * 2 * 128 * 2 * 2 == 6144
    # The SSM state per sequence, beside the KV cache: 23 Mamba blocks × (state + convolution window).
    ssm = 64 * 64 * 128 * 4 + (64 * 64 + 2 * 8 * 128) * (4 - 1) * 2
    assert kv.linear_state_bytes_per_sequence.value == 23 * ssm
    assert kv.formula == "hybrid_linear"
    assert model.experts is not None and model.experts.moe_layers == 23


def test_layers_block_type_reads_like_the_pattern():
    spelled = dict(NEMOTRON_NANO, layers_block_type=[BLOCK_NAMES[b] for b in NEMOTRON_PATTERN])
    del spelled["hybrid_override_pattern"]
    assert read_text_model(spelled) == read_text_model(NEMOTRON_NANO)


def test_granite_spellings_of_a_hybrid_read_mamba_state():
    """Granite-4.0-H style: every layer a mixer (mamba or attention) and an MLP, the state in `mamba_d_*`."""
    granite = {"model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 4,
               "layer_types": ["mamba", "mamba", "mamba", "attention"], "num_attention_heads": 12,
               "num_key_value_heads": 4, "vocab_size": 100352, "intermediate_size": 4096,
               "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
               "mamba_d_conv": 4, "torch_dtype": "bfloat16"}
    model = read_text_model(granite)
    assert model.count("linear") == 3 and model.attention_layers == 1
    assert model.linear is not None and model.linear.kind == "mamba2"
    kv = kv_cache_spec_for(model)
    assert kv.bytes_per_token.value == 1 * 4 * (1536 // 12) * 2 * 2
    assert kv.linear_state_bytes_per_sequence.value == 3 * (48 * 64 * 128 * 4 + (48 * 64 + 2 * 128) * 3 * 2)


@pytest.mark.parametrize(("config", "words"), [
    # Jamba-style: Mamba fields and a period instead of a pattern.
    ({"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4},
     r"state-space \(Mamba\) fields"),
    (dict(NEMOTRON_NANO, hybrid_override_pattern=NEMOTRON_PATTERN[:-1] + "X"), "block kinds the plane does not know"),
    (dict(NEMOTRON_NANO, hybrid_override_pattern=NEMOTRON_PATTERN[:-1]), "51 blocks but num_hidden_layers is 52"),
    (dict(NEMOTRON_NANO, layers_block_type=["mamba"] * 51 + ["conv"]), "block types the plane does not know"),
    ({"model_type": "nemotron-nas", "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
      "block_configs": [{"attention": {"no_op": True}}]}, "block_configs"),
    ({"model_type": "x", "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8,
      "layer_types": ["linear_attention", "mamba"], "mamba_n_heads": 8, "mamba_d_head": 64, "mamba_d_state": 16},
     "mixes linear-attention and Mamba layers"),
])
def test_a_family_the_plane_does_not_read_is_refused_with_the_reason(config, words):
    with pytest.raises(SizingError, match=words):
        read_text_model(config)


def test_an_mtp_layers_routed_experts_are_split_like_the_others():
    """DeepSeek-V3's MTP layer holds 256 routed experts: counted as dense, expert parallelism replicated them
    on every GPU (+17% per GPU on 16-way EP)."""
    config = shipped_models()["deepseek-ai/DeepSeek-V3"]["config"]
    model = read_text_model(config)
    assert model.mtp_layers == 1 and model.experts is not None
    e = model.experts
    per_layer = e.count * 3 * e.expert_hidden * e.intermediate
    split = split_weights(model, 689_000_000_000)  # fp8: one byte per parameter, and its block scales
    assert split.experts.value == pytest.approx((e.moe_layers + 1) * per_layer, rel=1e-3)


# --- the property: generated configs of every family against an independent count ---------------------

@st.composite
def configs(draw):
    heads = draw(st.sampled_from([8, 16, 32]))
    head_dim = draw(st.sampled_from([64, 128]))
    hidden = heads * head_dim
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8) if heads % h == 0]))
    vocab = draw(st.integers(1000, 50000))
    inter = draw(st.integers(64, 8192))
    family = draw(st.sampled_from(["dense", "moe", "hybrid"]))
    config = {"model_type": f"gen_{family}", "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": head_dim, "vocab_size": vocab, "intermediate_size": inter,
              "torch_dtype": "bfloat16", "tie_word_embeddings": draw(st.booleans())}
    if family == "hybrid":
        pattern = draw(st.text(alphabet="M*-E", min_size=2, max_size=60).filter(lambda p: "*" in p))
        config |= {"hybrid_override_pattern": pattern, "num_hidden_layers": len(pattern), "mlp_hidden_act": "relu2",
                   "mamba_num_heads": draw(st.sampled_from([8, 16, 64])), "mamba_head_dim": 64,
                   "ssm_state_size": draw(st.sampled_from([16, 64, 128])), "n_groups": draw(st.sampled_from([1, 8])),
                   "conv_kernel": 4, "n_routed_experts": draw(st.integers(2, 64)),
                   "moe_intermediate_size": draw(st.integers(64, 2048)), "n_shared_experts": 1,
                   "moe_shared_expert_intermediate_size": draw(st.integers(64, 4096))}
    else:
        config["num_hidden_layers"] = draw(st.integers(1, 80))
        if family == "moe":
            config |= {"n_routed_experts": draw(st.integers(2, 256)),
                       "moe_intermediate_size": draw(st.integers(64, 2048)),
                       "first_k_dense_replace": draw(st.integers(0, config["num_hidden_layers"] - 1)),
                       "n_shared_experts": draw(st.integers(0, 2))}
    return family, config


def independent_count(family: str, c: dict) -> tuple[int, int]:
    """(parameters, KV bytes per token) counted from the config by this test's own reading."""
    h, n = c["hidden_size"], c["num_hidden_layers"]
    attention = 2 * h * c["num_attention_heads"] * c["head_dim"] + 2 * h * c["num_key_value_heads"] * c["head_dim"]
    embeddings = c["vocab_size"] * h * (1 if c["tie_word_embeddings"] else 2)
    kv_layer = c["num_key_value_heads"] * c["head_dim"] * 2 * 2
    if family == "hybrid":
        counted = hand_count_nemotron(c)
        return counted["blocks"] + embeddings, c["hybrid_override_pattern"].count("*") * kv_layer
    if family == "dense":
        return n * (attention + 3 * h * c["intermediate_size"]) + embeddings, n * kv_layer
    dense = c["first_k_dense_replace"]
    moe = n - dense
    experts = moe * c["n_routed_experts"] * 3 * h * c["moe_intermediate_size"]
    shared = moe * (c["n_shared_experts"] * 3 * h * c["moe_intermediate_size"] + h * c["n_routed_experts"])
    return n * attention + dense * 3 * h * c["intermediate_size"] + experts + shared + embeddings, n * kv_layer


@settings(max_examples=300, deadline=None)
@given(configs())
def test_generated_configs_of_every_family_size_like_an_independent_count(generated):
    family, config = generated
    model = read_text_model(config)
    params, kv = independent_count(family, config)
    assert sum(estimate_parameters(model).values()) == params
    assert kv_cache_spec_for(model).bytes_per_token.value == kv
