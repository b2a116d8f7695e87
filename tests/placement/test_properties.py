"""Properties of placement over random fleets and plans: no node is over-committed, equal inputs give
equal decisions whatever their order, and every replica is either placed or explained."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from wingsmith.domain.placement import (
    ClusterInfo,
    ClusterInventory,
    NodePool,
    PlacementConstraints,
    PlacementPlan,
    place,
)

CARDS = {"h200": 8, "b200": 8, "gb200": 4, "mi355x": 8}
NAMES = [f"c{i}" for i in range(7)]


@st.composite
def pools(draw):
    hw = draw(st.sampled_from(sorted(CARDS)))
    cap = draw(st.sampled_from([CARDS[hw], CARDS[hw] // 2, 2 * CARDS[hw]]))
    # entirely free and entirely used nodes are common: multi-node replicas take only entirely free ones
    free = draw(st.one_of(st.just(cap), st.just(0), st.integers(0, cap)))
    return NodePool(hardware_id=hw, gpus_per_node=cap, free_gpus=free, nodes=draw(st.integers(1, 6)))


@st.composite
def fleets(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=6, unique=True))
    inventories = [ClusterInventory(cluster=n, pools=draw(st.lists(pools(), max_size=5)),
                                    error=draw(st.sampled_from([None] * 6 + ["unreachable"])))
                   for n in names if draw(st.integers(0, 9))]  # a few registered clusters have no inventory
    infos = [ClusterInfo(name=n, region=draw(st.sampled_from(["eu", "us"])),
                         cordoned=draw(st.sampled_from([False] * 3 + [True])),
                         labels=draw(st.dictionaries(st.sampled_from(["tier", "net"]), st.sampled_from(["a", "b"]))),
                         unplaceable=draw(st.sampled_from([None] * 6 + ["preflight failed: no Dynamo CRDs"])))
             for n in names if draw(st.integers(0, 9))]   # and a few inventories have no registration
    return inventories, infos


@st.composite
def plans(draw):
    # Constraints are unset half the time, so that many clusters pass every filter and the scores, the
    # dealing and the nodes replicas take are exercised as much as the filters.
    constraints = PlacementConstraints(
        regions=draw(st.one_of(st.just([]), st.lists(st.sampled_from(["eu", "us", "ap"]), max_size=2, unique=True))),
        allowed_clusters=draw(st.one_of(st.just([]), st.lists(st.sampled_from(NAMES), max_size=4, unique=True))),
        denied_clusters=draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)),
        required_labels=draw(st.one_of(st.just({}), st.dictionaries(st.just("net"), st.sampled_from(["a", "b"])))),
        preferred_labels=draw(st.dictionaries(st.just("tier"), st.sampled_from(["a", "b"]))),
        max_replicas_per_cluster=draw(st.one_of(st.none(), st.integers(1, 4))),
        spread=draw(st.sampled_from(["spread", "pack"])))
    # GPUs per node: any, but often the sizes recipes use, so that several pools can hold a replica
    gpus = draw(st.one_of(st.sampled_from([1, 2, 4]), st.integers(1, 16)))
    return PlacementPlan(hardware=draw(st.sampled_from(sorted(CARDS))), gpus_per_node=gpus,
                         nodes_per_replica=draw(st.one_of(st.just(1), st.integers(1, 3))),
                         replicas=draw(st.integers(1, 12)),
                         constraints=constraints)


@settings(max_examples=300, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_no_node_is_over_committed(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos)
    by_name = {i.cluster: i for i in inventories}
    for v in decision.clusters:
        used_gpus = 0
        taken = Counter()
        for use in v.node_use:
            assert use.hardware_id == plan.hardware
            assert 0 < use.gpus_taken <= use.free_before <= use.gpus_per_node
            assert use.gpus_taken % plan.gpus_per_node == 0
            if plan.nodes_per_replica > 1:
                assert use.free_before == use.gpus_per_node and use.gpus_taken == plan.gpus_per_node
            taken[(use.gpus_per_node, use.free_before)] += use.nodes
            used_gpus += use.nodes * use.gpus_taken
        available = Counter()
        for p in by_name[v.cluster].pools if v.node_use else ():
            if p.hardware_id == plan.hardware:
                available[(p.gpus_per_node, p.free_gpus)] += p.nodes
        for key, nodes in taken.items():
            assert nodes <= available[key], (v.cluster, key)
        assert used_gpus == v.replicas * plan.gpus_per_replica


@settings(max_examples=200, deadline=None)
@given(plan=plans(), fleet=fleets(), data=st.data())
def test_equal_inputs_give_equal_decisions_in_any_order(plan, fleet, data):
    inventories, infos = fleet
    first = place(plan, inventories, infos)
    shuffled_inv = data.draw(st.permutations(inventories))
    shuffled_inv = [i.model_copy(update={"pools": data.draw(st.permutations(i.pools))}) for i in shuffled_inv]
    again = place(plan, shuffled_inv, data.draw(st.permutations(infos)))
    assert again.model_dump() == first.model_dump()


@settings(max_examples=300, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_every_replica_is_placed_or_explained(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain=True)
    assert decision.placed + decision.unplaced == plan.replicas
    assert decision.placed == sum(decision.replicas.values())
    assert decision.unplaced >= 0
    limit = plan.constraints.max_replicas_per_cluster or plan.replicas
    for v in decision.clusters:
        assert v.replicas == decision.replicas.get(v.cluster, 0)
        assert v.replicas <= min(v.fits, limit)
        if not v.eligible:
            assert v.replicas == 0 and any(not f.passed for f in v.filters)
        if decision.unplaced:
            assert v.unplaced_reason
            # An eligible cluster is only left with room when a limit says so: the explanation is true.
            if v.eligible:
                assert v.replicas == min(v.fits, limit)
        else:
            assert v.unplaced_reason is None
    if plan.hardware == "mi355x":
        assert decision.placed == 0
    listed = {i.cluster for i in inventories} | {c.name for c in infos}
    assert [v.cluster for v in decision.clusters] == sorted(listed)


@settings(max_examples=200, deadline=None)
@given(plan=plans(), fleet=fleets())
def test_filtered_clusters_fail_for_the_stated_reason(plan, fleet):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain=True)
    infos_by = {c.name: c for c in infos}
    c = plan.constraints
    for v in decision.clusters:
        outcome = {f.name: f.passed for f in v.filters}
        info = infos_by.get(v.cluster)
        assert outcome["registered"] == (info is not None)
        if info is not None:
            assert outcome["cordon"] == (not info.cordoned)
            assert outcome["preflight"] == (info.unplaceable is None)
            assert outcome["region"] == (not c.regions or info.region in c.regions)
        assert outcome["denied_clusters"] == (v.cluster not in c.denied_clusters)
        assert outcome["allowed_clusters"] == (not c.allowed_clusters or v.cluster in c.allowed_clusters)
        assert v.eligible == all(outcome.values())
