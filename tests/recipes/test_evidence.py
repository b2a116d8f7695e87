from __future__ import annotations

import pytest

from wingsmith.domain.recipes import evidence_for

KIMI_K3_LAYOUTS = ["single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_tp_pp", "multi_node_dep",
                   "pd_cluster"]


@pytest.mark.parametrize("hf_id, recipe, variant, matched_by", [
    ("moonshotai/Kimi-K3", "moonshotai/Kimi-K3", "default", "recipe path"),
    ("MOONSHOTAI/kimi-k3", "moonshotai/Kimi-K3", "default", "recipe path"),
    ("redhatai/kimi-k3-nvfp4", "moonshotai/Kimi-K3", "nvfp4", "variant model_id"),
    ("nvidia/DeepSeek-R1-0528-NVFP4-v2", "deepseek-ai/DeepSeek-R1", "nvfp4", "variant model_id"),
    ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B", "awq", "variant model_id"),
    ("deepseek-ai/DeepSeek-V4-Flash-0731", "deepseek-ai/DeepSeek-V4-Flash", "default", "variant model_id"),
    ("amd/Kimi-K2.5-MXFP4", "moonshotai/Kimi-K2.5", "mxfp4", "variant model_id"),
])
def test_hf_id_finds_its_recipe_and_variant(catalog, hf_id, recipe, variant, matched_by):
    match = catalog.find(hf_id)
    assert match is not None
    assert (match.recipe.path, match.variant, match.matched_by) == (recipe, variant, matched_by)


@pytest.mark.parametrize("hf_id", ["moonshotai/Kimi-K4", "moonshotai", "Kimi-K3", ""])
def test_unknown_ids_find_nothing(catalog, hf_id):
    assert catalog.find(hf_id) is None


def test_kimi_k3_evidence_matches_its_recipe(catalog):
    ev = evidence_for(catalog.find("moonshotai/Kimi-K3"), catalog)
    variants = {v.name: v for v in ev.variants}
    assert ev.default_variant == "default"
    assert (variants["default"].precision, variants["default"].vram_minimum_gb, variants["default"].is_estimate) \
        == ("mxfp4", 1680, True)
    assert variants["default"].checkpoint == "moonshotai/Kimi-K3"
    assert (variants["nvfp4"].precision, variants["nvfp4"].vram_minimum_gb, variants["nvfp4"].is_estimate) \
        == ("nvfp4", 1650, False)
    assert variants["nvfp4"].checkpoint == "RedHatAI/Kimi-K3-NVFP4"

    layouts = {layout.name: layout for layout in ev.layouts}
    assert ev.default_layout == "single_node_tp" and layouts["single_node_tp"].default
    assert [n for n in layouts if layouts[n].compatible] == KIMI_K3_LAYOUTS
    assert sorted(layouts["multi_node_tp_dp"].allowed) == ["gb200", "gb300", "h200"]
    assert set(layouts["multi_node_tp_dp"].denied) == {"b200", "b300", "h100", "mi355x"}
    assert "h200" in layouts["multi_node_dep"].denied  # per-hardware opt-out
    assert layouts["multi_node_tp_pp"].minimum_gpus["b200"] == 16
    assert layouts["single_node_tp"].minimum_gpus["b300"] == 8
    assert layouts["multi_node_tp"].minimum_gpus["h100"] == 32  # a hardware floor lifts every layout
    assert "h100" in layouts["single_node_tp"].denied and "gb200" in layouts["single_node_tp"].denied

    features = {f.name: f for f in ev.features}
    assert features["tool_calling"].default == "on" and features["reasoning"].default == "on"
    for name in ("spec_decoding", "text_only", "decode_context_parallelism"):
        assert features[name].default == "opt_in"
    assert "multi_node_tp_pp" not in features["spec_decoding"].strategies
    assert "single_node_tp" in features["spec_decoding"].strategies
    assert features["decode_context_parallelism"].strategies == ["single_node_tp"]
    assert features["tool_calling"].args == ["--enable-auto-tool-choice", "--tool-call-parser", "kimi_k3"]
    assert "--max-num-seqs" in features["spec_decoding"].hardware_overrides["amd"]
    assert ev.links.recipe == ("https://github.com/vllm-project/recipes/blob/"
                               "8959cf64189c71d36e11c6a30335f923f261b1f7/models/moonshotai/Kimi-K3.yaml")
    assert ev.links.strategies["pd_cluster"].endswith("/strategies/pd_cluster.yaml")
    assert ev.catalog_version == catalog.version


def test_hardware_tri_state_with_node_facts_and_placeability(catalog):
    ev = evidence_for(catalog.find("deepseek-ai/DeepSeek-V4-Pro"), catalog)
    hw = {h.id: h for h in ev.hardware}
    assert hw["b300"].status == "verified" and hw["b300"].placeable
    assert hw["mi300x"].status == "unsupported" and not hw["mi300x"].placeable
    assert hw["mi355x"].status == "verified" and not hw["mi355x"].placeable  # AMD: shown, never placed
    assert hw["h100"].status == "not_stated" and hw["h100"].placeable
    assert (hw["gb200"].gpus_per_node, hw["gb200"].memory_gb_per_node, hw["gb200"].memory_gb_per_gpu) == (4, 768, 192)
    assert (hw["h200"].gpus_per_node, hw["h200"].memory_gb_per_node) == (8, 1128)
    # Unsupported hardware gets no layouts.
    assert all("mi300x" not in layout.allowed for layout in ev.layouts)


def test_text_only_and_encoder_parallel_exclude_each_other(catalog):
    ev = evidence_for(catalog.find("moonshotai/Kimi-K2.5"), catalog)
    features = {f.name: f for f in ev.features}
    assert ev.exclusions == [("text_only", "encoder_parallel")]
    assert features["text_only"].excludes == ["encoder_parallel"]
    assert features["encoder_parallel"].excludes == ["text_only"]
    assert features["encoder_parallel"].default == "on" and features["encoder_parallel"].opt_in_on == ["gb200"]
    assert features["tool_calling"].excludes == []


def test_feature_modes_and_variant_default_modes(catalog):
    ev = evidence_for(catalog.find("deepseek-ai/DeepSeek-V4-Flash"), catalog)
    spec = {f.name: f for f in ev.features}["spec_decoding"]
    assert spec.default_mode == "mtp" and set(spec.modes) == {"mtp", "dspark"}
    assert spec.modes["mtp"].variants == ["fp8", "nvfp4"]
    assert spec.modes["mtp"].unsupported_on == ["rtx_pro_6000_8x"]
    labels = {v.name: v.label for v in ev.variants}
    assert labels["default"] == "FP8 (0731)"


def test_every_recipe_has_evidence(catalog):
    for recipe in catalog.recipes.values():
        ev = evidence_for(recipe, catalog)
        assert ev.variants
        if recipe.omni and not recipe.compatible_strategies:
            # vLLM-Omni recipes (TTS, diffusion) serve through vllm-omni: no parallel layouts to offer.
            assert ev.layouts == [] and ev.default_layout is None
        else:
            assert ev.layouts
            assert ev.default_layout in {layout.name for layout in ev.layouts}
        assert ev.links.recipe.endswith(recipe.source_path)
