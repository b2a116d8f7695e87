"""A pd_cluster pool from the strategy's block and the recipe's override of it (issue 49 item 4): its
nodes and GPUs, its size flags, each node's rendezvous flags and env, and the pins it refuses."""

from __future__ import annotations

import pytest

from wingsmith.domain.recipes.models import HardwareProfile, Override, PdRole
from wingsmith.domain.recipes.pd_pools import for_card, pd_pool
from wingsmith.domain.recipes.rules import InvalidChoice

H200 = HardwareProfile(id="h200", brand="NVIDIA", generation="hopper", display_name="H200", gpu_count=8,
                       vram_gb=141)


def test_for_card_reads_a_figure_given_once_or_per_card():
    assert for_card(2, H200) == 2
    assert for_card({"h200": 3, "default": 1}, H200) == 3
    assert for_card({"b200": 3, "default": 1}, H200) == 1
    assert for_card({"b200": 3}, H200) is None


def test_the_override_wins_over_the_strategy_and_its_card_block_comes_last():
    base = PdRole(parallelism="tep", tp=8, nodes=1, args=["--a"], env={"X": "base", "Y": "base"})
    extra = PdRole(parallelism="tp", tp=4, args=["--b"], env={"Y": "extra"},
                   hardware_overrides={"h200": Override(args=["--c"], env={"Z": "card"})})
    pool = pd_pool("prefill", base, extra, H200)
    assert (pool.parallelism, pool.tp, pool.nodes, pool.pod_gpus, pool.gpus) == ("tp", 4, 1, 4, 4)
    assert pool.args == ["--a", "--b", "--c"]
    assert pool.env == {"X": "base", "Y": "extra", "Z": "card"}
    assert pool.size_flags() == ["--tensor-parallel-size", "4"] and pool.node_flags(0) == []


def test_a_tp_pin_past_one_node_takes_whole_nodes_with_rendezvous_flags():
    pool = pd_pool("decode", PdRole(parallelism="tep", tp=16, env={"HEAD": "$DECODE_NODE_1"}), PdRole(), H200)
    assert (pool.nodes, pool.pod_gpus, pool.gpus, pool.tp_dp) == (2, 8, 16, (16, 1))
    assert pool.size_flags() == ["--tensor-parallel-size", "16", "--enable-expert-parallel"]
    assert pool.node_flags(0) == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "$DECODE_NODE_1"]
    assert pool.node_flags(1)[-1] == "--headless"
    assert pool.node_env(1) == {"HEAD": "$DECODE_NODE_2"}


def test_an_expert_data_parallel_pool_splits_sequences_over_tp_groups():
    pool = pd_pool("decode", PdRole(parallelism="dep", tp=2, nodes={"h200": 2}), PdRole(), H200)
    assert (pool.nodes, pool.gpus, pool.tp_dp) == (2, 16, (2, 8))
    assert pool.size_flags() == ["--tensor-parallel-size", "2", "--data-parallel-size", "8",
                                 "--data-parallel-size-local", "4", "--enable-expert-parallel"]
    assert pool.node_flags(1) == ["--data-parallel-start-rank", "4", "--data-parallel-address", "$DECODE_NODE_1",
                                  "--headless"]


@pytest.mark.parametrize("role, reason", [
    (PdRole(parallelism="tp", tp=12), "neither within one h200 node nor whole nodes"),
    (PdRole(parallelism="dep", tp=3), "does not divide the 8 GPUs"),
])
def test_pins_that_cannot_form_the_pool_are_refused(role, reason):
    with pytest.raises(InvalidChoice, match=reason):
        pd_pool("prefill", role, PdRole(), H200)
