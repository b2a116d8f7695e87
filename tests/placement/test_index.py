"""The fleet index changes how much placement looks at, never what it decides: on random fleets the
indexed placement equals the exhaustive placement it replaced (tests/placement/reference_place.py,
frozen), in full on small fleets, and on large fleets for every cluster it explains, with every other
cluster ruled out for a reason the exhaustive placement also gave."""

from __future__ import annotations

import importlib
import random

import pytest
from hypothesis import given, settings

from tests.placement import reference_place
from tests.placement.test_properties import fleets, plans
from wingsmith.placement import (
    ClusterInfo,
    ClusterInventory,
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
def test_small_fleets_get_the_exhaustive_decision_exactly(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos)
    assert decision.ruled_out == []
    assert decision.model_dump() == {**reference_place.place(plan, inventories, infos).model_dump(), "ruled_out": []}


def assert_same_decision_grouped(decision: PlacementDecision, exhaustive: PlacementDecision) -> None:
    """`decision` explains some clusters in full and groups the others: the same as `exhaustive` wherever
    it speaks, and silent on nothing."""
    assert (decision.replicas, decision.placed, decision.unplaced) == \
           (exhaustive.replicas, exhaustive.placed, exhaustive.unplaced)
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
    for verdict in decision.clusters:
        assert verdict == before[verdict.cluster]
    ruled = [name for group in decision.ruled_out for name in group.clusters]
    assert sorted(ruled + [v.cluster for v in decision.clusters]) == sorted(before)  # each exactly once
    for group in decision.ruled_out:
        assert group.clusters == sorted(group.clusters)
        for name in group.clusters:
            old = before[name]
            assert not old.eligible and old.replicas == 0
            failed = {f.name: f.reason for f in old.filters if not f.passed}
            assert group.filter in failed, (name, group, failed)
            # Clusters without the card are one group; the exhaustive verdict also named the cards they have.
            assert failed[group.filter] == group.reason or (
                group.filter == "hardware" and failed[group.filter].startswith(group.reason)), (name, group)


@settings(max_examples=400, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_large_fleet_rule_decides_as_the_exhaustive_placement(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain_every_cluster_up_to=0)
    assert_same_decision_grouped(decision, reference_place.place(plan, inventories, infos))


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
    evaluated: list[str] = []
    real = place_module._evaluate

    def counting(name, *args, **kwargs):
        evaluated.append(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(place_module, "_evaluate", counting)
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
