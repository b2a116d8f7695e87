"""What the plane derives from a recipe (issue 35 items 2-3, issue 34's sizing bullets), each on the
project's own fixtures in upstream's format (tests/recipes/fixtures): the shape's tensor-parallel size,
never a shape below the variant's floor, the card a draft sizes on, and words the importer must not
choke on."""

from __future__ import annotations

import math

import pytest

from wingsmith.adapters.recipes.files import build_catalog, write_catalog
from wingsmith.cli.main import build_parser
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import evidence_for, offered_command, serve_command
from wingsmith.domain.recipes.models import Catalog
from wingsmith.domain.recipes.rules import BelowFloor, shape_gb


@pytest.fixture
def built_fixtures(fixture_trees):
    return build_catalog(*fixture_trees)


@pytest.fixture
def fixtures_catalog(built_fixtures) -> Catalog:
    return built_fixtures[0]


def _problems(report, file: str) -> list[tuple[str, str, str]]:
    return [(p.scope, p.field, p.reason) for p in report.problems if p.file.endswith(file)]


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# tp set in hardware_overrides is the shape's tp (MiniMax-M2.x on AMD)

def test_a_hardware_blocks_tensor_parallel_size_is_the_shapes(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Override-TP-230B"]
    amd = serve_command(recipe, "default", "mi355x", "single_node_tp", catalog=fixtures_catalog)
    said = int(_value(amd.args, "--tensor-parallel-size"))
    assert said == 2
    assert amd.gpus == amd.tensor_parallel_size == said  # before: 4 GPUs while the command said 2
    nvidia = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    assert nvidia.gpus == int(_value(nvidia.args, "--tensor-parallel-size")) == recipe.strategy_overrides[
        "single_node_tp"].tp
    evidence = evidence_for(recipe, fixtures_catalog)
    layout = next(lay for lay in evidence.layouts if lay.name == "single_node_tp")
    assert (layout.minimum_gpus["h200"], layout.minimum_gpus["mi355x"]) == (nvidia.gpus, said)
    shapes = {s.hardware: s.gpus for s in evidence.tested_shapes}
    assert shapes == layout.minimum_gpus


def test_a_gpu_count_other_than_the_hardware_blocks_tp_is_refused(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Override-TP-230B"]
    with pytest.raises(Exception, match="sets --tensor-parallel-size 2 on mi355x, asked for 4"):
        serve_command(recipe, "default", "mi355x", "single_node_tp", gpus=4, catalog=fixtures_catalog)


# single-node shapes below the recipe's floor (Kimi-K2 on 8 × H200)

def test_a_one_node_shape_below_the_floor_takes_the_multi_node_shape(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Floor-Giant-1T"]
    floor = recipe.variants["default"].vram_minimum_gb
    h200 = fixtures_catalog.hardware["h200"]
    assert shape_gb(h200, h200.gpu_count) < floor  # the shape of the issue: 8 × 141 GB against 1,200 GB
    with pytest.raises(BelowFloor, match="below its floor"):
        offered_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    evidence = evidence_for(recipe, fixtures_catalog)
    single = next(lay for lay in evidence.layouts if lay.name == "single_node_tp")
    assert "h200" not in single.allowed and "below its floor" in single.denied["h200"]
    shape = next(s for s in evidence.tested_shapes if s.hardware == "h200")
    nodes = max(2, math.ceil(floor / shape_gb(h200, h200.gpu_count)))
    assert (shape.layout, shape.gpus, shape.nodes) == ("multi_node_tp", nodes * h200.gpu_count, nodes)
    assert shape_gb(h200, shape.gpus) >= floor and "below its floor" in (shape.note or "")
    target = sizing_target(evidence, fleet_cards=["h200"])
    assert (target.hardware, target.layout, target.gpus) == ("h200", "multi_node_tp", shape.gpus)
    assert "below its floor" in target.reason
    # B200 holds it on one node: as the recipe runs it.
    b200 = next(s for s in evidence.tested_shapes if s.hardware == "b200")
    assert (b200.layout, b200.note) == ("single_node_tp", None)


def test_without_a_multi_node_layout_the_draft_says_the_shape_is_below_its_floor(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Floor-Single-1T"]
    evidence = evidence_for(recipe, fixtures_catalog)
    assert not [s for s in evidence.tested_shapes if s.hardware == "h200"]
    target = sizing_target(evidence)
    assert "single_node_tp shape on verified h200 is below its floor" in target.reason


def test_a_recipe_that_states_no_card_is_sized_on_its_first_tested_shape_that_holds_the_floor(fixtures_catalog):
    """Ring-2.6-1T: no `meta.hardware`, so no verified card; the draft took one 8 × H200 node (1,128 GB
    against a 1,200 GB floor) without a word, with no fleet or a fleet of MI355X only."""
    recipe = fixtures_catalog.recipes["fixture-lab/Floor-Unstated-1T"]
    cards = fixtures_catalog.hardware
    floor = recipe.variants["default"].vram_minimum_gb
    assert recipe.hardware == {} and shape_gb(cards["h200"], 8) < floor
    evidence = evidence_for(recipe, fixtures_catalog)
    holding = [s for s in evidence.tested_shapes
               if s.variant == "default" and shape_gb(cards[s.hardware], s.gpus) >= floor]
    first = holding[0]
    assert (first.hardware, first.layout, first.gpus, first.nodes) == ("b200", "single_node_tp", 8, 1)
    for fleet in (None, [], ["mi355x"]):
        target = sizing_target(evidence, fleet_cards=fleet)
        assert (target.hardware, target.layout, target.gpus) == (first.hardware, first.layout, first.gpus), fleet
        assert shape_gb(cards[target.hardware], target.gpus) >= floor
        assert "first tested shape that holds the variant's floor" in target.reason
        assert "1,440 GB against 1,200 GB" in target.reason
    assert "no registered cluster has B200 (they have mi355x)" in sizing_target(
        evidence, fleet_cards=["mi355x"]).reason
    # A card the fleet has and the recipe runs the variant on still comes first (the multi-node H200 shape).
    fleet = sizing_target(evidence, fleet_cards=["h200"])
    assert (fleet.hardware, fleet.layout, fleet.gpus) == ("h200", "multi_node_tp", 16)


def test_with_no_tested_shape_that_holds_the_floor_the_fallback_says_it_is_below_it(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Floor-Unstated-1T"]
    evidence = evidence_for(recipe, fixtures_catalog)
    # The `rocm` variant runs only on MI355X, which the plane does not place: no shape to size on.
    assert not [s for s in evidence.tested_shapes if s.variant == "rocm"]
    for fleet in (None, ["mi355x"]):
        target = sizing_target(evidence, "rocm", fleet_cards=fleet)
        assert (target.hardware, target.layout, target.gpus) == ("h200", "single_node_tp", 8)
        assert ("sized for one 8-GPU H200 node, whose 1,128 GB is below variant rocm's floor of 1,200 GB"
                in target.reason)
    # Where the fallback holds the floor, nothing is said about it.
    omni = evidence_for(fixtures_catalog.recipes["fixture-lab/Omni-Voice-7B"], fixtures_catalog)
    assert "below" not in sizing_target(omni).reason


# never offer a variant's shape below its floor (Step-3.7-Flash on dgx_station_gb300)

def test_a_pin_for_every_card_runs_a_smaller_node_whole_and_no_shape_is_below_its_floor(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Station-Flash-200B"]
    station = fixtures_catalog.hardware["dgx_station_gb300"]
    evidence = evidence_for(recipe, fixtures_catalog)
    shapes = {(s.variant, s.hardware): s for s in evidence.tested_shapes}
    # The NVFP4 variant pins TP 4 for every card; the one-GPU station runs it on its one GPU (before: refused).
    nvfp4 = shapes[("nvfp4", "dgx_station_gb300")]
    assert nvfp4.gpus == station.gpu_count
    assert shapes[("nvfp4", "b200")].gpus == recipe.variants["nvfp4"].tp
    # The BF16 default does not fit one station GPU: never offered there (before: offered on 1 GPU).
    assert ("default", "dgx_station_gb300") not in shapes
    single = next(lay for lay in evidence.layouts if lay.name == "single_node_tp")
    assert "dgx_station_gb300" in single.denied and "below its floor" in single.denied["dgx_station_gb300"]
    for shape in evidence.tested_shapes:
        floor = recipe.variants[shape.variant].vram_minimum_gb
        assert shape_gb(fixtures_catalog.hardware[shape.hardware], shape.gpus) >= floor, shape


# the model page's layouts table: the planner's own count (DeepSeek-V3 said `H200 · 1`)

def test_layouts_table_counts_are_the_planners_for_every_shipped_recipe(catalog):
    checked = 0
    for recipe in catalog.recipes.values():
        evidence = evidence_for(recipe, catalog)
        for layout in evidence.layouts:
            for card, gpus in layout.minimum_gpus.items():
                command = serve_command(recipe, evidence.default_variant, card, layout.name, catalog=catalog)
                assert gpus == command.gpus, (recipe.path, layout.name, card)
                checked += 1
    deepseek = evidence_for(catalog.recipes["deepseek-ai/DeepSeek-V3"], catalog)
    single = next(lay for lay in deepseek.layouts if lay.name == "single_node_tp")
    assert single.minimum_gpus["h200"] == catalog.hardware["h200"].gpu_count
    assert checked > len(catalog.recipes)


# the draft sizes on a card the fleet has (issue 34)

def test_the_draft_sizes_on_a_verified_card_the_fleet_has_first(catalog):
    deepseek = evidence_for(catalog.recipes["deepseek-ai/DeepSeek-V3"], catalog)
    verified = [h.id for h in deepseek.hardware if h.placeable and h.status == "verified"]
    assert {"b200", "h200"} <= set(verified)
    unknown_fleet = sizing_target(deepseek)
    assert unknown_fleet.hardware in verified and unknown_fleet.hardware not in ("h200", "gb200")
    # The fleet: H200 and GB200 only. GB200 is verified too, but its one-tray shape is below the
    # floor; H200 holds the replica as the recipe runs it.
    fleet = sizing_target(deepseek, fleet_cards=["h200", "gb200"])
    assert fleet.hardware == "h200" and "which the registered clusters have" in fleet.reason
    assert fleet.gpus == catalog.hardware["h200"].gpu_count


def test_then_another_card_the_fleet_has_then_a_card_it_lacks_saying_so(fixtures_catalog):
    evidence = evidence_for(fixtures_catalog.recipes["fixture-lab/Hardware-Words-19B"], fixtures_catalog)
    assert [h.id for h in evidence.hardware if h.placeable and h.status == "verified"] == ["h200"]
    other = sizing_target(evidence, fleet_cards=["b200"])
    assert other.hardware == "b200" and "not stated by the recipe" in other.reason
    lacking = sizing_target(evidence, fleet_cards=["mi355x"])
    assert lacking.hardware == "h200" and "which no registered cluster has (they have mi355x)" in lacking.reason
    none = sizing_target(evidence, fleet_cards=[])
    assert none.hardware == "h200" and "none is registered" in none.reason


# `meta.hardware: supported`, and `meta.hardware` as one word (LTX-2.5)

def test_supported_hardware_is_carried_and_shown_by_recipes_show(built_fixtures, tmp_path, capsys):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/Hardware-Words-19B"]
    assert recipe.hardware == {"h200": "verified", "rtx_pro_6000": "supported"}
    assert _problems(report, "Hardware-Words-19B.yaml") == []
    status = {h.id: h.status for h in evidence_for(recipe, catalog).hardware}
    assert status["rtx_pro_6000"] == "supported"
    path = tmp_path / "catalog.json"
    write_catalog(catalog, path)
    for model in ("fixture-lab/Hardware-Words-19B", "fixture-lab/Hardware-String-5B"):
        args = build_parser().parse_args(["recipes", "show", model, "--catalog", str(path), "--json"])
        assert args.func(args) == 0
        assert "Traceback" not in capsys.readouterr().err


def test_hardware_as_one_word_is_a_dropped_part_not_a_crash(built_fixtures):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/Hardware-String-5B"]
    assert recipe.hardware == {}
    assert _problems(report, "Hardware-String-5B.yaml") == [("part", "meta.hardware", "expected a mapping, got str")]
    assert evidence_for(recipe, catalog).variants[0].vram_minimum_gb == recipe.variants["default"].vram_minimum_gb
