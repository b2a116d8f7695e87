from __future__ import annotations

import pytest

from wingsmith.domain.recipes import dynamo_entries, max_num_seqs_default

from .conftest import FIXTURES


def _entry(catalog, path_part):
    return next(e for e in catalog.dynamo if path_part in e.source_path)


@pytest.mark.parametrize("path, backend, mode, card, source, gpus, nodes, replicas, tp, setting, cap", [
    ("kimi-k3/vllm/agg-gb200", "vllm", "aggregated", "gb200", "node selector", 4, 4, 1, 16, "--max-num-seqs", 256),
    ("gpt-oss-120b/vllm/agg-h200", "vllm", "aggregated", "h200", "node selector", 1, 1, 8, 1, "--max-num-seqs", 256),
    ("kimi-k2.6/vllm/agg-h200", "vllm", "aggregated", "h200", "node selector", 8, 1, 1, 8, "--max-num-seqs", None),
    ("deepseek-v4-flash/vllm/agg-h200", "vllm", "aggregated", "h200", "node selector", 4, 1, 1, 1,
     "--max-num-seqs", 64),
    ("deepseek-r1/sglang/disagg-8gpu", "sglang", "disaggregated", None, None, 8, 1, 1, 8,
     "--max-running-requests", None),
    ("kimi-k2.5/trtllm/agg-round-robin", "trtllm", "aggregated", None, None, 4, 2, 3, 8, "max_batch_size", 128),
    ("llama-3-70b/vllm/disagg-single-node", "vllm", "disaggregated", None, None, 4, 1, 1, 4, "--max-num-seqs", None),
    ("qwen3-32b/vllm/agg-round-robin", "vllm", "aggregated", None, None, 2, 1, 8, 2, "--max-num-seqs", None),
])
def test_dynamo_entries_read_from_deploy_files(catalog, path, backend, mode, card, source, gpus, nodes, replicas,
                                               tp, setting, cap):
    e = _entry(catalog, path)
    assert (e.backend, e.mode, e.card, e.card_source) == (backend, mode, card, source)
    assert (e.gpus_per_worker, e.nodes, e.replicas, e.tensor_parallel_size) == (gpus, nodes, replicas, tp)
    assert (e.max_concurrency.setting, e.max_concurrency.value) == (setting, cap)


def test_disaggregated_entry_lists_prefill_and_decode(catalog):
    e = _entry(catalog, "llama-3-70b/vllm/disagg-single-node")
    roles = {w.role: w for w in e.workers}
    assert set(roles) == {"prefill", "decode"}
    assert (roles["prefill"].gpus, roles["prefill"].replicas, roles["prefill"].tensor_parallel_size) == (2, 2, 2)
    assert e.model_ids == ["RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"]


def test_card_from_directory_name_when_no_selector(tmp_path):
    from wingsmith.domain.recipes.dynamo_import import parse_deploy
    # A deploy file without a node selector (the project's fixture in upstream's format).
    src = (FIXTURES / "dynamo/recipes/fixture-moe/vllm/agg-folded/deploy.yaml").read_text()
    assert "nodeSelector" not in src
    target = tmp_path / "recipes/fixture-moe/vllm/agg-b200-test/deploy.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(src)
    [entry] = parse_deploy(target.read_text(), target.relative_to(tmp_path).as_posix())
    assert (entry.card, entry.card_source, entry.card_label) == ("b200", "directory name", None)


KIMI_K3 = {"recipes/kimi-k3/vllm/agg-gb200-agentic/deploy.yaml", "recipes/kimi-k3/vllm/agg-gb300-agentic/deploy.yaml",
           "recipes/kimi-k3/vllm/disagg-gb200-agentic/deploy.yaml",
           "recipes/kimi-k3/vllm/disagg-gb300-agentic/deploy.yaml"}


@pytest.mark.parametrize("model, expected", [
    ("moonshotai/Kimi-K3", KIMI_K3),
    ("RedHatAI/Kimi-K3-NVFP4", KIMI_K3),
    ("moonshotai/kimi-k2.6", {f"recipes/kimi-k2.6/vllm/agg-{card}-{use}/deploy.yaml"
                              for card in ("h200", "b200") for use in ("chat", "agentic")}),
    ("nvidia/Kimi-K2.5-NVFP4", {"recipes/kimi-k2.5/trtllm/agg-round-robin/deploy.yaml"}),
    ("meta-llama/Llama-3.1-8B-Instruct", set()),
])
def test_dynamo_entries_per_model(catalog, model, expected):
    assert {e.source_path for e in dynamo_entries(model, catalog)} == expected


@pytest.mark.parametrize("model, card, value", [
    ("moonshotai/Kimi-K3", "GB200", 256),
    ("moonshotai/Kimi-K3", "NVIDIA-GB200", 256),
    ("openai/gpt-oss-120b", "H200", 256),
    ("openai/gpt-oss-120b", "h200", 256),
    ("deepseek-ai/DeepSeek-V4-Flash", "h200", 64),
    ("moonshotai/Kimi-K2.6", "H200", None),  # its aggregated recipe sets none
    ("moonshotai/Kimi-K3", "B300", None),  # no aggregated recipe for that card
    ("openai/gpt-oss-120b", "B200", 256),  # agg-b200-agentic sets --max-num-seqs=256
    ("openai/gpt-oss-120b", "B300", None),  # no recipe for that card
    ("Qwen/Qwen3-32B", "h200", None),  # recipe states no card
])
def test_max_num_seqs_default(catalog, model, card, value):
    result = max_num_seqs_default(model, card, catalog)
    assert result.value == value
    assert result.engine_default == (value is None)
    if value is None:
        assert "engine default" in result.reason
    else:
        assert str(value) in result.reason
        assert result.source_commit == "2a6da14c83617f5412caba5777dbf0e2399e9c5f"
        assert result.source_path.endswith("deploy.yaml")


def test_max_num_seqs_choice_is_deterministic_when_several_match(catalog):
    base = _entry(catalog, "kimi-k3/vllm/agg-gb200")
    sibling = base.model_copy(update={"source_path": "recipes/kimi-k3/vllm/agg-gb200-chat/deploy.yaml",
                                      "model_ids": ["RedHatAI/Kimi-K3-NVFP4"],
                                      "max_concurrency": base.max_concurrency.model_copy(update={"value": 64})})
    silent = base.model_copy(update={"source_path": "recipes/kimi-k3/vllm/agg-gb200-a/deploy.yaml",
                                     "max_concurrency": base.max_concurrency.model_copy(update={"value": None})})
    for order in ([base, sibling, silent], [silent, sibling, base]):
        variant = catalog.model_copy(update={"dynamo": order})
        result = max_num_seqs_default("moonshotai/Kimi-K3", "gb200", variant)
        assert result.value == 256 and result.source_path == base.source_path
        assert "chosen over 2" in result.reason
        assert {a["value"] for a in result.alternatives} == {64, None}
        nvfp4 = max_num_seqs_default("RedHatAI/Kimi-K3-NVFP4", "gb200", variant)
        assert nvfp4.value == 64  # the recipe for the exact checkpoint wins


def test_unknown_card_is_a_clear_error(catalog):
    with pytest.raises(ValueError, match="unknown card 'Z9000'"):
        max_num_seqs_default("moonshotai/Kimi-K3", "Z9000", catalog)
