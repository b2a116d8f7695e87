"""Placement decides as the rules say, however little of the fleet it looks at and says: on random
fleets a decision equals the oracle's (tests/placement/oracle.py: every cluster judged in full, node by
node) in full when every cluster is explained, and otherwise for every cluster it explains, with every
other cluster grouped under the first filter the oracle saw it fail, or passed over where the oracle
found it eligible and gave it nothing. Scoring only the clusters that could be among the best (the
shortlist) is checked to change no decision."""

from __future__ import annotations

import importlib
import random
from collections import Counter
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement import oracle
from tests.placement.test_properties import fleets, plans
from wingsmith.domain.placement import (
    ClusterInfo,
    ClusterInventory,
    ClusterVerdict,
    FleetIndex,
    NodePool,
    PlacementConstraints,
    PlacementDecision,
    PlacementPlan,
    place,
)

# The package exports the function by that name.
place_module = importlib.import_module("wingsmith.domain.placement.place")


def assert_as_oracle(verdict: ClusterVerdict, outcome: oracle.Outcome) -> None:
    """One cluster's verdict says what the oracle decided of it."""
    assert [f.name for f in verdict.filters] == [*oracle.STATIC, *oracle.NODE]
    assert [f.name for f in verdict.filters if not f.passed] == outcome.failed, verdict.cluster
    assert (verdict.eligible, verdict.fits, verdict.replicas) == (not outcome.failed, outcome.fits, outcome.replicas)
    assert verdict.score == (outcome.score if outcome.score is not None else 0.0)
    taken: Counter = Counter()
    for use in verdict.node_use:  # (an inventory may list alike nodes as two pools)
        taken[(use.gpus_per_node, use.free_before, use.gpus_taken)] += use.nodes
    assert taken == outcome.taken
    if verdict.eligible:
        assert [t.name for t in verdict.scores] == ["whole_free_nodes", "fragmentation", "labels", "spread"]
        assert sum(t.value * t.weight for t in verdict.scores[:-1]) == pytest.approx(verdict.score)


@settings(max_examples=400, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_every_cluster_explained_is_the_oracle_decision(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain=True)
    replicas, outcomes = oracle.place(plan, inventories, infos)
    assert decision.ruled_out == [] and decision.passed_over == []
    assert decision.replicas == replicas and list(decision.replicas) == sorted(replicas)
    assert (decision.placed, decision.unplaced) == (sum(replicas.values()), plan.replicas - sum(replicas.values()))
    assert [v.cluster for v in decision.clusters] == list(outcomes)
    for verdict in decision.clusters:
        assert_as_oracle(verdict, outcomes[verdict.cluster])


class Judged(NamedTuple):
    """What a decision is held to: the oracle's replicas and outcomes, and the verdicts (their words) of
    the decision that explains every cluster."""
    plan: PlacementPlan
    replicas: dict[str, int]
    outcomes: dict[str, oracle.Outcome]
    full: dict[str, ClusterVerdict]


def judge(plan: PlacementPlan, inventories: list[ClusterInventory], infos: list[ClusterInfo]) -> Judged:
    replicas, outcomes = oracle.place(plan, inventories, infos)
    every = place(plan, inventories, infos, explain=True)
    return Judged(plan, replicas, outcomes, {v.cluster: v for v in every.clusters})


def assert_same_decision_grouped(decision: PlacementDecision, judged: Judged) -> None:
    """`decision` explains some clusters in full and groups the others: the same as the oracle wherever
    it speaks, and silent on nothing; in the words of the decision that explains every cluster."""
    plan, replicas, outcomes, full = judged
    assert (decision.replicas, decision.placed, decision.unplaced) == \
           (replicas, sum(replicas.values()), plan.replicas - sum(replicas.values()))
    assert list(decision.replicas) == sorted(replicas)  # in name order, as the summary lists them
    assert [v.cluster for v in decision.clusters] == sorted(v.cluster for v in decision.clusters)
    for verdict in decision.clusters:
        assert verdict == full[verdict.cluster]
        assert_as_oracle(verdict, outcomes[verdict.cluster])
    assert {v.cluster for v in decision.clusters} >= set(decision.replicas)  # every cluster with replicas
    ruled = [name for group in decision.ruled_out for name in group.clusters]
    # each exactly once
    assert sorted(ruled + decision.passed_over + [v.cluster for v in decision.clusters]) == sorted(outcomes)
    assert decision.passed_over == sorted(decision.passed_over)
    for name in decision.passed_over:
        assert not outcomes[name].failed and outcomes[name].replicas == 0
    for group in decision.ruled_out:
        assert group.clusters == sorted(group.clusters)
        for name in group.clusters:
            assert outcomes[name].failed[:1] == [group.filter], (name, group.filter)
            first = next(f for f in full[name].filters if not f.passed)
            # Clusters without the card are one group; a verdict also names the cards they have.
            assert first.reason == group.reason or (
                group.filter == "hardware" and first.reason.startswith(group.reason)), (name, group)
    if not decision.unplaced:
        assert decision.summary.startswith(f"placed {decision.placed} replica(s) of ")
    else:  # every reason, the reasons of clusters ruled out together as one, with their count
        assert decision.summary.startswith(f"placed {decision.placed} of {plan.replicas} replica(s)") or \
            decision.summary.startswith("nothing placed: ") or decision.summary.startswith("no clusters")
        if decision.summary.startswith("placed"):
            for verdict in decision.clusters:
                assert f"{verdict.cluster}: {verdict.unplaced_reason}" in decision.summary
            for group in decision.ruled_out:
                assert f"{len(group.clusters)} cluster(s) (" in decision.summary and group.reason in decision.summary


@st.composite
def open_fleets(draw):
    """A plan and a fleet whose clusters pass the static filters and have several pools of the plan's
    card, so that the scores, the dealing and the nodes replicas take are exercised (the strategies of
    test_properties.py mostly exercise the filters)."""
    plan = PlacementPlan(
        hardware="h200", gpus_per_node=draw(st.sampled_from([1, 2, 3, 4, 8])),
        nodes_per_replica=draw(st.sampled_from([1, 1, 2, 3])), replicas=draw(st.integers(1, 20)),
        constraints=PlacementConstraints(preferred_labels=draw(st.sampled_from([{}, {"tier": "a"}])),
                                         max_replicas_per_cluster=draw(st.one_of(st.none(), st.integers(1, 4))),
                                         spread=draw(st.sampled_from(["spread", "pack"]))))
    names = draw(st.lists(st.sampled_from([f"c{i}" for i in range(7)]), min_size=1, max_size=7, unique=True))
    inventories = [ClusterInventory(cluster=name, pools=draw(st.lists(h200_pools(), min_size=1, max_size=4)))
                   for name in names]
    infos = [ClusterInfo(name=name, labels=draw(st.sampled_from([{}, {"tier": "a"}, {"tier": "b"}])))
             for name in names]
    return plan, inventories, infos


@st.composite
def h200_pools(draw):
    cap = draw(st.sampled_from([4, 8, 16]))
    free = draw(st.one_of(st.just(cap), st.integers(0, cap)))
    return NodePool(hardware_id="h200", gpus_per_node=cap, free_gpus=free, nodes=draw(st.integers(1, 6)))


@settings(max_examples=300, deadline=None)
@given(case=open_fleets(), data=st.data())
def test_clusters_that_pass_every_filter_score_and_deal_as_the_oracle(case, data):
    plan, inventories, infos = case
    judged = judge(plan, inventories, infos)
    for verdict in judged.full.values():
        assert_as_oracle(verdict, judged.outcomes[verdict.cluster])
    asked = data.draw(st.lists(st.sampled_from(sorted(judged.outcomes)), max_size=2))
    assert_same_decision_grouped(place(plan, inventories, infos, explain=asked), judged)


@settings(max_examples=400, deadline=None)
@given(plan=plans(), fleet=fleets(), data=st.data())
def test_a_compact_decision_decides_as_the_oracle(plan, fleet, data):
    inventories, infos = fleet
    names = sorted({i.cluster for i in inventories} | {c.name for c in infos})
    asked = data.draw(st.lists(st.sampled_from(names), max_size=3) if names else st.just([]))
    judged = judge(plan, inventories, infos)
    assert_same_decision_grouped(place(plan, inventories, infos), judged)
    decision = place(plan, inventories, infos, explain=asked)
    assert_same_decision_grouped(decision, judged)
    assert {v.cluster for v in decision.clusters} == set(decision.replicas) | set(asked)


def random_fleet(count: int, seed: int) -> tuple[list[ClusterInventory], list[ClusterInfo]]:
    rng = random.Random(seed)
    cards = [("h200", 8), ("b200", 8), ("gb200", 4), ("h100", 8), ("mi355x", 8)]
    inventories, infos = [], []
    for i in range(count):
        name = f"c{i:05d}"
        pools = [NodePool(hardware_id=hw, gpus_per_node=cap, nodes=rng.randint(1, 40),
                          free_gpus=rng.choice([0, cap // 2, cap, rng.randint(0, cap)]))
                 for hw, cap in rng.sample(cards, k=rng.randint(0, 3))]
        if rng.random() > 0.02:
            inventories.append(ClusterInventory(cluster=name, pools=pools,
                                                error="forbidden" if rng.random() < 0.02 else None))
        if rng.random() > 0.02:
            infos.append(ClusterInfo(name=name, region=rng.choice(["eu", "us", "ap"]), cordoned=rng.random() < 0.05,
                                     labels={"tier": rng.choice(["gold", "silver"])}))
    return inventories, infos


@pytest.mark.parametrize("shape", [dict(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=30),
                                   dict(hardware="h200", gpus_per_node=1, nodes_per_replica=1, replicas=500),
                                   dict(hardware="gb200", gpus_per_node=4, nodes_per_replica=4, replicas=7,
                                        constraints=PlacementConstraints(spread="pack", regions=["eu"])),
                                   dict(hardware="b200", gpus_per_node=8, nodes_per_replica=1, replicas=100_000),
                                   dict(hardware="mi355x", gpus_per_node=8, nodes_per_replica=1, replicas=1)])
def test_a_3000_cluster_fleet_decides_as_the_oracle(shape):
    inventories, infos = random_fleet(3_000, seed=11)
    plan = PlacementPlan(**shape)
    assert_same_decision_grouped(place(plan, inventories, infos), judge(plan, inventories, infos))


def _count_evaluated(monkeypatch) -> list[str]:
    """The names of the clusters placement scores in full, in order, from now on."""
    evaluated: list[str] = []
    real = place_module._evaluate

    def counting(name, *args, **kwargs):
        evaluated.append(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(place_module, "_evaluate", counting)
    return evaluated


@pytest.mark.parametrize("seed", range(6))
def test_scoring_only_the_clusters_that_could_be_among_the_best_decides_as_scoring_them_all(seed, monkeypatch):
    # Plans that ask for fewer replicas than the clusters that pass could take: a cluster is scored only
    # when the most it could score (its labels' term, every other term at its best) could put it among
    # the best scored so far; pools of a product the plane does not know (no hardware id) are never the
    # plan's card.
    rng = random.Random(seed)
    inventories, infos = random_fleet(400, seed)
    inventories = [inv.model_copy(update={"pools": [*inv.pools, NodePool(hardware_id=None, product="NVIDIA-X",
                                                                          gpus_per_node=8, free_gpus=8, nodes=9)]})
                   if i % 7 == 0 else inv for i, inv in enumerate(inventories)]
    evaluated = _count_evaluated(monkeypatch)
    for shape in [dict(hardware="h200", gpus_per_node=rng.choice([1, 2, 4]), replicas=rng.randint(1, 25)),
                  dict(hardware="b200", gpus_per_node=rng.choice([4, 8]), nodes_per_replica=rng.choice([2, 3]),
                       replicas=rng.randint(1, 12)),
                  dict(hardware="gb200", gpus_per_node=rng.choice([1, 2]), replicas=rng.randint(1, 40)),
                  dict(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=3)]:
        plan = PlacementPlan(**shape, constraints=PlacementConstraints(
            preferred_labels=rng.choice([{}, {"tier": "gold"}]), spread=rng.choice(["spread", "pack"]),
            max_replicas_per_cluster=rng.choice([None, 1, 3]), regions=rng.choice([[], ["eu", "us"]])))
        judged = judge(plan, inventories, infos)
        evaluated.clear()
        decision = place(plan, inventories, infos)
        assert_same_decision_grouped(decision, judged)
    # the last plan: the most a cluster can score is its score but for fragmentation, which whole 8-GPU
    # nodes leave at 1
    assert len(evaluated) < (len(decision.passed_over) + len(decision.replicas)) / 2


def test_a_plan_evaluates_only_the_clusters_that_can_hold_it(monkeypatch):
    # 5,000 clusters, 12 of which have an H200 node with 8 free GPUs: those 12 are evaluated, no other.
    inventories = [ClusterInventory(cluster=f"c{i:04d}", pools=[NodePool(hardware_id="b200", gpus_per_node=8,
                                                                        free_gpus=8, nodes=4)])
                   for i in range(5_000)]
    for i in range(0, 5_000, 417):
        inventories[i] = ClusterInventory(cluster=f"c{i:04d}", pools=[NodePool(hardware_id="h200", gpus_per_node=8,
                                                                               free_gpus=8, nodes=1)])
    for i in range(1, 5_000, 1000):  # H200 nodes, none with room
        inventories[i] = ClusterInventory(cluster=f"c{i:04d}", pools=[NodePool(hardware_id="h200", gpus_per_node=8,
                                                                               free_gpus=4, nodes=9)])
    infos = [ClusterInfo(name=i.cluster) for i in inventories]
    evaluated = _count_evaluated(monkeypatch)
    plan = PlacementPlan(hardware="h200", gpus_per_node=8, replicas=20)
    index = FleetIndex(inventories, infos)
    assert index.candidate_count(plan) == 12
    decision = index.place(plan)
    assert sorted(evaluated) == [f"c{i:04d}" for i in range(0, 5_000, 417)]
    assert decision.placed == 12 and decision.unplaced == 8
    assert {(g.filter, g.reason, len(g.clusters)) for g in decision.ruled_out} == {
        ("hardware", "no h200 nodes", 4_983),
        ("capacity", "no h200 node has 8 free GPUs (most free on one node: 4)", 5)}


def test_a_10000_cluster_decision_fits_in_a_temporal_payload():
    inventories, infos = random_fleet(10_000, seed=3)
    plan = PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=1, replicas=40,
                         constraints=PlacementConstraints(regions=["eu"], max_replicas_per_cluster=2))
    decision = place(plan, inventories, infos)
    assert decision.complete
    assert len(decision.model_dump_json()) < 2_000_000 / 2  # well inside Temporal's 2 MB per payload


def busy_fleet(count: int, seed: int) -> tuple[list[ClusterInventory], list[ClusterInfo]]:
    """Like bench/placement.py's fleet: every cluster has several cards and nearly every one has a free
    node, so thousands of clusters can hold a replica (explained one by one, 3.4 MB at 10,000)."""
    rng = random.Random(seed)
    cards = [("h200", 8), ("b200", 8), ("gb200", 4), ("h100", 8)]
    inventories, infos = [], []
    for i in range(count):
        name = f"cluster-{i:05d}"
        pools = [NodePool(hardware_id=hw, product=f"NVIDIA-{hw.upper()}", gpus_per_node=cap, free_gpus=free,
                          nodes=rng.randint(1, 64))
                 for hw, cap in rng.sample(cards, k=rng.randint(1, 3))
                 for free in sorted({cap, 0, rng.randint(0, cap), rng.randint(0, cap)})]
        inventories.append(ClusterInventory(cluster=name, pools=pools))
        infos.append(ClusterInfo(name=name, region=rng.choice(["us-east", "us-west", "eu-west", "ap-south"]),
                                 cordoned=rng.random() < 0.05, labels={"tier": rng.choice(["gold", "silver"])}))
    return inventories, infos


@pytest.mark.parametrize("seed, shape", [
    (1, dict(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=8,
             constraints=PlacementConstraints(regions=["us-east", "eu-west"], preferred_labels={"tier": "gold"},
                                              max_replicas_per_cluster=2))),
    (2, dict(hardware="b200", gpus_per_node=2, replicas=300, constraints=PlacementConstraints(spread="pack"))),
    (3, dict(hardware="gb200", gpus_per_node=4, nodes_per_replica=4, replicas=50,
             constraints=PlacementConstraints(denied_clusters=["cluster-00003"], required_labels={"tier": "gold"}))),
])
def test_a_10000_cluster_decision_is_under_1_mb_and_the_oracle_decision(seed, shape):
    inventories, infos = busy_fleet(10_000, seed)
    plan = PlacementPlan(**shape)
    decision = place(plan, inventories, infos)
    every = place(plan, inventories, infos, explain=True)
    assert len(every.model_dump_json()) > 2_000_000  # what a decision cluster by cluster would weigh
    assert len(decision.model_dump_json()) < 1_000_000
    assert decision.placed and len(decision.passed_over) > 100 and len(decision.ruled_out) > 1
    assert_same_decision_grouped(decision, judge(plan, inventories, infos))
