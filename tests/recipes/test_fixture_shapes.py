"""One test per upstream shape the shipped snapshot does not hold, on the project's own fixtures in
upstream's formats (tests/recipes/fixtures). Each checks the shape is read, not merely tolerated."""

from __future__ import annotations

from pathlib import Path

import pytest

from wingsmith.adapters.recipes.files import build_catalog
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import InvalidChoice, evidence_for, serve_command
from wingsmith.domain.recipes.models import Catalog, DynamoEntry


@pytest.fixture
def built_fixtures(fixture_trees: tuple[Path, Path]):
    return build_catalog(*fixture_trees)


@pytest.fixture
def fixtures_catalog(built_fixtures) -> Catalog:
    return built_fixtures[0]


def _entry(catalog: Catalog, path: str) -> DynamoEntry:
    return next(e for e in catalog.dynamo if e.source_path == f"recipes/{path}")


def _problems(report, file: str) -> list[tuple[str, str, str]]:
    return [(p.scope, p.field, p.reason) for p in report.problems if p.file.endswith(file)]


def test_vocabulary_written_from_the_shipped_catalog_reads_back_as_its_facts(built_fixtures, catalog):
    # The fixtures' strategies/ and taxonomy.yaml are the shipped catalog's, in upstream's formats.
    fixtures, report = built_fixtures
    assert fixtures.strategies == catalog.strategies
    assert fixtures.hardware == catalog.hardware
    assert not [p for p in report.problems if p.file.startswith(("strategies/", "taxonomy"))]


# vLLM recipes

def test_every_fixture_recipe_is_kept(built_fixtures, fixture_trees):
    catalog, report = built_fixtures
    files = sorted(p.relative_to(fixture_trees[0] / "models").with_suffix("").as_posix()
                   for p in (fixture_trees[0] / "models").glob("*/*.yaml"))
    assert sorted(catalog.recipes) == files and "fixture-lab/Card-Sized-70B" in files
    assert report.recipe_files == len(files)
    assert not [p for p in report.problems if p.scope == "file"]


def test_omni_recipe_with_empty_compatible_strategies_is_evidence_without_layouts(built_fixtures):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/Omni-Voice-7B"]
    assert recipe.omni and recipe.compatible_strategies == []
    assert _problems(report, "Omni-Voice-7B.yaml") == []  # empty on purpose: nothing to report
    evidence = evidence_for(recipe, catalog)
    assert evidence.omni and evidence.layouts == [] and evidence.default_layout is None
    assert [v.name for v in evidence.variants] == ["default"]


def test_empty_compatible_strategies_on_a_text_recipe_is_a_warning_not_a_drop(fixture_trees):
    vllm, dynamo = fixture_trees
    path = vllm / "models/fixture-lab/Stray-Card-8B.yaml"
    text = path.read_text().replace("compatible_strategies:\n  - single_node_tp\n", "compatible_strategies: []\n")
    path.write_text(text)
    catalog, report = build_catalog(vllm, dynamo)
    assert "fixture-lab/Stray-Card-8B" in catalog.recipes
    assert ("warning", "compatible_strategies", "missing or empty: no layout to serve with") in _problems(
        report, "Stray-Card-8B.yaml")


def test_variant_tp_per_card_sizes_the_command_and_the_tested_shape(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    assert recipe.variants["default"].tp == {"b200": 2, "h200": 4}
    on_h200 = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    on_b200 = serve_command(recipe, "default", "b200", "single_node_tp", catalog=fixtures_catalog)
    assert (on_h200.gpus, on_b200.gpus) == (4, 2)
    assert on_h200.args[on_h200.args.index("--tensor-parallel-size") + 1] == "4"
    shapes = {(s.variant, s.hardware): s.gpus for s in evidence_for(recipe, fixtures_catalog).tested_shapes}
    assert shapes[("default", "h200")] == 4 and shapes[("default", "b200")] == 2


def test_tp_in_a_variants_own_args_is_the_tested_shape(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Stray-Card-8B"]
    command = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    assert command.gpus == 2 and command.args.count("--tensor-parallel-size") == 1
    assert command.args[command.args.index("--tensor-parallel-size") + 1] == "2"
    evidence = evidence_for(recipe, fixtures_catalog)
    assert sizing_target(evidence, "default").gpus == 2


def test_omni_recipe_draft_target_says_why_it_falls_back(fixtures_catalog):
    evidence = evidence_for(fixtures_catalog.recipes["fixture-lab/Omni-Voice-7B"], fixtures_catalog)
    target = sizing_target(evidence, "default")
    assert (target.hardware, target.gpus) == ("h200", 8)
    assert target.reason == "the recipe has no layout (vLLM-Omni); sized for one 8-GPU H200 node"


def test_feature_with_only_vendor_args_is_kept_and_applies_per_vendor(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    feature = recipe.features["vendor_kernels"]
    assert feature.args == [] and set(feature.hardware_overrides) == {"nvidia", "amd"}
    nvidia = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    amd = serve_command(recipe, "default", "mi300x", "single_node_tp", catalog=fixtures_catalog)
    assert nvidia.args[nvidia.args.index("--attention-backend") + 1] == "FLASHINFER"
    assert amd.args[amd.args.index("--attention-backend") + 1] == "ROCM_AITER_FA"


def test_card_missing_from_taxonomy_drops_only_that_card(built_fixtures):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/Stray-Card-8B"]
    assert recipe.hardware == {"h200": "verified", "mi300x": "verified"}
    assert ("warning", "meta.hardware.quantum_slab_9000",
            "not a hardware profile in taxonomy.yaml: card dropped") in _problems(report, "Stray-Card-8B.yaml")
    assert serve_command(recipe, "default", "h200", "single_node_tp", catalog=catalog).hardware_status == "verified"


def test_bad_variant_is_dropped_by_field_path_and_the_recipe_kept(built_fixtures):
    catalog, report = built_fixtures
    assert list(catalog.recipes["fixture-lab/Stray-Card-8B"].variants) == ["default"]
    assert ("part", "variants.fp8.tp", "expected a positive whole number, got 'a few'") in _problems(
        report, "Stray-Card-8B.yaml")


def test_docker_image_map_is_imported_and_used_for_the_runtime_image(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    assert recipe.docker_images == {"cu129": "vllm/vllm-openai:cardsized-cu129",
                                    "cu130": "vllm/vllm-openai:cardsized-cu130"}
    command = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    assert command.docker_image == "vllm/vllm-openai:cardsized-cu130"  # the newest CUDA build it names
    assert evidence_for(recipe, fixtures_catalog).docker_images == recipe.docker_images
    assert serve_command(recipe, "default", "mi300x", "single_node_tp", catalog=fixtures_catalog).docker_image is None


def test_docker_image_map_keyed_by_brand_picks_the_cards_brand(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Stray-Card-8B"]
    nvidia = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    amd = serve_command(recipe, "default", "mi300x", "single_node_tp", catalog=fixtures_catalog)
    assert (nvidia.docker_image, amd.docker_image) == ("vllm/vllm-openai:straycard", "vllm/vllm-openai-rocm:straycard")


def test_docker_image_per_brand_with_its_own_cuda_builds_runs_the_newest_build(built_fixtures):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/Brand-Build-40B"]
    assert recipe.docker_images == {"nvidia": "vllm/vllm-openai:brandbuild-cu130",
                                    "amd": "vllm/vllm-openai-rocm:brandbuild"}
    assert _problems(report, "Brand-Build-40B.yaml") == []
    b200 = serve_command(recipe, "default", "b200", "single_node_tp", catalog=catalog)
    mi300x = serve_command(recipe, "default", "mi300x", "single_node_tp", catalog=catalog)
    assert (b200.docker_image, mi300x.docker_image) == ("vllm/vllm-openai:brandbuild-cu130",
                                                        "vllm/vllm-openai-rocm:brandbuild")


def test_empty_docker_image_means_no_image_of_its_own(built_fixtures):
    catalog, report = built_fixtures
    recipe = catalog.recipes["fixture-lab/No-Image-3B"]
    assert recipe.docker_images == {} and _problems(report, "No-Image-3B.yaml") == []
    assert serve_command(recipe, "default", "h100", "single_node_tp", catalog=catalog).docker_image is None


def test_feature_unsupported_on_a_card_is_never_built_there(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    assert recipe.features["speculative"].hardware == {"rtx_5090": "unsupported"}
    on_5090 = serve_command(recipe, "default", "rtx_5090", "single_node_tp", catalog=fixtures_catalog)
    assert "--speculative-config" not in on_5090.args
    assert "speculative left off: unsupported on rtx_5090" in on_5090.notes
    with pytest.raises(InvalidChoice, match="speculative is unsupported on rtx_5090"):
        serve_command(recipe, "default", "rtx_5090", "single_node_tp", ["speculative"], catalog=fixtures_catalog)
    on_h200 = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixtures_catalog)
    assert "--speculative-config" in on_h200.args
    feature = next(f for f in evidence_for(recipe, fixtures_catalog).features if f.name == "speculative")
    assert feature.unsupported_on == ["rtx_5090"]


def test_fp4_needs_blackwell_unless_the_variants_precision_hardware_widens_it(fixtures_catalog):
    recipe = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    assert recipe.variants["nvfp4"].precision_hardware == {}
    assert recipe.variants["nvfp4_dequant"].precision_hardware == {"brand": ["nvidia"],
                                                                   "generation": ["hopper", "blackwell"]}
    assert serve_command(recipe, "nvfp4", "b200", "single_node_tp", catalog=fixtures_catalog).variant == "nvfp4"
    with pytest.raises(InvalidChoice, match="nvfp4 needs blackwell, not hopper"):
        serve_command(recipe, "nvfp4", "h200", "single_node_tp", catalog=fixtures_catalog)
    widened = serve_command(recipe, "nvfp4_dequant", "h200", "single_node_tp", catalog=fixtures_catalog)
    assert widened.model == "fixture-lab/Card-Sized-70B-NVFP4-A16"
    with pytest.raises(InvalidChoice, match="needs nvidia hardware"):
        serve_command(recipe, "nvfp4_dequant", "mi300x", "single_node_tp", catalog=fixtures_catalog)
    shapes = {(s.variant, s.hardware) for s in evidence_for(recipe, fixtures_catalog).tested_shapes}
    assert ("nvfp4", "b200") in shapes and ("nvfp4", "h200") not in shapes and ("nvfp4_dequant", "h200") in shapes


def test_strategy_override_pool_modes_are_imported(fixtures_catalog):
    override = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"].strategy_overrides["pd_cluster"]
    assert override.pool_modes == ["tp"]


def test_strategy_min_gpus_per_card_per_layout_and_as_a_bare_number(fixtures_catalog):
    from wingsmith.domain.recipes.rules import minimum_gpus
    card_sized = fixtures_catalog.recipes["fixture-lab/Card-Sized-70B"]
    assert card_sized.strategy_min_gpus == {"pd_cluster": 4, "mi300x": {"single_node_tp": 8}}
    tp = fixtures_catalog.strategies["single_node_tp"]
    assert minimum_gpus(card_sized, tp, "mi300x") == 8 and minimum_gpus(card_sized, tp, "h200") == 1
    stray = fixtures_catalog.recipes["fixture-lab/Stray-Card-8B"]
    assert stray.strategy_min_gpus == {"default": 2}
    assert minimum_gpus(stray, tp, "h200") == 2
    with pytest.raises(InvalidChoice, match="needs at least 2 GPUs"):
        serve_command(stray, "default", "h200", "single_node_tp", gpus=1, catalog=fixtures_catalog)


def test_upstream_order_of_variants_and_features_survives_the_catalog_file(fixtures_catalog, tmp_path):
    from wingsmith.adapters.recipes.files import read_catalog, write_catalog
    path = tmp_path / "catalog.json"
    write_catalog(fixtures_catalog, path)
    recipe = read_catalog(path).recipes["fixture-lab/Card-Sized-70B"]
    assert list(recipe.variants) == ["nvfp4", "nvfp4_dequant", "default"]
    assert list(recipe.features) == ["vendor_kernels", "speculative", "reasoning"]
    assert recipe.default_variant == "default"


# Dynamo manifests

def test_every_manifest_holding_a_graph_is_read_and_patches_are_noted(built_fixtures, fixture_trees):
    catalog, report = built_fixtures
    graphs = [p for p in (fixture_trees[1] / "recipes").rglob("*.yaml")
              if "kind: DynamoGraphDeployment" in p.read_text() and "patch" not in p.name]
    assert report.dynamo_files == len(graphs) and len(graphs) > 10
    paths = {e.source_path for e in catalog.dynamo}
    assert "recipes/fixture-moe/vllm/agg-h200/kustomize/base/deploy.yaml" in paths
    assert {"recipes/fixture-moe/vllm/agg-b200/deploy-8gpu.yaml",
            "recipes/fixture-moe/vllm/agg-b200/deploy-16gpu.yaml"} <= paths
    assert not any("perf" in p for p in paths)
    assert ("warning", "spec", "a kustomize patch (no worker of its own): its base manifest is the entry") in \
        _problems(report, "components/rdma/patch-dgd.yaml")
    assert not [p for p in report.problems if p.file.startswith("dynamo:") and p.scope == "file"]


def test_alternative_manifests_per_gpu_count_are_separate_entries(fixtures_catalog):
    eight = _entry(fixtures_catalog, "fixture-moe/vllm/agg-b200/deploy-8gpu.yaml")
    sixteen = _entry(fixtures_catalog, "fixture-moe/vllm/agg-b200/deploy-16gpu.yaml")
    assert (eight.tensor_parallel_size, eight.nodes, eight.max_concurrency.value) == (8, 1, 256)
    assert (sixteen.tensor_parallel_size, sixteen.nodes, sixteen.max_concurrency.value) == (16, 2, 512)
    assert eight.card == sixteen.card == "b200"


def test_workers_named_for_their_roles_form_a_disaggregated_graph(fixtures_catalog):
    entry = _entry(fixtures_catalog, "fixture-moe/vllm/disagg/deploy_hopper_16gpu.yaml")
    assert entry.mode == "disaggregated"
    assert [(w.name, w.role) for w in entry.workers] == [("decode", "decode"), ("prefill", "prefill")]
    assert (entry.gpus_per_worker, entry.max_concurrency.value) == (8, 640)
    assert (entry.model_name, entry.model_name_source) == ("fixture-lab/Fixture-MoE-200B", "--served-model-name")


def test_v1beta1_spec_env_names_the_model_and_env_expands_every_flag(fixtures_catalog):
    entry = _entry(fixtures_catalog, "fixture-moe/vllm/agg-h200/kustomize/base/deploy.yaml")
    assert entry.model_ids == ["fixture-lab/Fixture-MoE-200B"]
    assert (entry.model_name, entry.model_name_source) == ("fixture-lab/Fixture-MoE-200B",
                                                          "--served-model-name from env SERVED_MODEL_NAME")
    # "${TENSOR_PARALLEL_SIZE}" and "$(MAX_SEQS)" come from the same container's env.
    assert (entry.tensor_parallel_size, entry.max_concurrency.value) == (8, 384)
    assert (entry.mode, entry.card, entry.replicas) == ("aggregated", "h200", 2)


@pytest.mark.parametrize("path, tp, cap", [
    ("fixture-moe/trtllm/agg-configmap/deploy.yaml", 8, 48),  # --extra-engine-args file from a mounted ConfigMap
    ("fixture-moe/trtllm/agg-cli/deploy.yaml", 4, 32),  # engine args on the command line
    ("fixture-moe/trtllm/agg-env/deploy.yaml", 2, 16),  # the engine-args path through env
])
def test_tensorrt_llm_engine_args_from_file_configmap_command_line_and_env(fixtures_catalog, path, tp, cap):
    entry = _entry(fixtures_catalog, path)
    assert entry.backend == "trtllm"
    assert (entry.tensor_parallel_size, entry.max_concurrency.setting, entry.max_concurrency.value) == (
        tp, "max_batch_size", cap)
    assert entry.model_ids == ["fixture-lab/Fixture-MoE-200B-FP4"]


def test_sglang_config_file_from_a_configmap(fixtures_catalog):
    entry = _entry(fixtures_catalog, "fixture-moe/sglang/agg-config/deploy.yaml")
    assert (entry.tensor_parallel_size, entry.max_concurrency.setting, entry.max_concurrency.value) == (
        4, "--max-running-requests", 128)


def test_sglang_config_file_names_the_model_when_no_flag_does(fixtures_catalog):
    entry = _entry(fixtures_catalog, "fixture-moe/sglang/disagg-config-named/deploy.yaml")
    assert (entry.model_name, entry.model_name_source) == ("fixture-lab/Fixture-MoE-200B",
                                                          "config file key model-path")
    assert (entry.mode, entry.tensor_parallel_size, entry.max_concurrency.value) == ("disaggregated", 4, 192)
    assert [(w.role, w.max_concurrency.value) for w in entry.workers] == [("prefill", 64), ("decode", 192)]


def test_node_selector_left_as_a_placeholder_is_a_warning_not_a_dropped_manifest(built_fixtures):
    catalog, report = built_fixtures
    entry = _entry(catalog, "fixture-vl/vllm/agg-placeholder-selector/deploy.yaml")
    assert (entry.model_name, entry.model_name_source) == ("fixture-lab/Fixture-VL-12B", "--model from env MODEL_NAME")
    assert (entry.card, entry.tensor_parallel_size, entry.max_concurrency.value) == (None, 2, 24)
    problems = _problems(report, "agg-placeholder-selector/deploy.yaml")
    assert [(scope, field) for scope, field, _ in problems] == [
        ("warning", "spec.services.VllmWorker.extraPodSpec.nodeSelector")]
    assert "'${HW_NODE_SELECTOR}' is not a mapping" in problems[0][2]


def test_graph_scaled_to_zero_reads_as_one_replica_with_a_warning(built_fixtures):
    catalog, report = built_fixtures
    entry = _entry(catalog, "fixture-vl/vllm/agg-scaled-to-zero/deploy.yaml")
    assert (entry.replicas, entry.card, entry.max_concurrency.value) == (1, "h200", 40)
    assert _problems(report, "agg-scaled-to-zero/deploy.yaml") == [
        ("warning", "spec.components[1].replicas", "0 (the graph starts scaled to zero): read as 1 replica")]


def test_heterogeneous_disaggregated_graph_with_an_encode_worker(fixtures_catalog):
    entry = _entry(fixtures_catalog, "fixture-vl/vllm/disagg-encode/deploy.yaml")
    assert entry.mode == "disaggregated"
    assert [(w.name, w.role, w.card) for w in entry.workers] == [
        ("EncodeWorker", "encode", "h100"), ("PrefillWorker", "prefill", "h200"), ("ServeWorker", "decode", "h200")]
    # The entry's figures are the serving (decode) worker's, not the encoder's or the prefill pool's.
    assert (entry.card, entry.gpus_per_worker, entry.replicas, entry.tensor_parallel_size,
            entry.max_concurrency.value) == ("h200", 4, 3, 4, 200)


def test_flag_with_a_leading_space_is_a_warning_naming_the_manifest(built_fixtures):
    catalog, report = built_fixtures
    warnings = _problems(report, "fixture-moe/vllm/agg-folded/deploy.yaml")
    assert len(warnings) == 1 and warnings[0][0] == "warning"
    assert warnings[0][1] == "spec.services.VllmWorker.args" and "' --max-num-seqs'" in warnings[0][2]
    assert _entry(catalog, "fixture-moe/vllm/agg-folded/deploy.yaml").max_concurrency.value == 96


def test_folded_script_whose_line_continuations_glue_spaces_to_flags_is_a_warning(built_fixtures):
    catalog, report = built_fixtures
    warnings = _problems(report, "fixture-moe/vllm/agg-folded-script/deploy.yaml")
    assert [w[2].split(" starts")[0] for w in warnings] == ["' --tensor-parallel-size'", "' --max-num-seqs'"]
    assert {w[0] for w in warnings} == {"warning"}
    entry = _entry(catalog, "fixture-moe/vllm/agg-folded-script/deploy.yaml")
    assert (entry.tensor_parallel_size, entry.max_concurrency.value) == (8, 72)


@pytest.mark.parametrize("path, name, source", [
    ("fixture-moe/vllm/agg-b200/deploy-8gpu.yaml", "fixture-lab/Fixture-MoE-200B", "--model"),
    ("fixture-moe/trtllm/agg-cli/deploy.yaml", "fixture-lab/Fixture-MoE-200B-FP4", "--model-path"),
    ("fixture-moe/trtllm/agg-env/deploy.yaml", "fixture-lab/Fixture-MoE-200B-FP4", "--model-path from env MODEL_PATH"),
    ("fixture-moe/sglang/agg-config/deploy.yaml", "fixture-moe", "recipe folder"),
])
def test_every_entry_names_its_model_and_says_where_from(fixtures_catalog, path, name, source):
    entry = _entry(fixtures_catalog, path)
    assert (entry.model_name, entry.model_name_source) == (name, source)
