"""The fleet index and the compact decision change how much placement looks at and says, never what
it decides: on random fleets the indexed placement equals the exhaustive placement it replaced
(tests/placement/reference_place.py, frozen) in full when every cluster is explained, and otherwise
for every cluster it explains, with every other cluster grouped under the first filter the exhaustive
placement saw it fail, or passed over where the exhaustive placement found it eligible and gave it nothing."""

from __future__ import annotations

import importlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement import reference_place
from tests.placement.test_properties import fleets, plans
from wingsmith.placement import (
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

place_module = importlib.import_module("wingsmith.placement.place")  # the package exports the function by that name


@settings(max_examples=400, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_every_cluster_explained_is_the_exhaustive_decision_exactly(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain=True)
    assert decision.ruled_out == [] and decision.passed_over == []
    decision = decision.model_copy(update={"clusters": [as_before_preflight(v) for v in decision.clusters]})
    assert decision.model_dump() == {**reference_place.place(plan, inventories, infos).model_dump(),
                                     "ruled_out": [], "passed_over": []}


def as_before_preflight(verdict: ClusterVerdict) -> ClusterVerdict:
    """A verdict as the oracle (older than the preflight filter) gives it: these fleets' clusters were never
    checked, so each passes the preflight filter, which the oracle does not list."""
    filters = [f for f in verdict.filters if f.name != "preflight" or not f.passed]
    assert len(filters) == len(verdict.filters) - 1, verdict.filters
    return verdict.model_copy(update={"filters": filters})


def assert_same_decision_grouped(decision: PlacementDecision, exhaustive: PlacementDecision) -> None:
    """`decision` explains some clusters in full and groups the others: the same as `exhaustive` wherever
    it speaks, and silent on nothing."""
    assert (decision.replicas, decision.placed, decision.unplaced) == \
           (exhaustive.replicas, exhaustive.placed, exhaustive.unplaced)
    assert list(decision.replicas) == list(exhaustive.replicas)  # in name order, as the summary lists them
    if not decision.unplaced:
        assert decision.summary == exhaustive.summary
    else:  # the same head; the reasons of clusters ruled out together come as one, with their count
        assert decision.summary.split(" unplaced. ")[0] == exhaustive.summary.split(" unplaced. ")[0]
        if " unplaced. " not in exhaustive.summary:  # e.g. a card that is never placed says only that
            assert decision.summary == exhaustive.summary
        else:
            for verdict in decision.clusters:
                assert f"{verdict.cluster}: {verdict.unplaced_reason}" in decision.summary
            for group in decision.ruled_out:
                assert f"{len(group.clusters)} cluster(s) (" in decision.summary and group.reason in decision.summary
    before = {v.cluster: v for v in exhaustive.clusters}
    assert [v.cluster for v in decision.clusters] == sorted(v.cluster for v in decision.clusters)
    for verdict in decision.clusters:
        assert as_before_preflight(verdict) == before[verdict.cluster]
    assert {v.cluster for v in decision.clusters} >= set(decision.replicas)  # every cluster with replicas
    ruled = [name for group in decision.ruled_out for name in group.clusters]
    # each exactly once
    assert sorted(ruled + decision.passed_over + [v.cluster for v in decision.clusters]) == sorted(before)
    assert decision.passed_over == sorted(decision.passed_over)
    for name in decision.passed_over:
        assert before[name].eligible and before[name].replicas == 0
    for group in decision.ruled_out:
        assert group.clusters == sorted(group.clusters)
        for name in group.clusters:
            old = before[name]
            assert not old.eligible and old.replicas == 0
            first = next(f for f in old.filters if not f.passed)
            assert group.filter == first.name, (name, group.filter, first)
            # Clusters without the card are one group; the exhaustive verdict also named the cards they have.
            assert first.reason == group.reason or (
                group.filter == "hardware" and first.reason.startswith(group.reason)), (name, group)


@settings(max_examples=400, deadline=None)
@given(plan=plans(), fleet=fleets(), data=st.data())
def test_a_compact_decision_decides_as_the_exhaustive_placement(plan, fleet, data):
    inventories, infos = fleet
    names = sorted({i.cluster for i in inventories} | {c.name for c in infos})
    asked = data.draw(st.lists(st.sampled_from(names), max_size=3) if names else st.just([]))
    exhaustive = reference_place.place(plan, inventories, infos)
    assert_same_decision_grouped(place(plan, inventories, infos), exhaustive)
    decision = place(plan, inventories, infos, explain=asked)
    assert_same_decision_grouped(decision, exhaustive)
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
def test_a_3000_cluster_fleet_decides_as_before(shape):
    inventories, infos = random_fleet(3_000, seed=11)
    plan = PlacementPlan(**shape)
    assert_same_decision_grouped(place(plan, inventories, infos), reference_place.place(plan, inventories, infos))


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
    # when the most its counts and labels allow could put it among the best scored so far. The bound is
    # exact for whole-node replicas and loose for single-node ones on partly free nodes and for labels;
    # pools of a product the plane does not know (no hardware id) are never the plan's card.
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
        evaluated.clear()
        decision = place(plan, inventories, infos)
        assert_same_decision_grouped(decision, reference_place.place(plan, inventories, infos))
    # the last plan: its bound is its score but for fragmentation, which whole 8-GPU nodes leave at 1
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
def test_a_10000_cluster_decision_is_under_1_mb_and_the_exhaustive_decision(seed, shape):
    inventories, infos = busy_fleet(10_000, seed)
    plan = PlacementPlan(**shape)
    decision = place(plan, inventories, infos)
    exhaustive = reference_place.place(plan, inventories, infos)
    assert len(exhaustive.model_dump_json()) > 2_000_000  # what a decision cluster by cluster would weigh
    assert len(decision.model_dump_json()) < 1_000_000
    assert decision.placed and len(decision.passed_over) > 100 and len(decision.ruled_out) > 1
    assert_same_decision_grouped(decision, exhaustive)
