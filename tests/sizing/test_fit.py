from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from wingsmith.domain.hardware import NVIDIA_HARDWARE, get_hardware
from wingsmith.domain.sizing import (
    LAYOUTS,
    InvalidLayout,
    SizingError,
    estimate_weight_bytes,
    fit_check,
    read_text_model,
)
from wingsmith.domain.sizing.fit import fit_check_for
from wingsmith.domain.sizing.layouts import candidate_gpu_counts, plan

from .conftest import config, shipped_repos, weight_bytes

LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def test_llama_70b_bf16_does_not_fit_one_h100():
    report = fit_check(config(LLAMA_70B), weight_bytes(LLAMA_70B), "h100", "single_node_tp", 1, 8192, 16)
    assert not report.fits
    assert report.verdict == "weights_do_not_fit"
    assert report.per_gpu.weights.value == weight_bytes(LLAMA_70B)
    assert report.per_gpu.budget.value == 72_000_000_000
    assert report.headroom_bytes < 0
    assert report.largest_context == 0 and report.largest_concurrency == 0


def test_llama_70b_bf16_fits_two_h200_at_8k_with_largest_context():
    cfg, wb = config(LLAMA_70B), weight_bytes(LLAMA_70B)
    report = fit_check(cfg, wb, "h200", "single_node_tp", 2, 8192, 16)
    assert report.fits and report.verdict == "fits"
    u = report.per_gpu
    assert u.weights.value == wb // 2
    assert u.kv_cache.value == 16 * 8192 * 327_680 // 2  # KV heads split over the two ranks
    assert u.runtime_overhead.inputs["nccl"] > 0  # TP 2 talks over NCCL
    assert report.headroom_bytes == u.budget.value - u.total.value > 0
    # the largest context is exactly the edge: it fits, one token more does not
    largest = report.largest_context
    assert largest > 8192
    assert fit_check(cfg, wb, "h200", "single_node_tp", 2, largest, 16).fits
    assert not fit_check(cfg, wb, "h200", "single_node_tp", 2, largest + 1, 16).fits
    most = report.largest_concurrency
    assert fit_check(cfg, wb, "h200", "single_node_tp", 2, 8192, most).fits
    assert not fit_check(cfg, wb, "h200", "single_node_tp", 2, 8192, most + 1).fits
    smallest = {s.hardware: s.gpus for s in report.smallest_gpus}
    assert smallest["h200"] == 2 and smallest["h100"] == 4
    assert set(smallest) == {h.id for h in NVIDIA_HARDWARE}


def test_kv_that_does_not_fit_is_named():
    report = fit_check(config(LLAMA_70B), weight_bytes(LLAMA_70B), "h200", "single_node_tp", 2, 131072, 64)
    assert report.verdict == "kv_cache_does_not_fit"


def test_largest_context_capped_by_model_max():
    report = fit_check(config("meta-llama/Llama-3.1-8B"), weight_bytes("meta-llama/Llama-3.1-8B"),
                       "b300", "single_node_tp", 8, 8192, 1)
    assert report.largest_context == 131072 and report.largest_context_capped_by_model


def test_dep_replicates_attention_and_splits_experts_and_sequences():
    repo = "deepseek-ai/DeepSeek-V3"
    report = fit_check(config(repo), weight_bytes(repo), "h200", "multi_node_dep", 16, 8192, 64)
    p, w = report.plan, report.per_gpu.weights
    assert (p.tp, p.dp, p.dense_split, p.expert_split) == (1, 16, 1, 16)
    assert w.value == w.inputs["dense_bytes"] + w.inputs["expert_bytes"] // 16
    assert report.per_gpu.kv_cache.inputs["sequences"] == 4
    assert report.per_gpu.kv_cache.value == 4 * 8192 * 70_272


def test_tp_pp_splits_layers_and_tp_dp_splits_sequences():
    repo = "moonshotai/Kimi-K2-Instruct"
    pp = fit_check(config(repo), weight_bytes(repo), "h200", "multi_node_tp_pp", 16, 8192, 32)
    assert (pp.plan.tp, pp.plan.pp) == (8, 2)
    assert pp.per_gpu.kv_cache.value == 32 * 8192 * 70_272 // 2
    dp = fit_check(config(repo), weight_bytes(repo), "b300", "multi_node_tp_dp", 16, 8192, 32)
    assert (dp.plan.tp, dp.plan.dp) == (8, 2)
    assert dp.per_gpu.kv_cache.value == 16 * 8192 * 70_272


def test_pd_cluster_sizes_the_decode_pool():
    repo = "Qwen/Qwen3-235B-A22B"
    report = fit_check(config(repo), weight_bytes(repo), "h200", "pd_cluster", 16, 8192, 16)
    assert report.plan.tp == 8 and report.plan.sized_pool == "decode"
    assert any("decode pool" in n for n in report.notes)


@pytest.mark.parametrize(("layout", "gpus", "message"), [
    ("multi_node_tep", 16, "needs a mixture-of-experts model"),
    ("multi_node_dep", 16, "needs a mixture-of-experts model"),
    ("multi_node_tp", 12, "whole H200 nodes"),
    ("multi_node_tp", 8, "two or more whole"),
    ("single_node_tp", 3, "does not divide the 64 attention heads"),
    ("single_node_tp", 9, "exceed the 8 of one H200 node"),
    ("pd_cluster", 3, "even GPU count"),
])
def test_impossible_shapes_say_why(layout, gpus, message):
    with pytest.raises(InvalidLayout, match=message):
        fit_check(config(LLAMA_70B), weight_bytes(LLAMA_70B), "h200", layout, gpus, 8192, 16)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"layout": "ring"}, "unknown layout 'ring'"),
    ({"hardware": "tpu9"}, "unknown hardware 'tpu9'"),
    ({"context": 0}, "context must be at least 1"),
    ({"context": 200_000}, "exceeds the model's max_position_embeddings 131072"),
    ({"concurrency": 0}, "concurrency must be at least 1"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
])
def test_bad_requests_say_what_is_wrong(kwargs, message):
    args = dict(hardware="h200", layout="single_node_tp", gpus=2, context=8192, concurrency=16) | kwargs
    with pytest.raises(ValueError, match=message):
        fit_check(config(LLAMA_70B), weight_bytes(LLAMA_70B), **args)


def test_amd_is_sized_but_noted_unplaceable():
    report = fit_check(config(LLAMA_70B), weight_bytes(LLAMA_70B), "mi300x", "single_node_tp", 1, 8192, 1)
    assert report.fits and any("cannot be placed" in n for n in report.notes)
    assert all(get_hardware(s.hardware).placeable for s in report.smallest_gpus)


# --- the verdict is monotone ------------------------------------------------------------------

MODELS = {repo: read_text_model(config(repo)) for repo in shipped_repos()}


def _bytes(repo: str) -> int:
    try:
        return weight_bytes(repo)
    except AssertionError:
        return estimate_weight_bytes(MODELS[repo]).bytes


WEIGHTS = {repo: _bytes(repo) for repo in MODELS}


def _valid_counts(repo: str, layout: str, hw) -> list[int]:
    counts = []
    for n in candidate_gpu_counts(layout, hw, max_nodes=8):
        try:
            plan(MODELS[repo], layout, n, hw)
        except InvalidLayout:
            continue
        counts.append(n)
    return counts


@st.composite
def shapes(draw):
    repo = draw(st.sampled_from(sorted(MODELS)))
    layout = draw(st.sampled_from(LAYOUTS))
    hw = draw(st.sampled_from(NVIDIA_HARDWARE))
    counts = _valid_counts(repo, layout, hw)
    if not counts:
        from hypothesis import reject
        reject()
    g1, g2 = sorted(draw(st.lists(st.sampled_from(counts), min_size=2, max_size=2)))
    max_ctx = MODELS[repo].max_position_embeddings
    # Mostly modest demand, so that a good share of the shapes fit and the property has teeth.
    context = st.one_of(st.integers(1, 32_768), st.integers(1, max_ctx))
    c1, c2 = sorted(draw(st.lists(context, min_size=2, max_size=2)), reverse=True)
    k1, k2 = sorted(draw(st.lists(st.integers(1, 128), min_size=2, max_size=2)), reverse=True)
    kv = draw(st.sampled_from(["auto", "fp8"]))
    return repo, layout, hw.id, (g1, c1, k1), (g2, c2, k2), kv


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(shapes())
def test_fit_never_flips_to_no_fit_with_more_gpus_or_less_demand(shape):
    repo, layout, hw, (g1, c1, k1), (g2, c2, k2), kv = shape

    def fits(g, c, k):
        return fit_check_for(MODELS[repo], WEIGHTS[repo], hw, layout, g, c, k, kv_dtype=kv,
                             search_smallest=False).fits

    fitted = fits(g1, c1, k1)
    event(f"first shape fits: {fitted}")
    if fitted:
        assert fits(g2, c1, k1), "adding GPUs broke a fit"
        assert fits(g1, c2, k2), "less context or concurrency broke a fit"
        assert fits(g2, c2, k2)


def test_sizing_rejects_non_positive_weights():
    with pytest.raises(SizingError, match="weight bytes must be positive"):
        fit_check(config(LLAMA_70B), 0, "h200", "single_node_tp", 2, 8192, 16)
