from __future__ import annotations

from collections import Counter

import pytest

from wingsmith.domain.recipes import InvalidChoice, evidence_for, serve_command
from wingsmith.domain.recipes.command import dedupe_args
from wingsmith.domain.recipes.rules import pinned_tp, precision_problem

BLACKWELL_K3 = ["--load-format", "fastsafetensors", "--no-enable-flashinfer-autotune", "--max-model-len", "1048576",
                "--kv-cache-dtype", "fp8", "--enable-prefix-caching"]


def flags(args: list[str]) -> Counter:
    return Counter(a.split("=", 1)[0] for a in args if a.startswith("--"))


def value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.fixture(scope="module")
def k3(catalog):
    return catalog.find("moonshotai/Kimi-K3")


def test_kimi_k3_default_on_b300_single_node_tp(catalog, k3):
    cmd = serve_command(k3, "default", "b300", "single_node_tp", [], catalog=catalog)
    assert cmd.argv[:3] == ["vllm", "serve", "moonshotai/Kimi-K3"]
    assert value(cmd.args, "--tensor-parallel-size") == "8"
    assert value(cmd.args, "--tool-call-parser") == "kimi_k3"
    assert value(cmd.args, "--reasoning-parser") == "kimi_k3"
    assert "--enable-auto-tool-choice" in cmd.args
    for i, token in enumerate(BLACKWELL_K3):
        assert token in cmd.args
        if not token.startswith("--"):
            assert cmd.args[cmd.args.index(BLACKWELL_K3[i - 1]) + 1] == token
    assert value(cmd.args, "--attention-config") == \
        '{"use_prefill_query_quantization":true,"mla_prefill_backend":"flashinfer"}'
    assert all(n == 1 for n in flags(cmd.args).values()), flags(cmd.args)
    assert "--speculative-config" not in cmd.args  # opt-in, not asked for
    assert cmd.env["VLLM_ALLREDUCE_USE_FLASHINFER"] == "1" and cmd.env["VLLM_ENGINE_READY_TIMEOUT_S"] == "3600"
    assert (cmd.gpus, cmd.nodes, cmd.tensor_parallel_size) == (8, 1, 8)
    assert len(cmd.commands) == 1 and cmd.commands[0].argv == cmd.argv
    assert set(cmd.features) == {"tool_calling", "reasoning"}


def test_variant_checkpoint_is_served(catalog, k3):
    cmd = serve_command(k3, "nvfp4", "b200", "single_node_tp", [], catalog=catalog)
    assert cmd.model == "RedHatAI/Kimi-K3-NVFP4"


def test_hopper_block_overrides_base_by_last_wins(catalog, k3):
    cmd = serve_command(k3, "default", "h200", "single_node_tp", [], catalog=catalog)
    assert value(cmd.args, "--gpu-memory-utilization") == "0.97"  # hopper beats the 0.95 base
    assert value(cmd.args, "--max-num-seqs") == "5"
    assert flags(cmd.args)["--gpu-memory-utilization"] == 1
    assert cmd.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_spec_decoding_refused_on_multi_node_tp_pp(catalog, k3):
    with pytest.raises(InvalidChoice, match="spec_decoding.*multi_node_tp_pp"):
        serve_command(k3, "default", "b200", "multi_node_tp_pp", ["spec_decoding"], catalog=catalog)
    ok = serve_command(k3, "default", "b200", "multi_node_tp", ["spec_decoding"], catalog=catalog)
    assert "--speculative-config" in ok.args


@pytest.mark.parametrize("hardware, layout, features, gpus, reason", [
    ("b200", "multi_node_tp_dp", [], None, "only on gb200, gb300, h200"),
    ("h200", "multi_node_dep", [], None, "unsupported on h200"),
    ("b200", "multi_node_tp_pp", [], 8, "at least 16 GPUs"),
    ("gb200", "single_node_tp", [], None, "at least 8 GPUs and a gb200 node has 4"),
    ("h100", "multi_node_tp", [], 16, "at least 32 GPUs"),
    ("b200", "multi_node_tp", ["decode_context_parallelism"], None, "decode_context_parallelism"),
    ("b200", "single_node_tp", ["warp_drive"], None, "no feature 'warp_drive'"),
    ("b200", "single_node_tp", [], 16, "at most 8 GPUs"),
    ("b200", "multi_node_tp", [], 12, "not a multiple of 8"),
    ("tpu9", "single_node_tp", [], None, "unknown hardware"),
    ("b200", "single_node_dep", [], None, "not a compatible layout"),
])
def test_invalid_choices_are_refused_with_the_reason(catalog, k3, hardware, layout, features, gpus, reason):
    with pytest.raises(InvalidChoice, match=reason):
        serve_command(k3, "default", hardware, layout, features, gpus=gpus, catalog=catalog)


def test_unsupported_hardware_and_variant_restrictions(catalog):
    with pytest.raises(InvalidChoice, match="unsupported on mi300x"):
        serve_command(catalog.find("deepseek-ai/DeepSeek-V4-Pro"), "default", "mi300x", "single_node_tp", [],
                      catalog=catalog)
    with pytest.raises(InvalidChoice, match="runs only on mi355x"):
        serve_command(catalog.find("moonshotai/Kimi-K2.5"), "mxfp4", "h200", "single_node_tp", [], catalog=catalog)


def test_multi_node_tp_pp_gives_one_command_per_node(catalog, k3):
    cmd = serve_command(k3, "default", "b200", "multi_node_tp_pp", [], catalog=catalog)
    assert (cmd.gpus, cmd.nodes, cmd.tensor_parallel_size, cmd.pipeline_parallel_size) == (16, 2, 8, 2)
    assert [c.node_rank for c in cmd.commands] == [0, 1]
    head, worker = cmd.commands
    assert value(head.args, "--pipeline-parallel-size") == "2" and value(head.args, "--nnodes") == "2"
    assert "--headless" not in head.args and "--headless" in worker.args
    assert value(worker.args, "--node-rank") == "1"
    # The layout's own 0.90 survives: the Blackwell block sets no memory utilisation.
    assert value(head.args, "--gpu-memory-utilization") == "0.90"
    assert head.env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "1800" and head.env["GLOO_SOCKET_IFNAME"] == "$IFACE_NAME"
    assert "--load-format" in head.args  # the Blackwell baseline still layers on top
    # On Hopper the same layout keeps its own memory utilisation by last-wins.
    hopper = serve_command(k3, "default", "h200", "multi_node_tp_pp", [], catalog=catalog)
    assert value(hopper.args, "--gpu-memory-utilization") == "0.97"


def test_multi_node_dep_and_tp_dp_sizes(catalog, k3):
    dep = serve_command(k3, "default", "gb200", "multi_node_dep", [], catalog=catalog)
    assert (dep.gpus, dep.nodes, dep.data_parallel_size, dep.tensor_parallel_size) == (16, 4, 16, 1)
    assert value(dep.args, "--data-parallel-size-local") == "4"
    assert value(dep.args, "--moe-backend") == "deep_gemm_mega_moe"  # strategy block for the card
    assert "--load-format" in dep.args  # the recipe's Blackwell block is kept (different key)
    assert [value(c.args, "--data-parallel-start-rank") for c in dep.commands] == ["0", "4", "8", "12"]
    tp_dp = serve_command(k3, "default", "h200", "multi_node_tp_dp", [], catalog=catalog)
    assert (tp_dp.nodes, tp_dp.tensor_parallel_size, tp_dp.data_parallel_size) == (2, 8, 2)
    assert value(tp_dp.args, "--data-parallel-size-local") == "1"
    assert [value(c.args, "--data-parallel-start-rank") for c in tp_dp.commands] == ["0", "1"]


def test_pd_cluster_replaces_the_blackwell_block_and_splits_roles(catalog, k3):
    cmd = serve_command(k3, "default", "b200", "pd_cluster", [], catalog=catalog)
    roles = Counter(c.role for c in cmd.commands)
    assert roles == {"prefill": 1, "decode": 1}
    prefill = next(c for c in cmd.commands if c.role == "prefill")
    decode = next(c for c in cmd.commands if c.role == "decode")
    assert "kv_producer" in value(prefill.args, "--kv-transfer-config")
    assert "kv_consumer" in value(decode.args, "--kv-transfer-config")
    assert value(decode.args, "--max-num-seqs") == "8"
    assert "--enable-expert-parallel" in prefill.args and value(prefill.args, "--tensor-parallel-size") == "8"
    # Upstream: the pd_cluster Blackwell block replaces the recipe-level one.
    assert "--load-format" not in prefill.args and decode.env["UCX_TLS"] == "rc,cuda_copy"
    assert "VLLM_ALLREDUCE_USE_FLASHINFER" not in decode.env
    assert prefill.env["VLLM_KIMI_K3_SHARD_SP_SHARED_EXPERT"] == "1"
    assert prefill.env["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"


def test_feature_hardware_override_replaces_its_args(catalog, k3):
    amd = serve_command(k3, "default", "mi355x", "single_node_tp", ["spec_decoding"], catalog=catalog)
    assert value(amd.args, "--max-num-seqs") == "128" and flags(amd.args)["--speculative-config"] == 1
    assert amd.env["VLLM_ROCM_USE_AITER"] == "1"


def test_default_feature_can_be_turned_off(catalog, k3):
    cmd = serve_command(k3, "default", "b300", "single_node_tp", ["-reasoning"], catalog=catalog)
    assert "--reasoning-parser" not in cmd.args and "--tool-call-parser" in cmd.args


def test_excluded_pair(catalog):
    k25 = catalog.find("moonshotai/Kimi-K2.5")
    on = serve_command(k25, "default", "h200", "single_node_tp", [], catalog=catalog)
    assert value(on.args, "--mm-encoder-tp-mode") == "data"  # encoder_parallel on by default
    text = serve_command(k25, "default", "h200", "single_node_tp", ["text_only"], catalog=catalog)
    assert "--language-model-only" in text.args and "encoder_parallel" not in text.features
    assert any("encoder_parallel switched off" in n for n in text.notes)
    with pytest.raises(InvalidChoice, match="exclude each other"):
        serve_command(k25, "default", "h200", "single_node_tp", ["text_only", "encoder_parallel"], catalog=catalog)
    gb200 = serve_command(k25, "default", "gb200", "multi_node_tp", [], catalog=catalog)
    assert "encoder_parallel" not in gb200.features  # opt-in on gb200


def test_feature_modes(catalog):
    flash = catalog.find("deepseek-ai/DeepSeek-V4-Flash")
    cmd = serve_command(flash, "default", "b200", "single_node_tep", ["spec_decoding"], catalog=catalog)
    assert cmd.features["spec_decoding"] == "dspark"  # the variant's default mode
    assert '"method":"dspark"' in value(cmd.args, "--speculative-config")
    with pytest.raises(InvalidChoice, match="needs variant fp8 or nvfp4"):
        serve_command(flash, "default", "b200", "single_node_tep", ["spec_decoding:mtp"], catalog=catalog)
    hopper = serve_command(flash, "fp8", "h200", "single_node_tep", ["spec_decoding"], catalog=catalog)
    assert '"num_speculative_tokens":1' in value(hopper.args, "--speculative-config")


def test_pinned_tp_and_dense_models(catalog):
    cmd = serve_command(catalog.find("openai/gpt-oss-20b"), "default", "h100", "single_node_tp", [], catalog=catalog)
    assert value(cmd.args, "--tensor-parallel-size") == "1" and cmd.gpus == 1
    with pytest.raises(InvalidChoice):
        serve_command(catalog.find("Qwen/Qwen3-32B"), "default", "h200", "single_node_tep", [], catalog=catalog)


@pytest.mark.parametrize("args, expected", [
    (["--a", "1", "--b", "--a", "2"], ["--a", "2", "--b"]),
    (["--x=1", "--y", "v", "--x", "3"], ["--x", "3", "--y", "v"]),
    (["--enable-prefix-caching", "--no-enable-prefix-caching"], ["--no-enable-prefix-caching"]),
    (["--json", '{"a":1}', "--json", '{"b":2}'], ["--json", '{"b":2}']),
    (["--n", "-1", "--m"], ["--n", "-1", "--m"]),
])
def test_dedupe_is_last_wins(args, expected):
    assert dedupe_args(args) == expected


def test_every_offered_choice_synthesises(catalog):
    """Every (variant, hardware, layout) the evidence offers yields a command with each flag once.
    The evidence offers layouts and cards for the default variant; another variant that pins its own
    tensor-parallel size (ERNIE-4.5's 300b at TP 8, Qwen3.6-35B-A3B's nvfp4 at TP 1) may not fit a
    layout or card, and is then refused by name, never built wrong."""
    count, refused = 0, 0
    for recipe in catalog.recipes.values():
        ev = evidence_for(recipe, catalog)
        for layout in ev.layouts:
            for hw in layout.allowed:
                for variant in recipe.variants.values():
                    name = next(n for n, v in recipe.variants.items() if v is variant)
                    if variant.supported_hardware and hw not in variant.supported_hardware:
                        continue
                    if precision_problem(variant, catalog.hardware[hw]):  # FP4 off Blackwell
                        continue
                    try:
                        cmd = serve_command(recipe, name, hw, layout.name, [], catalog=catalog)
                    except InvalidChoice as exc:
                        assert name != recipe.default_variant, (recipe.path, name, hw, layout.name, exc)
                        assert pinned_tp(recipe, layout.name, catalog.hardware[hw], variant) is not None, exc
                        assert "pins" in str(exc) or "needs at least" in str(exc), exc
                        refused += 1
                        continue
                    for node in cmd.commands:
                        assert max(flags(node.args).values()) == 1, (recipe.path, name, hw, layout.name)
                    count += 1
    assert count > 500 and refused < count // 20
