"""Issue 48 item 2: with no count asked for, the shape is the smallest that holds the variant's floor on the card
asked (a divisor of the node, TP as small as memory allows), unless the recipe pins more; the draft says why.
Fixtures in upstream's recipe format (models/<org>/<repo>.yaml)."""

from __future__ import annotations

import pytest

from tests.recipes.conftest import catalog_of
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import evidence_for, serve_command

# NVIDIA's 30B-A3B NVFP4 checkpoint (an 18 GB floor), which vLLM also runs on Hopper; Dynamo runs it at TP1.
_SMALL_MOE = """
meta: {title: Small-30B-A3B, hardware: {h100: verified, h200: verified, b200: verified}}
model: {model_id: fixture-lab/Small-30B-A3B, architecture: moe, parameter_count: 30B}
variants:
  default:
    precision: nvfp4
    model_id: nvidia/Small-30B-A3B-NVFP4
    vram_minimum_gb: 18
    precision_hardware: {brand: [nvidia], generation: [hopper, blackwell]}
compatible_strategies: [single_node_tp, single_node_dep, multi_node_dep]
"""
_DENSE_8B = """
meta: {title: Dense-8B, hardware: {h100: verified, h200: verified}}
model: {model_id: fixture-lab/Dense-8B, architecture: dense}
variants:
  default: {precision: bf16, vram_minimum_gb: 19}
compatible_strategies: [single_node_tp]
"""
# One TP for every card (upstream writes it for its usual cards) whose single chip holds 100 GB.
_TP1_FOR_EVERY_CARD = """
meta: {title: Chip-60B, hardware: {h100: verified, b200: verified}}
model: {model_id: fixture-lab/Chip-60B, architecture: dense}
variants:
  default: {precision: bf16, vram_minimum_gb: 144}
compatible_strategies: [single_node_tp, multi_node_tp]
strategy_overrides:
  single_node_tp: {tp: 1}
"""


@pytest.fixture
def small_catalog(tmp_path, catalog):
    return catalog_of(tmp_path, catalog, {"Small-30B-A3B": _SMALL_MOE, "Dense-8B": _DENSE_8B,
                                          "Chip-60B": _TP1_FOR_EVERY_CARD})


@pytest.mark.parametrize("card", ["h100", "h200", "b200"])
def test_a_30b_a3b_nvfp4_model_runs_on_one_gpu_not_a_whole_node(small_catalog, card):
    command = serve_command(small_catalog.recipes["fixture-lab/Small-30B-A3B"], "default", card, "single_node_tp",
                            catalog=small_catalog)
    assert (command.gpus, command.tensor_parallel_size) == (1, 1)
    assert "smallest shape" in command.shape_reason and "18 GB" in command.shape_reason
    # Data-parallel layouts keep their own floor of two ranks.
    dep = serve_command(small_catalog.recipes["fixture-lab/Small-30B-A3B"], "default", card, "single_node_dep",
                        catalog=small_catalog)
    assert dep.gpus == 2 and "the layout's floor" in dep.shape_reason


def test_an_8b_model_gets_one_gpu_and_more_only_when_asked(small_catalog):
    recipe = small_catalog.recipes["fixture-lab/Dense-8B"]
    assert serve_command(recipe, "default", "h100", "single_node_tp", catalog=small_catalog).gpus == 1
    asked = serve_command(recipe, "default", "h100", "single_node_tp", gpus=4, catalog=small_catalog)
    assert asked.gpus == 4 and asked.shape_reason == "asked for 4 GPUs"


def test_a_tp_for_every_card_below_one_chips_memory_stays_on_one_host(small_catalog):
    recipe = small_catalog.recipes["fixture-lab/Chip-60B"]
    # 80 GB per H100 is below the 144 GB floor: the smallest one-host shape that holds it, not 2 × 8 GPUs.
    h100 = serve_command(recipe, "default", "h100", "single_node_tp", catalog=small_catalog)
    assert (h100.gpus, h100.nodes) == (2, 1) and any("TP 1 for every card" in n for n in h100.notes)
    b200 = serve_command(recipe, "default", "b200", "single_node_tp", catalog=small_catalog)
    assert (b200.gpus, b200.pin) == (1, "the recipe's single_node_tp override pins tp: 1")
    shapes = {s.hardware: s for s in evidence_for(recipe, small_catalog).tested_shapes}
    assert (shapes["h100"].layout, shapes["h100"].gpus) == ("single_node_tp", 2)


def test_the_draft_says_why_it_chose_its_shape(small_catalog):
    evidence = evidence_for(small_catalog.recipes["fixture-lab/Small-30B-A3B"], small_catalog)
    target = sizing_target(evidence, fleet_cards=["h200"])
    assert (target.hardware, target.gpus) == ("h200", 1)
    assert "the smallest shape on h200 that holds the variant's floor of 18 GB: 1 GPU(s)" in target.reason
