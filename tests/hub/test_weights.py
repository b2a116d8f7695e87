"""Weight figures and config facts, with tables of the real configs and published totals (as the shipped
Hub snapshot carries them)."""

import pytest

from tests.hub.conftest import shipped_models
from wingsmith.domain.hub import config_facts, weights
from wingsmith.domain.hub.proposal import HubFacts, HubFile, build_proposal

UP = shipped_models()
PUBLISHED = {k: v for k, v in UP.items() if v["meta"].get("total_size_bytes")}


@pytest.mark.parametrize("repo_id", sorted(PUBLISHED))
def test_config_estimate_is_within_five_percent_of_published_totals(repo_id):
    up = PUBLISHED[repo_id]
    figure = weights.estimate_from_config(up["config"])
    assert figure.source == "config_estimate"
    assert figure.bytes == pytest.approx(up["meta"]["total_size_bytes"], rel=0.05)


@pytest.mark.parametrize("repo_id", [k for k, v in UP.items() if v["meta"].get("parameters_total")])
def test_estimated_parameters_match_the_hub_counts(repo_id):
    up = UP[repo_id]
    assert weights.estimated_parameters(up["config"]) == pytest.approx(up["meta"]["parameters_total"], rel=0.02)


QUANT = [
    ("moonshotai/Kimi-K3", "compressed-tensors", "mxfp4-pack-quantized", 4, 32, None, "re:.*self_attn.*"),
    ("openai/gpt-oss-120b", "mxfp4", "mxfp4", 4, 32, None, "model.layers.*.self_attn"),
    ("deepseek-ai/DeepSeek-V3", "fp8", "e4m3", 8, None, [128, 128], None),
    ("moonshotai/Kimi-K2-Instruct", "fp8", "e4m3", 8, None, [128, 128], None),
]


@pytest.mark.parametrize("repo_id,method,fmt,bits,group,block,kept", QUANT)
def test_quantization(repo_id, method, fmt, bits, group, block, kept):
    q = config_facts.quantization(UP[repo_id]["config"])
    assert (q.method, q.format, q.bits, q.group_size, q.block_size) == (method, fmt, bits, group, block)
    assert (kept in q.high_precision) if kept else q.high_precision == []


@pytest.mark.parametrize("repo_id", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B"])
def test_unquantized_models_have_no_quantization(repo_id):
    assert config_facts.quantization(UP[repo_id]["config"]) is None


def _facts(repo_id, files, with_params=True):
    meta = UP[repo_id]["meta"]
    return HubFacts(repo_id=repo_id, sha="0" * 40, files=files,
                    parameters=meta.get("parameters") if with_params else None,
                    parameters_total=meta.get("parameters_total") if with_params else None)


def test_fallback_order_index_then_parameters_then_config():
    up = UP["Qwen/Qwen3-8B"]
    unsized = [HubFile(path="config.json"), HubFile(path="model-00001-of-00002.safetensors"),
               HubFile(path="model-00002-of-00002.safetensors")]
    with_index = build_proposal(_facts("Qwen/Qwen3-8B", unsized), up["config"], revision="main",
                                index_total_size=16_381_470_720)
    assert (with_index.weight_bytes, with_index.weight_bytes_source) == (16_381_470_720, "index_total_size")
    assert [f.source for f in with_index.weight_bytes_fallbacks] == [
        "safetensors_files", "parameter_counts", "config_estimate"]
    # Unpacked BF16: parameter counts × 2 bytes is exact (meta.json derives the total the same way).
    no_index = build_proposal(_facts("Qwen/Qwen3-8B", unsized), up["config"], revision="main")
    assert (no_index.weight_bytes, no_index.weight_bytes_source) == (
        up["meta"]["total_size_bytes"], "parameter_counts")
    bare = build_proposal(_facts("Qwen/Qwen3-8B", unsized, with_params=False), up["config"], revision="main")
    assert bare.weight_bytes_source == "config_estimate"
    assert bare.parameters.source == "config_estimate"


def test_packed_parameter_counts_are_never_used_for_bytes():
    up = UP["moonshotai/Kimi-K3"]
    p = build_proposal(_facts("moonshotai/Kimi-K3", [HubFile(path="model.safetensors")]), up["config"],
                       revision="main")
    # Hub counts × dtype size would give 2.84e12 for a 1.56e12-byte checkpoint.
    assert p.weight_bytes_source == "config_estimate"
    assert p.weight_bytes == pytest.approx(up["meta"]["total_size_bytes"], rel=0.05)
    counts = next(f for f in p.weight_bytes_fallbacks if f.source == "parameter_counts")
    assert counts.bytes is None and "packed" in counts.note


def test_duplicates_are_ignored():
    files = [HubFile(path="model-00001-of-00001.safetensors", size=10),
             HubFile(path="original/model.safetensors", size=10),
             HubFile(path="consolidated.safetensors", size=10), HubFile(path="model-Q4.gguf", size=5)]
    p = build_proposal(_facts("Qwen/Qwen3-8B", files), UP["Qwen/Qwen3-8B"]["config"], revision="main")
    assert p.weight_bytes == 10
    assert set(p.files.ignored_weight_files) == {"original/model.safetensors", "consolidated.safetensors"}
    assert p.files.gguf_files == 1
