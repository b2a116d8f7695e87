"""The vLLM recipe's field check, one handler per block (issue 49 item 4): each names exactly the
fields of its block (and of the blocks nested in it) that the importer does not know, and nothing it
knows, whether read or left out on purpose."""

from __future__ import annotations

from wingsmith.domain.recipes import known_fields as kf


def test_meta_knows_read_and_prose_fields():
    assert kf.meta("meta", {"title": "T", "description": "prose", "rating": 5}) == ["meta.rating"]
    assert kf.meta("meta", "not a block") == []


def test_model_checks_its_install_paths():
    block = {"model_id": "org/m", "docker_source": "x", "speed": 1,
             "install": {"docker": {"command": "c", "note": "n", "digest": "d"}, "pip": False}}
    assert kf.model("model", block) == ["model.speed", "model.install.docker.digest"]


def test_omni_checks_each_task_and_its_per_card_blocks():
    block = {"tasks": [{"id": "t2v", "curl": "prose", "fps": 24,
                        "hardware_overrides": {"h200": {"vram_minimum_gb": 80, "curl": "x", "seed": 1}}},
                       "i2v"],
             "stage_config": "s", "engine": "e"}
    assert kf.omni("omni", block) == ["omni.engine", "omni.tasks[0].fps", "omni.tasks[0].hardware_overrides.h200.seed"]
    assert kf.omni_task("omni.tasks[1]", "i2v") == []


def test_variant_blocks_check_its_per_card_overrides():
    variant = {"precision": "fp8", "hardware_overrides": {"amd": {"extra_args": [], "rocm": 1}}}
    assert kf.variant_blocks("variants.fp8", variant) == ["variants.fp8.hardware_overrides.amd.rocm"]


def test_feature_blocks_check_overrides_modes_and_the_modes_overrides():
    feature = {"args": [], "hardware_overrides": {"h200": {"args": [], "env": {}}},
               "modes": {"fast": {"args": [], "label": "prose", "speed": 2,
                                  "hardware_overrides": {"b200": {"args": [], "note": "n"}}}}}
    assert kf.feature_blocks("features.spec", feature) == [
        "features.spec.hardware_overrides.h200.env", "features.spec.modes.fast.speed",
        "features.spec.modes.fast.hardware_overrides.b200.note"]
    assert kf.feature_mode("features.spec.modes.x", ["not", "a", "block"]) == []


def test_strategy_override_blocks_check_both_pools():
    override = {"tp": 8, "hardware_overrides": {"gb200": {"extra_args": [], "speed": 1}},
                "prefill": {"tp": 4, "queue": 1, "hardware_overrides": {"h200": {"env": {}, "x": 1}}},
                "decode": {"nodes": 2}}
    assert kf.strategy_override_blocks("strategy_overrides.pd_cluster", override) == [
        "strategy_overrides.pd_cluster.hardware_overrides.gb200.speed", "strategy_overrides.pd_cluster.prefill.queue",
        "strategy_overrides.pd_cluster.prefill.hardware_overrides.h200.x"]
    assert kf.pd_role("strategy_overrides.x.decode", None) == []


def test_dependencies_are_checked_by_position():
    block = [{"command": "pip install x", "brand": "Huawei"}, {"command": "c", "checksum": "abc"}, "plain"]
    assert kf.dependencies("dependencies", block) == ["dependencies[1].checksum"]
    assert kf.dependencies("dependencies", {"not": "a list"}) == []


def test_unknown_fields_lists_shallow_fields_of_the_named_maps_before_nested_ones():
    doc = {"meta": {"title": "t"}, "variants": {"v": {"precision": "fp8", "weird": 1,
                                                      "hardware_overrides": {"amd": {"deep": 1}}}},
           "features": {"f": {"args": [], "odd": 2}}, "hardware_overrides": {"nvidia": {"args": [], "top": 3}},
           "strategy_overrides": {"s": {"tp": 2, "tilt": 4}}, "dependencies": [{"command": "c", "dep": 5}],
           "benchmarks": []}
    assert kf.unknown_fields(doc) == [
        "benchmarks", "variants.v.weird", "features.f.odd", "hardware_overrides.nvidia.top",
        "strategy_overrides.s.tilt", "variants.v.hardware_overrides.amd.deep", "dependencies[0].dep"]
