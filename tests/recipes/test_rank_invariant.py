"""The invariant every shape the plane renders keeps (wingsmith.domain.dynamo.ranks): the ranks a rendered command
asks for (TP × PP × DP as vLLM reads its flags, the last occurrence winning) equal the GPUs its worker
reserves, and a recipe's pins are kept or the shape is refused naming the pin. Checked exhaustively over the
shipped catalog (every recipe × every card × every layout it offers, and every Dynamo entry's workers), and on
fixtures written in upstream's own recipe format for the shapes the shipped catalog lacks."""

from __future__ import annotations

import pytest
import yaml

from tests.recipes.conftest import catalog_of
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.dynamo.ranks import RanksMismatch, check_ranks, engine_ranks, ranks_problem
from wingsmith.domain.recipes import InvalidChoice, serve_command
from wingsmith.domain.workloads import _pools


def _every_shape(catalog):
    for recipe in catalog.recipes.values():
        layouts = set(recipe.compatible_strategies) | set(recipe.strategy_hardware)
        for card in catalog.hardware:
            for layout in sorted(layouts & set(catalog.strategies)):
                for variant in recipe.variants:
                    yield recipe, variant, card, layout


def test_every_shape_of_the_shipped_catalog_asks_for_the_gpus_it_reserves():
    catalog = load_catalog()
    built = refused = 0
    for recipe, variant, card, layout in _every_shape(catalog):
        try:
            command = serve_command(recipe, variant, card, layout, catalog=catalog)
        except InvalidChoice:
            refused += 1
            continue
        built += 1
        worker, prefill = _pools(command)
        reserved = 0
        for pool in (worker, prefill):
            if pool is None:
                continue
            problem = ranks_problem("vllm", pool.args, gpus_per_node=pool.gpus_per_node, nodes=pool.nodes)
            assert problem is None, f"{recipe.path} {variant} {card} {layout}: {problem}"
            reserved += pool.gpus_per_replica
        assert reserved == command.gpus, f"{recipe.path} {variant} {card} {layout}"
        for node in command.commands:
            ranks = engine_ranks("vllm", node.args)
            assert ranks is not None
            # One size per flag: no TP from the base args left beside the layout's DP.
            spelled = [a.split("=")[0] for a in node.args if a.split("=")[0] in ("--tensor-parallel-size", "-tp")]
            assert len(spelled) <= 1, f"{recipe.path} {variant} {card} {layout}: {node.args}"
    assert built > 1000 and refused > 0


def test_every_dynamo_worker_of_the_shipped_catalog_states_no_more_ranks_than_its_gpus():
    for entry in load_catalog().dynamo:
        for worker in entry.workers:
            if worker.gpus is None or worker.tensor_parallel_size is None:
                continue
            # Upstream's own graphs: a worker's TP group fits in the GPUs of its pods.
            assert worker.tensor_parallel_size <= worker.gpus * worker.nodes, (entry.source_path, worker.name)


@pytest.mark.parametrize(("args", "gpus", "nodes", "problem"), [
    (["--tensor-parallel-size", "8", "--data-parallel-size", "16", "--data-parallel-size-local", "8"], 8, 2,
     "TP 8 × PP 1 × DP 16 (8 per node) = 128 ranks but its worker reserves 2 node(s) × 8 GPUs = 16"),
    (["-tp", "4", "--tensor-parallel-size=2"], 2, 1, None),  # the last occurrence wins, whatever the spelling
    (["--tensor-parallel-size", "2", "-tp", "4"], 2, 1, "TP 4"),
    (["--data-parallel-size", "16", "--data-parallel-size-local", "4", "--enable-expert-parallel"], 8, 2,
     "4 data-parallel rank(s)"),
    (["--data-parallel-size", "16", "--data-parallel-size-local", "8", "--enable-expert-parallel"], 8, 2, None),
    (["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"], 8, 2, None),
])
def test_ranks_are_read_as_vllm_reads_its_flags(args, gpus, nodes, problem):
    found = ranks_problem("vllm", args, gpus_per_node=gpus, nodes=nodes)
    if problem is None:
        assert found is None
        check_ranks("vllm", args, gpus_per_node=gpus, nodes=nodes)
    else:
        assert found is not None and problem in found
        with pytest.raises(RanksMismatch):
            check_ranks("vllm", args, gpus_per_node=gpus, nodes=nodes)


# Upstream's recipe format (models/<org>/<repo>.yaml): a 1T MoE whose base args carry TP 8 for its single-node
# shape, and a MoE whose variant pins tp: 4 because its heads divide no other way.
_ONE_T = """
meta: {title: One-T, hardware: {h200: verified, b200: verified}}
model: {model_id: fixture-lab/One-T, architecture: moe, base_args: [--trust-remote-code, --tensor-parallel-size, "8"]}
variants:
  default: {precision: fp8, vram_minimum_gb: 1200, extra_args: [--tensor-parallel-size, "8"]}
compatible_strategies: [single_node_tp, multi_node_tp, multi_node_dep, multi_node_tp_dp]
"""
_PINNED = """
meta: {title: Pinned-TP4, hardware: {h200: verified}}
model: {model_id: fixture-lab/Pinned-TP4, architecture: moe}
variants:
  default: {precision: bf16, vram_minimum_gb: 200, tp: 4}
compatible_strategies: [single_node_tp, multi_node_tp, multi_node_dep, multi_node_tp_pp]
"""


@pytest.fixture
def fixture_catalog(tmp_path, catalog):
    return catalog_of(tmp_path, catalog, {"One-T": _ONE_T, "Pinned-TP4": _PINNED})


def test_multi_node_dep_replaces_a_tp_from_the_base_and_variant_args(fixture_catalog):
    command = serve_command(fixture_catalog.recipes["fixture-lab/One-T"], "default", "h200", "multi_node_dep",
                            catalog=fixture_catalog)
    assert (command.gpus, command.nodes, command.tensor_parallel_size, command.data_parallel_size) == (16, 2, 1, 16)
    for node in command.commands:
        ranks = engine_ranks("vllm", node.args)
        assert ranks is not None and (ranks.tp, ranks.dp, ranks.dp_local) == (1, 16, 8)
        assert "--tensor-parallel-size" not in node.args


def test_multi_node_tp_dp_keeps_tp_per_node_and_dp_across_nodes(fixture_catalog):
    command = serve_command(fixture_catalog.recipes["fixture-lab/One-T"], "default", "b200", "multi_node_tp_dp",
                            catalog=fixture_catalog)
    ranks = engine_ranks("vllm", command.commands[0].args)
    assert ranks is not None and (ranks.tp, ranks.dp, ranks.dp_local) == (8, command.nodes, 1)


def test_a_variants_tp_pin_is_kept_or_the_shape_is_refused_naming_it(fixture_catalog):
    recipe = fixture_catalog.recipes["fixture-lab/Pinned-TP4"]
    single = serve_command(recipe, "default", "h200", "single_node_tp", catalog=fixture_catalog)
    assert (single.gpus, single.tensor_parallel_size, single.pin) == (4, 4, "variant default pins tp: 4")
    with pytest.raises(InvalidChoice, match=r"variant default pins tp: 4 and multi_node_tp on 16 × h200 runs TP 16"):
        serve_command(recipe, "default", "h200", "multi_node_tp", catalog=fixture_catalog)
    with pytest.raises(InvalidChoice, match=r"variant default pins tp: 4 and multi_node_tp_pp"):
        serve_command(recipe, "default", "h200", "multi_node_tp_pp", catalog=fixture_catalog)
    dep = serve_command(recipe, "default", "h200", "multi_node_dep", catalog=fixture_catalog)
    ranks = engine_ranks("vllm", dep.commands[0].args)
    assert ranks is not None and (ranks.tp, ranks.dp, ranks.dp_local) == (4, 4, 2)
    assert dep.pin == "variant default pins tp: 4"


def test_upstream_fixture_files_parse_as_yaml():
    assert yaml.safe_load(_ONE_T)["model"]["base_args"][-1] == "8"
