from __future__ import annotations

import pytest

from wingsmith.domain.sizing import (
    SizingError,
    compare_floor,
    estimate_weight_bytes,
    read_text_model,
    variant_weight_bytes,
    weights_floor,
)
from wingsmith.domain.sizing.weights import split_weights

from .conftest import config, meta, weight_bytes

# (repo, the vLLM recipe's published floor for the default variant, in GB)
PUBLISHED = [
    ("meta-llama/Llama-3.1-8B", 20),
    ("meta-llama/Llama-3.3-70B-Instruct", 170),
    ("deepseek-ai/DeepSeek-V3", 805),
    ("moonshotai/Kimi-K2-Instruct", 1200),
    ("Qwen/Qwen3-235B-A22B", 564),
]


@pytest.mark.parametrize(("repo", "published"), PUBLISHED)
def test_comparable_floor_within_five_percent(repo, published):
    ours = weights_floor(weight_bytes(repo))
    assert abs(ours - published) / published < 0.05
    cmp = compare_floor(weight_bytes(repo), f"{repo} meta.json", published, False, "default")
    assert cmp.level == "ok"
    assert cmp.ours.inputs["weight_bytes"] == weight_bytes(repo)


def test_floor_formula():
    assert weights_floor(16_060_522_496) == 20  # 19.27 rounds up
    assert weights_floor(10**9) == 2  # exactly 1.2 GB rounds up to 2, not more
    assert weights_floor(5 * 10**9) == 6  # exactly 6.0 stays 6
    with pytest.raises(SizingError, match="negative"):
        weights_floor(-1)


def test_kimi_k3_reported_and_informational():
    wb = weight_bytes("moonshotai/Kimi-K3")
    cmp = compare_floor(wb, "Kimi-K3 shard headers", 1680, True, "default")
    assert cmp.ours_gb in (1873, 1874)
    assert cmp.level == "informational"
    assert "1680" in cmp.message and str(cmp.ours_gb) in cmp.message and "estimate" in cmp.message


@pytest.mark.parametrize(("ours_bytes", "published", "level"), [
    (int(125e9 / 1.2), 100, "warning"),   # ours 125 vs 100: 25% above
    (int(124e9 / 1.2), 100, "ok"),        # 24% above
    (int(80e9 / 1.2), 100, "warning"),    # published 100 is 25% above ours 80
    (int(81e9 / 1.2), 100, "ok"),
    (int(40e9 / 1.2), 100, "warning"),
])
def test_warns_at_a_quarter_either_direction(ours_bytes, published, level):
    cmp = compare_floor(ours_bytes, "test bytes", published, False, "fp8")
    assert cmp.level == level
    if level == "warning":
        assert "test bytes" in cmp.message and f"{published}" in cmp.message and "fp8" in cmp.message


def test_estimate_upstream_floor_never_warns():
    assert compare_floor(int(40e9 / 1.2), "x", 100, True, "default").level == "informational"


def test_no_published_floor():
    cmp = compare_floor(10**9, "x", None, False, "nvfp4")
    assert cmp.level == "no_published_floor" and cmp.ratio is None


def test_variant_in_another_repo_resolved_or_derived():
    resolved = variant_weight_bytes("RedHatAI/Kimi-K3-NVFP4", resolved_bytes=1_400_000_000_000)
    assert resolved.method == "resolved" and resolved.bytes == 1_400_000_000_000
    params = meta("moonshotai/Kimi-K3")["parameters_total"]
    derived = variant_weight_bytes("RedHatAI/Kimi-K3-NVFP4", parameter_count=params, scheme="nvfp4")
    assert derived.method == "derived"
    assert derived.bytes == round(params * (0.5 + 1 / 16))
    assert "nvfp4" in derived.source and f"{params:,}" in derived.source
    with pytest.raises(SizingError, match="did not resolve"):
        variant_weight_bytes("org/other")
    with pytest.raises(SizingError, match="unknown quantization scheme 'q3'"):
        variant_weight_bytes("org/other", parameter_count=10, scheme="q3")


def test_expert_split_of_kimi_k3_matches_its_dtypes():
    model = read_text_model(config("moonshotai/Kimi-K3"))
    m = meta("moonshotai/Kimi-K3")
    split = split_weights(model, m["total_size_bytes"])
    # The routed experts are exactly the U8 (MXFP4) logical parameters of the checkpoint...
    assert model.experts.parameters == m["parameters"]["U8"]
    # ...so what is left is the BF16 and F32 tensors, to within 1%.
    rest = 2 * m["parameters"]["BF16"] + 4 * m["parameters"]["F32"]
    assert abs(split.dense.value - rest) / rest < 0.01
    assert split.dense.value + split.experts.value == m["total_size_bytes"]


def test_dense_model_has_no_expert_bytes():
    split = split_weights(read_text_model(config("meta-llama/Llama-3.1-8B")), 16_060_522_496)
    assert split.experts.value == 0 and split.dense.value == 16_060_522_496


@pytest.mark.parametrize("repo", ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-8B",
                                  "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct",
                                  "moonshotai/Kimi-K3"])
def test_estimate_from_config_close_to_checkpoint(repo):
    estimate = estimate_weight_bytes(read_text_model(config(repo)))
    assert estimate.method == "estimated_from_config"
    # DeepSeek-V3's checkpoint also carries its multi-token-prediction layer (~2% of bytes).
    assert abs(estimate.bytes - weight_bytes(repo)) / weight_bytes(repo) < 0.03


def test_gpt_oss_estimate_matches_its_published_size():
    # meta.json: about 65 GB on disk for gpt-oss-120b, about 13.8 GB for gpt-oss-20b
    assert abs(estimate_weight_bytes(read_text_model(config("openai/gpt-oss-120b"))).bytes / 65e9 - 1) < 0.03
    assert abs(estimate_weight_bytes(read_text_model(config("openai/gpt-oss-20b"))).bytes / 13.8e9 - 1) < 0.03
