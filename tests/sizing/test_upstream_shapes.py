"""Sizing knows every layout of upstream's strategies/, every precision name its recipes use (checked on
the shipped catalog, and on the full upstream tree in the upstream tier), and
counts the weights a checkpoint stores beside its decoder layers (MTP layers, vision towers)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.upstream import require_upstream
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.cli.main import build_parser
from wingsmith.domain.sizing import LAYOUTS, InvalidLayout, estimate_weight_bytes, fit_check, read_text_model
from wingsmith.domain.sizing.weights import BYTES_PER_PARAMETER, bytes_per_parameter, estimate_parameters, known_scheme

from .conftest import config, config_file, weight_bytes

DSV3 = "deepseek-ai/DeepSeek-V3"


def test_every_upstream_strategy_is_a_sizing_layout():
    folder = require_upstream("vllm-recipes", "strategies")
    names = {yaml.safe_load(p.read_text())["name"] for p in folder.glob("*.yaml")}
    assert {"single_node_tep", "single_node_dep"} <= names
    assert names <= set(LAYOUTS)


def test_every_strategy_in_the_shipped_catalog_is_a_sizing_layout():
    names = set(load_catalog().strategies)
    assert {"single_node_tep", "single_node_dep"} <= names
    assert names <= set(LAYOUTS)


def test_single_node_tep_places_like_tp_within_one_node():
    tep = fit_check(config(DSV3), weight_bytes(DSV3), "b200", "single_node_tep", 8, 8192, 16)
    tp = fit_check(config(DSV3), weight_bytes(DSV3), "b200", "single_node_tp", 8, 8192, 16)
    assert (tep.plan.tp, tep.plan.expert_split, tep.plan.nodes) == (8, 8, 1)
    assert tep.per_gpu.weights.value == tp.per_gpu.weights.value
    assert tep.verdict == "fits"


def test_single_node_dep_replicates_attention_and_splits_experts_and_sequences():
    dep = fit_check(config(DSV3), weight_bytes(DSV3), "b200", "single_node_dep", 8, 8192, 64)
    p, w = dep.plan, dep.per_gpu.weights
    assert (p.tp, p.dp, p.dense_split, p.expert_split, p.nodes) == (1, 8, 1, 8, 1)
    assert w.value == w.inputs["dense_bytes"] + w.inputs["expert_bytes"] // 8
    assert dep.per_gpu.kv_cache.inputs["sequences"] == 8


@pytest.mark.parametrize("layout, gpus, repo, message", [
    ("single_node_tep", 16, DSV3, "exceed the 8 of one"),
    ("single_node_dep", 1, DSV3, "needs at least 2 GPUs"),
    ("single_node_tep", 8, "meta-llama/Llama-3.3-70B-Instruct", "needs a mixture-of-experts model"),
])
def test_single_node_expert_layouts_refuse_shapes_they_cannot_form(layout, gpus, repo, message):
    with pytest.raises(InvalidLayout, match=message):
        fit_check(config(repo), weight_bytes(repo), "b200", layout, gpus, 8192, 16)


def test_size_cli_takes_single_node_tep(capsys, tmp_path):
    args = build_parser().parse_args(["size", "--config", str(config_file(DSV3, tmp_path)),
                                      "--hardware", "b200", "--layout", "single_node_tep", "--gpus", "8", "--json"])
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fit"]["layout"] == "single_node_tep" and data["fit"]["verdict"] == "fits"


def test_every_precision_in_upstream_recipes_is_a_known_scheme():
    precisions = set()
    for path in require_upstream("vllm-recipes", "models").glob("*/*.yaml"):
        for variant in (yaml.safe_load(path.read_text()).get("variants") or {}).values():
            precisions.add(str(variant["precision"]))
    assert "fp4" in precisions
    assert {p: known_scheme(p) for p in precisions if known_scheme(p) is None} == {}


def test_every_precision_in_the_shipped_catalog_is_a_known_scheme():
    precisions = {str(v.precision) for r in load_catalog().recipes.values() for v in r.variants.values()}
    assert "fp4" in precisions
    assert {p: known_scheme(p) for p in precisions if known_scheme(p) is None} == {}


@pytest.mark.parametrize("name, scheme", [
    ("fp4", "nvfp4"), ("NVFP4", "nvfp4"), ("w4a16", "int4"), ("awq", "int4"), ("gptq", "int4"),
    ("w8a8", "int8"), ("fp8-block", "fp8"), ("fp8_dynamic", "fp8"), ("mxfp4", "mxfp4"), ("bf16", "bf16"),
    ("int2/4/8", "int4"),
])
def test_upstream_precision_names_map_to_storage_formats(name, scheme):
    assert known_scheme(name) == scheme
    assert bytes_per_parameter(name) == BYTES_PER_PARAMETER[scheme]


def test_unknown_precision_is_still_refused_by_name():
    assert known_scheme("fp3") is None
    with pytest.raises(Exception, match="unknown quantization scheme 'fp3'"):
        bytes_per_parameter("fp3")


def test_config_estimate_counts_mtp_layers():
    cfg = config(DSV3)
    assert cfg["num_nextn_predict_layers"] == 1
    with_mtp = estimate_weight_bytes(read_text_model(cfg)).bytes
    cfg["num_nextn_predict_layers"] = 0
    without = estimate_weight_bytes(read_text_model(cfg)).bytes
    real = weight_bytes(DSV3)
    # The checkpoint stores the MTP layer: without it the estimate was 2.3% low.
    assert abs(with_mtp / real - 1) < 0.005
    assert without / real - 1 < -0.02


def test_config_estimate_counts_the_vision_tower():
    cfg = config("moonshotai/Kimi-K3")
    model = read_text_model(cfg)
    vc = cfg["vision_config"]
    blocks = vc["vt_num_hidden_layers"] * (4 * vc["vt_hidden_size"] ** 2
                                           + 2 * vc["vt_hidden_size"] * vc["vt_intermediate_size"])
    assert model.vision_parameters > blocks  # the blocks plus the projector into the text width
    assert estimate_parameters(model)["vision"] == model.vision_parameters
    no_tower = read_text_model({k: v for k, v in cfg.items() if k != "vision_config"})
    assert no_tower.vision_parameters == 0
    assert (estimate_weight_bytes(model).bytes - estimate_weight_bytes(no_tower).bytes
            == model.vision_parameters * model.dtype_bytes)
