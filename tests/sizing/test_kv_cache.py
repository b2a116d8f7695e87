from __future__ import annotations

import pytest

from wingsmith.domain.sizing import SizingError, kv_cache_spec, read_text_model

from .conftest import config

# (repo, bf16 KV bytes per token, formula)
PER_TOKEN = [
    ("meta-llama/Llama-3.1-8B", 131_072, "gqa"),
    ("Qwen/Qwen3-8B", 147_456, "gqa"),
    ("deepseek-ai/DeepSeek-V3", 70_272, "mla"),
    ("moonshotai/Kimi-K2-Instruct", 70_272, "mla"),
    ("openai/gpt-oss-120b", 36_864, "hybrid_sliding"),
]


@pytest.mark.parametrize(("repo", "expected", "formula"), PER_TOKEN)
def test_bytes_per_token_bf16(repo, expected, formula):
    spec = kv_cache_spec(config(repo))
    assert spec.bytes_per_token.value == expected
    assert spec.formula == formula
    assert spec.kv_dtype_bytes == 2


@pytest.mark.parametrize("repo", ["deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct"])
def test_mla_latent_is_per_rank_and_replicated(repo):
    spec = kv_cache_spec(config(repo))
    assert "per tensor-parallel rank" in spec.bytes_per_token_scope
    assert spec.mla_bytes_per_token.inputs == {"layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                               "kv_dtype_bytes": 2}
    # The misleading num_key_value_heads (= head count) must play no part.
    assert spec.full_attention_bytes_per_token.value == 0
    for tp in (1, 8, 16):
        assert spec.per_rank_bytes_per_token(tp) == 70_272


def test_gqa_heads_split_then_replicate():
    spec = kv_cache_spec(config("meta-llama/Llama-3.1-8B"))
    assert "whole model" in spec.bytes_per_token_scope
    assert [spec.per_rank_bytes_per_token(tp) for tp in (1, 2, 8, 16)] == [131_072, 65_536, 16_384, 16_384]


def test_gpt_oss_sliding_part_is_bounded_per_sequence():
    spec = kv_cache_spec(config("openai/gpt-oss-120b"))
    assert spec.sliding_window == 128
    assert spec.sliding_bytes_per_token.value == 36_864  # 18 sliding layers, same shape
    assert spec.sliding_bytes_per_sequence_max.value == 36_864 * 128
    short, long_ = spec.per_rank_sequence_bytes(100, 1), spec.per_rank_sequence_bytes(100_000, 1)
    assert short == 36_864 * 100 * 2
    assert long_ == 36_864 * 100_000 + 36_864 * 128
    # head_dim comes from the config (64), not hidden_size / heads (45)
    assert spec.full_attention_bytes_per_token.inputs["head_dim"] == 64
    assert spec.full_attention_bytes_per_token.inputs["head_dim_source"] == "config head_dim"


def test_kimi_k3_wrapper_hybrid_mla_and_kda():
    spec = kv_cache_spec(config("moonshotai/Kimi-K3"))
    assert spec.model_type == "kimi_linear"
    assert spec.formula == "hybrid_linear"
    assert spec.mla_bytes_per_token.inputs["layers"] == 24
    assert spec.bytes_per_token.value == 24 * (512 + 64) * 2
    state = spec.linear_state_bytes_per_sequence
    assert state.inputs["layers"] == 69
    assert state.value == 69 * (96 * 128 * 128 * 4 + 3 * 96 * 128 * 3 * 2)
    # the linear state does not grow with context, and splits by heads across TP ranks
    grow = spec.per_rank_sequence_bytes(2000, 1) - spec.per_rank_sequence_bytes(1000, 1)
    assert grow == 1000 * spec.bytes_per_token.value
    assert spec.per_rank_sequence_bytes(0, 8) == state.value // 8


@pytest.mark.parametrize(("repo", "bf16"), [(r, v) for r, v, _ in PER_TOKEN])
def test_fp8_kv_halves_every_part(repo, bf16):
    spec = kv_cache_spec(config(repo), kv_dtype="fp8")
    assert spec.bytes_per_token.value == bf16 // 2


def test_sparse_attention_indexer_adds_per_rank_keys():
    cfg = config("deepseek-ai/DeepSeek-V3")
    cfg["index_head_dim"] = 128  # DeepSeek-V3.2's indexer on the V3 shape
    spec = kv_cache_spec(cfg)
    assert spec.indexer_bytes_per_token.value == 61 * (128 + 4)
    assert spec.bytes_per_token.value == 70_272 + 61 * 132
    assert spec.per_rank_bytes_per_token(8) == spec.bytes_per_token.value


def test_head_dim_falls_back_to_hidden_over_heads():
    cfg = config("meta-llama/Llama-3.3-70B-Instruct")
    assert "head_dim" not in cfg
    spec = kv_cache_spec(cfg)
    assert spec.full_attention_bytes_per_token.inputs["head_dim_source"] == "hidden_size / num_attention_heads"
    assert spec.bytes_per_token.value == 80 * 8 * 128 * 2 * 2


@pytest.mark.parametrize(("change", "message"), [
    ({"num_hidden_layers": None}, "num_hidden_layers"),
    ({"layer_types": ["full_attention"]}, "layer_types has 1 entries"),
    ({"layer_types": ["weird"] * 32}, "unknown layer type 'weird'"),
    ({"quantization_config": {"quant_method": "mystery"}}, "unsupported quantization_config"),
    ({"torch_dtype": "int3"}, "unsupported model dtype"),
])
def test_bad_configs_say_what_is_wrong(change, message):
    cfg = config("meta-llama/Llama-3.1-8B")
    cfg.update(change)
    with pytest.raises(SizingError, match=message):
        kv_cache_spec(cfg)


def test_unknown_kv_dtype_is_named():
    with pytest.raises(SizingError, match="unknown kv-cache dtype 'int2'"):
        kv_cache_spec(config("Qwen/Qwen3-8B"), kv_dtype="int2")


def test_config_must_be_an_object():
    with pytest.raises(SizingError, match="JSON object"):
        kv_cache_spec([1, 2])  # type: ignore[arg-type]


def test_wrapper_top_level_fills_gaps_in_text_config():
    inner = config("Qwen/Qwen3-8B")
    vocab = inner.pop("vocab_size")
    wrapper = {"model_type": "qwen3_vl_like", "vocab_size": vocab, "text_config": inner,
               "vision_config": {"hidden_size": 1}}
    model = read_text_model(wrapper)
    assert model.wrapper_model_type == "qwen3_vl_like" and model.model_type == "qwen3"
    assert model.vocab_size == vocab and model.hidden_size == 4096
    assert kv_cache_spec(wrapper).bytes_per_token.value == 147_456


def _glm5_shaped() -> dict:
    """GLM-5's attention shape (78 MLA layers, latent 512 + rope 64, a 128-wide indexer) on DeepSeek-V3's
    published config: the Hub snapshot holds no GLM-5 config."""
    cfg = config("deepseek-ai/DeepSeek-V3")
    cfg.update(num_hidden_layers=78, index_head_dim=128, model_type="glm_moe_dsa")
    return cfg


def test_fp8_kv_on_sparse_mla_is_sized_as_vllms_fp8_ds_mla_layout():
    # vLLM switches an fp8 KV cache of sparse MLA to `fp8_ds_mla`: the latent in fp8, one float32 scale
    # per 128 latent values, the rope part in 16-bit (FlashMLASparseBackend.get_kv_cache_shape: 656).
    cfg = _glm5_shaped()
    spec = kv_cache_spec(cfg, kv_dtype="fp8")
    layers, latent, rope = cfg["num_hidden_layers"], cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    per_layer = latent * 1 + (latent // 128) * 4 + rope * 2
    assert per_layer == 656
    assert spec.mla_bytes_per_token.value == layers * per_layer
    assert spec.mla_bytes_per_token.inputs["layout"] == "fp8_ds_mla"
    indexer = layers * (cfg["index_head_dim"] + 4)
    assert spec.bytes_per_token.value == layers * per_layer + indexer
    # Before: (512 + 64) × 1 B per layer, as if the rope part and the scales were fp8 too.
    assert spec.bytes_per_token.value != layers * (latent + rope) + indexer


def test_fp8_kv_on_dense_mla_stays_one_byte_per_latent_value():
    # Without an indexer vLLM keeps the plain MLA layout: (kv_lora_rank + rope) × 1 B in fp8.
    cfg = config("deepseek-ai/DeepSeek-V3")
    spec = kv_cache_spec(cfg, kv_dtype="fp8")
    assert spec.mla_bytes_per_token.value == cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
