"""Table tests for placement. Shapes come from NVIDIA Dynamo's published recipes
(/work/shared/upstream/dynamo/recipes): Kimi K2.6 on one 8×H200 node (agg-h200-chat, TP 8), Kimi K3 on
four 4-GPU GB200 nodes (agg-gb200-agentic, multinode nodeCount 4, TP 16), gpt-oss-120b as 1-GPU
replicas on H200 (agg-h200-agentic), Llama 3 70B on 4 GPUs (agg, TP 4)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wingsmith.domain.placement import (
    ClusterInfo,
    ClusterInventory,
    NodePool,
    PlacementConstraints,
    PlacementDecision,
    PlacementInputError,
    PlacementPlan,
)
from wingsmith.domain.placement import place as place_compactly

KIMI_K26_H200 = dict(hardware="h200", gpus_per_node=8, nodes_per_replica=1)
KIMI_K3_GB200 = dict(hardware="gb200", gpus_per_node=4, nodes_per_replica=4)
GPT_OSS_H200 = dict(hardware="h200", gpus_per_node=1, nodes_per_replica=1)
LLAMA70B_H100 = dict(hardware="h100", gpus_per_node=4, nodes_per_replica=1)
TWO_WHOLE_H200 = dict(hardware="h200", gpus_per_node=8, nodes_per_replica=2)


def place(plan: PlacementPlan, inventories: list[ClusterInventory], clusters: list[ClusterInfo]) -> PlacementDecision:
    """These tables read each cluster's verdict, so every cluster is explained (a decision the workflow
    records explains only the clusters that receive replicas: see the end of this module)."""
    return place_compactly(plan, inventories, clusters, explain=True)


def pool(hw: str | None, cap: int, free: int, nodes: int) -> NodePool:
    return NodePool(hardware_id=hw, product=f"NVIDIA-{(hw or 'X').upper()}", gpus_per_node=cap,
                    free_gpus=free, nodes=nodes)


def fleet(spec: dict[str, list[NodePool]], **infos) -> tuple[list[ClusterInventory], list[ClusterInfo]]:
    inventories = [ClusterInventory(cluster=name, pools=pools) for name, pools in spec.items()]
    clusters = [ClusterInfo(name=name, **infos.get(name, {})) for name in spec]
    return inventories, clusters


def plan(shape: dict, replicas: int, **constraints) -> PlacementPlan:
    return PlacementPlan(**shape, replicas=replicas, constraints=PlacementConstraints(**constraints))


def verdict(decision: PlacementDecision, cluster: str):
    return next(v for v in decision.clusters if v.cluster == cluster)


def failed(decision: PlacementDecision, cluster: str) -> dict[str, str]:
    return {f.name: f.reason for f in verdict(decision, cluster).filters if not f.passed}


# --- capacity ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, pools, expected_fits", [
    (KIMI_K26_H200, [pool("h200", 8, 8, 3)], 3),
    (KIMI_K26_H200, [pool("h200", 8, 8, 2), pool("h200", 8, 7, 5)], 2),      # 7 free never holds 8
    (GPT_OSS_H200, [pool("h200", 8, 8, 1), pool("h200", 8, 3, 2)], 14),     # 8 + 3 + 3 one-GPU replicas
    (LLAMA70B_H100, [pool("h100", 8, 8, 2), pool("h100", 8, 4, 1)], 5),     # 2 per whole node + 1
    (KIMI_K3_GB200, [pool("gb200", 4, 4, 9)], 2),                            # 9 whole nodes, 4 per replica
    (KIMI_K3_GB200, [pool("gb200", 4, 4, 3), pool("gb200", 4, 2, 8)], 0),    # partly free nodes never combine
    (TWO_WHOLE_H200, [pool("h200", 8, 8, 5), pool("b200", 8, 8, 10)], 2),   # other cards don't count
])
def test_fits_counts_replicas_the_free_nodes_hold(shape, pools, expected_fits):
    inventories, clusters = fleet({"a": pools})
    decision = place(plan(shape, 50), inventories, clusters)
    assert verdict(decision, "a").fits == expected_fits
    assert decision.placed == expected_fits
    assert decision.unplaced == 50 - expected_fits


def test_more_replicas_than_capacity_are_explained_per_cluster():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)], "b": [pool("h200", 8, 8, 1)],
                                   "c": [pool("b200", 8, 8, 4)]})
    decision = place(plan(KIMI_K26_H200, 5), inventories, clusters)
    assert decision.replicas == {"a": 2, "b": 1}
    assert (decision.placed, decision.unplaced, decision.complete) == (3, 2, False)
    assert "full" in verdict(decision, "a").unplaced_reason
    assert "full" in verdict(decision, "b").unplaced_reason
    reason = verdict(decision, "c").unplaced_reason
    assert "no h200 nodes" in reason and "b200" in reason
    assert "2 unplaced" in decision.summary
    # The summary (the workflow's failure, the events, CLI and console) carries every reason itself.
    for name in ("a", "b", "c"):
        assert f"{name}: {verdict(decision, name).unplaced_reason}" in decision.summary
    assert "no h200 nodes (has: b200)" in decision.summary


def test_complete_placement_has_no_unplaced_reasons():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)], "b": [pool("b200", 8, 8, 1)]})
    decision = place(plan(KIMI_K26_H200, 2), inventories, clusters)
    assert decision.complete and decision.replicas == {"a": 2}
    assert all(v.unplaced_reason is None for v in decision.clusters)
    assert decision.summary.startswith("placed 2 replica(s)")


# --- fragmentation ----------------------------------------------------------------------------------

def test_two_half_free_nodes_do_not_hold_a_replica_needing_two_whole_nodes():
    inventories, clusters = fleet({"half": [pool("h200", 8, 4, 2)], "whole": [pool("h200", 8, 8, 2)]})
    decision = place(plan(TWO_WHOLE_H200, 2), inventories, clusters)
    assert decision.replicas == {"whole": 1}
    reason = failed(decision, "half")["capacity"]
    assert "2 entirely free h200 nodes" in reason and "2 partly free" in reason
    use = verdict(decision, "whole").node_use
    assert [(u.free_before, u.nodes, u.gpus_taken) for u in use] == [(8, 2, 8)]


def test_multi_node_replica_with_fewer_gpus_per_node_still_takes_whole_nodes():
    # 2 nodes × 4 GPUs: the 4-free halves of 8-GPU nodes do not count, whole nodes do.
    inventories, clusters = fleet({"a": [pool("h200", 8, 4, 6), pool("h200", 8, 8, 2)]})
    decision = place(plan(dict(hardware="h200", gpus_per_node=4, nodes_per_replica=2), 3), inventories, clusters)
    assert decision.replicas == {"a": 1}


def test_single_node_replica_fills_partly_used_node_before_breaking_a_whole_one():
    inventories, clusters = fleet({"a": [pool("h100", 8, 8, 3), pool("h100", 8, 4, 1), pool("h100", 8, 2, 4)]})
    decision = place(plan(LLAMA70B_H100, 1), inventories, clusters)
    [use] = verdict(decision, "a").node_use
    assert (use.free_before, use.nodes, use.gpus_taken) == (4, 1, 4)


def test_fragmentation_score_prefers_the_cluster_it_fills_exactly():
    # Both clusters fit one replica; "b" is named later but its node is already half used.
    inventories, clusters = fleet({"a": [pool("h100", 8, 8, 1)], "b": [pool("h100", 8, 4, 1)]})
    decision = place(plan(LLAMA70B_H100, 1, spread="pack"), inventories, clusters)
    assert decision.replicas == {"b": 1}
    frag = {v.cluster: next(s for s in v.scores if s.name == "fragmentation").value for v in decision.clusters}
    assert frag == {"a": 0.5, "b": 1.0}


def test_one_gpu_replicas_pack_into_one_node():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)]})
    decision = place(plan(GPT_OSS_H200, 8), inventories, clusters)
    [use] = verdict(decision, "a").node_use
    assert (use.nodes, use.gpus_taken) == (1, 8)


# --- regions, spread, limits, labels ------------------------------------------------------------------

def test_regions_filter_clusters():
    inventories, clusters = fleet({"east": [pool("gb200", 4, 4, 8)], "west": [pool("gb200", 4, 4, 8)]},
                                  east={"region": "us-east"}, west={"region": "us-west"})
    decision = place(plan(KIMI_K3_GB200, 2, regions=["us-west"]), inventories, clusters)
    assert decision.replicas == {"west": 2}
    assert failed(decision, "east") == {"region": "region us-east is not one of us-west"}


def test_spread_deals_round_robin_and_pack_fills_the_best_first():
    spec = {"a": [pool("h200", 8, 8, 4)], "b": [pool("h200", 8, 8, 4)], "c": [pool("h200", 8, 8, 4)]}
    inventories, clusters = fleet(spec)
    assert place(plan(KIMI_K26_H200, 5), inventories, clusters).replicas == {"a": 2, "b": 2, "c": 1}
    assert place(plan(KIMI_K26_H200, 5, spread="pack"), inventories, clusters).replicas == {"a": 4, "b": 1}


def test_spread_follows_score_order_not_only_names():
    # "z" has more whole free nodes, so it ranks first and gets the odd replica.
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 1)], "z": [pool("h200", 8, 8, 6)]})
    decision = place(plan(KIMI_K26_H200, 3), inventories, clusters)
    assert decision.replicas == {"a": 1, "z": 2}
    assert verdict(decision, "z").score > verdict(decision, "a").score


def test_max_replicas_per_cluster():
    spec = {"a": [pool("h200", 8, 8, 4)], "b": [pool("h200", 8, 8, 4)]}
    inventories, clusters = fleet(spec)
    decision = place(plan(KIMI_K26_H200, 3, max_replicas_per_cluster=1, spread="pack"), inventories, clusters)
    assert decision.replicas == {"a": 1, "b": 1}
    assert verdict(decision, "a").unplaced_reason == "holds the most replicas allowed per cluster (1)"


def test_labels_required_and_preferred():
    spec = {"a": [pool("h200", 8, 8, 2)], "b": [pool("h200", 8, 8, 2)], "c": [pool("h200", 8, 8, 2)]}
    inventories, clusters = fleet(spec, a={"labels": {"tier": "silver"}},
                                  b={"labels": {"tier": "silver", "net": "ib"}},
                                  c={"labels": {"tier": "gold", "net": "ib"}})
    decision = place(plan(KIMI_K26_H200, 1, required_labels={"net": "ib"}, preferred_labels={"tier": "gold"}),
                     inventories, clusters)
    assert decision.replicas == {"c": 1}
    assert failed(decision, "a") == {"required_labels": "lacks label(s) net=ib"}
    labels = next(s for s in verdict(decision, "b").scores if s.name == "labels")
    assert labels.value == 0.0


# --- cordons, lists, registration, inventories --------------------------------------------------------

def test_cordoned_cluster_takes_nothing():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 8)], "b": [pool("h200", 8, 8, 1)]},
                                  a={"cordoned": True})
    decision = place(plan(KIMI_K26_H200, 2), inventories, clusters)
    assert decision.replicas == {"b": 1}
    assert failed(decision, "a") == {"cordon": "cordoned: takes no new replicas"}
    assert verdict(decision, "a").unplaced_reason.startswith("filtered out by cordon")


def test_allowed_and_denied_clusters():
    spec = {name: [pool("h200", 8, 8, 1)] for name in ("a", "b", "c")}
    inventories, clusters = fleet(spec)
    decision = place(plan(KIMI_K26_H200, 3, allowed_clusters=["a", "b"], denied_clusters=["b"]),
                     inventories, clusters)
    assert decision.replicas == {"a": 1}
    assert failed(decision, "b") == {"denied_clusters": "in the denied clusters"}
    assert failed(decision, "c") == {"allowed_clusters": "not in the allowed clusters"}


def test_missing_failed_and_unregistered_inventories():
    inventories = [ClusterInventory(cluster="broken", error="API server unreachable"),
                   ClusterInventory(cluster="stranger", pools=[pool("h200", 8, 8, 1)])]
    clusters = [ClusterInfo(name="broken"), ClusterInfo(name="unread")]
    decision = place(plan(KIMI_K26_H200, 1), inventories, clusters)
    assert decision.placed == 0
    assert failed(decision, "broken")["inventory"] == "inventory read failed: API server unreachable"
    assert "no inventory" in failed(decision, "unread")["inventory"]
    assert failed(decision, "stranger") == {
        "registered": "not registered: an inventory was given for an unknown cluster"}
    assert [v.cluster for v in decision.clusters] == ["broken", "stranger", "unread"]


def test_unlabelled_gpu_nodes_are_named_in_the_reason():
    inventories = [ClusterInventory(cluster="a", unlabelled_gpu_nodes=3)]
    decision = place(plan(KIMI_K26_H200, 1), inventories, [ClusterInfo(name="a")])
    assert "3 GPU node(s) carry no nvidia.com/gpu.product label" in failed(decision, "a")["hardware"]


def test_nodes_too_small_for_the_replica():
    inventories, clusters = fleet({"a": [pool("gb200", 4, 4, 16)]})
    decision = place(plan(dict(hardware="gb200", gpus_per_node=8), 1), inventories, clusters)
    assert failed(decision, "a")["node_shape"] == "its largest gb200 node has 4 GPUs; a replica needs 8 per node"


# --- hardware -----------------------------------------------------------------------------------------

def test_non_nvidia_hardware_is_never_placed():
    inventories, clusters = fleet({"amd": [pool("mi355x", 8, 8, 16)]})
    decision = place(plan(dict(hardware="mi355x", gpus_per_node=8), 1), inventories, clusters)
    assert decision.placed == 0 and decision.replicas == {}
    assert "only NVIDIA" in failed(decision, "amd")["hardware"]
    assert "AMD" in decision.summary


def test_unknown_hardware_is_rejected_naming_the_known_ids():
    with pytest.raises(ValidationError, match="unknown hardware 'h900'.*h200"):
        PlacementPlan(hardware="h900", gpus_per_node=8, replicas=1)


def test_hardware_id_is_case_insensitive():
    assert PlacementPlan(hardware="H200", gpus_per_node=8, replicas=1).hardware == "h200"


@pytest.mark.parametrize("field, value", [("gpus_per_node", 0), ("replicas", 0), ("nodes_per_replica", 0)])
def test_bad_plan_numbers_are_rejected(field, value):
    with pytest.raises(ValidationError, match=field):
        PlacementPlan(**{**KIMI_K26_H200, "replicas": 1, field: value})


def test_pool_cannot_have_more_free_than_allocatable():
    with pytest.raises(ValidationError, match="free_gpus .9. exceeds gpus_per_node .8."):
        pool("h200", 8, 9, 1)


def test_a_cluster_listed_twice_is_an_error():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 1)]})
    with pytest.raises(PlacementInputError, match="'a' appears more than once"):
        place(plan(KIMI_K26_H200, 1), inventories * 2, clusters)
    with pytest.raises(PlacementInputError, match="clusters: cluster 'a' appears more than once"):
        place(plan(KIMI_K26_H200, 1), inventories * 2, clusters * 2)


def test_no_clusters_at_all():
    decision = place(plan(KIMI_K26_H200, 2), [], [])
    assert (decision.placed, decision.unplaced, decision.clusters) == (0, 2, [])
    assert decision.summary.startswith("no clusters")


def test_decision_round_trips_through_json():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)], "b": [pool("h200", 8, 4, 2)]})
    decision = place(plan(TWO_WHOLE_H200, 2), inventories, clusters)
    again = PlacementDecision.model_validate_json(decision.model_dump_json())
    assert again == decision


# --- what a recorded decision carries ---------------------------------------------------------------

def test_a_decision_explains_in_full_only_the_clusters_that_receive_replicas():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)], "b": [pool("h200", 8, 8, 1)],
                                   "c": [pool("h200", 8, 8, 4)], "d": [pool("b200", 8, 8, 4)],
                                   "e": [pool("h200", 8, 8, 4)], "f": [pool("h200", 8, 8, 4)]},
                                  e={"cordoned": True}, f={"cordoned": True})
    two = plan(KIMI_K26_H200, 2, spread="pack")
    explained = place(two, inventories, clusters)
    decision = place_compactly(two, inventories, clusters)
    assert decision.replicas == explained.replicas == {"c": 2}
    assert decision.clusters == [verdict(explained, "c")]
    assert [(g.filter, g.reason, g.clusters) for g in decision.ruled_out] == [
        ("cordon", "cordoned: takes no new replicas", ["e", "f"]), ("hardware", "no h200 nodes", ["d"])]
    assert decision.passed_over == ["a", "b"]  # eligible, scored lower than c
    assert decision.summary == explained.summary
    # Asked for, a cluster is explained in full as well, whatever its outcome.
    asked = place_compactly(two, inventories, clusters, explain=["d", "a", "nowhere"])
    assert [v.cluster for v in asked.clusters] == ["a", "c", "d"]
    assert asked.clusters == [verdict(explained, name) for name in ("a", "c", "d")]
    assert asked.passed_over == ["b"] and asked.ruled_out == decision.ruled_out[:1]


def test_an_unplaced_decision_names_every_reason_in_its_summary():
    inventories, clusters = fleet({"a": [pool("h200", 8, 8, 2)], "c": [pool("b200", 8, 8, 4)]})
    decision = place_compactly(plan(KIMI_K26_H200, 5), inventories, clusters)
    assert [v.cluster for v in decision.clusters] == ["a"] and decision.passed_over == []
    assert "a: full: its free nodes hold 2 replica(s)" in decision.summary
    assert "1 cluster(s) (c): filtered out by hardware: no h200 nodes" in decision.summary


# --- the words of a verdict -------------------------------------------------------------------------------

def test_a_verdict_words_every_filter_and_score_term():
    # What a person reads for a cluster that passes everything, one that fails every static filter and has
    # no node of the card, and the words of filters a plan leaves unset (property tests check the outcomes).
    inventories = [ClusterInventory(cluster="a", pools=[pool("h200", 8, 8, 2), pool("h200", 8, 4, 1)]),
                   ClusterInventory(cluster="b", pools=[pool("b200", 8, 8, 2)], unlabelled_gpu_nodes=2),
                   ClusterInventory(cluster="c", source="manual", pools=[pool("h200", 4, 4, 3)])]
    clusters = [ClusterInfo(name="a", region="eu", labels={"net": "ib", "tier": "gold"}),
                ClusterInfo(name="b", cordoned=True, unplaceable="its Dynamo CRDs are missing", region="us"),
                ClusterInfo(name="c", region="eu", labels={"net": "ib"})]
    decision = place(plan(LLAMA70B_H100 | {"hardware": "h200"}, 3, regions=["eu"], required_labels={"net": "ib"},
                          preferred_labels={"tier": "gold"}, allowed_clusters=["a", "c"], denied_clusters=["b"]),
                     inventories, clusters)
    a, b, c = (verdict(decision, name) for name in "abc")
    assert [(f.name, f.passed, f.reason) for f in a.filters] == [
        ("registered", True, "registered"), ("inventory", True, "live inventory"), ("cordon", True, "not cordoned"),
        ("preflight", True, "its last preflight check passed, or it was never checked"),
        ("allowed_clusters", True, "in the allowed clusters"), ("denied_clusters", True, "not denied"),
        ("region", True, "region eu is allowed"), ("required_labels", True, "carries the required labels"),
        ("hardware", True, "3 h200 node(s)"), ("node_shape", True, "h200 nodes with 4+ GPUs: 3"),
        ("capacity", True, "free nodes hold 5 replica(s) of 4 h200 GPU(s)")]
    assert [(t.name, t.value, t.weight, t.detail) for t in a.scores] == [
        ("whole_free_nodes", 1.0, 1.0, "2 of 2 entirely free h200 node(s) stay free after one replica lands; "
                                       "all replicas on whole nodes would take 2"),
        ("fragmentation", 1.0, 1.0, "one replica here leaves 0 of 8 GPUs idle on the node(s) it uses "
                                    "(1.0: it fills them exactly)"),
        ("labels", 1.0, 1.0, "carries 1 of 1 preferred label(s)"),
        ("spread", 2.0, -40.0, "spread: 2 replica(s) here; lowers its score by 40 per replica already here, "
                               "so replicas go round-robin")]
    assert [(u.gpus_per_node, u.free_before, u.nodes, u.gpus_taken) for u in a.node_use] == [(8, 4, 1, 4), (8, 8, 1, 4)]
    assert [(f.name, f.passed, f.reason) for f in b.filters] == [
        ("registered", True, "registered"), ("inventory", True, "live inventory"),
        ("cordon", False, "cordoned: takes no new replicas"), ("preflight", False, "its Dynamo CRDs are missing"),
        ("allowed_clusters", False, "not in the allowed clusters"),
        ("denied_clusters", False, "in the denied clusters"),
        ("region", False, "region us is not one of eu"), ("required_labels", False, "lacks label(s) net=ib"),
        ("hardware", False, "no h200 nodes (has: b200); 2 GPU node(s) carry no nvidia.com/gpu.product label"),
        ("node_shape", False, "no h200 nodes to hold 4 GPUs per node"), ("capacity", False, "no node of this shape")]
    assert (b.scores, b.score, b.fits) == ([], 0.0, 0)
    assert (c.filters[1].reason, c.score, c.scores[0].value, c.scores[2].detail) == (
        "manual inventory", 1.666666667, 2 / 3, "carries 0 of 1 preferred label(s)")
    assert decision.summary == "placed 3 replica(s) of 4 h200 GPU(s) on 2 cluster(s): a=2, c=1"

    unset = place_compactly(plan(TWO_WHOLE_H200, 1), inventories, clusters, explain=["a"])
    [a] = unset.clusters
    assert [f.reason for f in a.filters if f.name in ("allowed_clusters", "region", "required_labels", "capacity")] \
        == ["no allow-list", "any region", "no required labels",
            "free nodes hold 1 replica(s) of 8 h200 GPU(s) × 2 nodes"]
    assert [(t.name, t.value, t.detail) for t in a.scores[:3]] == [
        ("whole_free_nodes", 0.0, "0 of 2 entirely free h200 node(s) stay free after one replica lands; all replicas "
                                  "on whole nodes would take 2"),
        ("fragmentation", 1.0, "one replica here leaves 0 of 16 GPUs idle on the node(s) it uses "
                               "(1.0: it fills them exactly)"),
        ("labels", 1.0, "no preferred labels")]
