"""What keeps placement cheap on large fleets, checked by counting rather than timing (a shared machine's
clock says little): a decision reads the card of each node pool it may place on once, and the numbers of
the plan card's pools once more, and builds a verdict (the costly part: a few pydantic models each) only
for the clusters it explains; and every decision is one pydantic accepts as it is."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.test_index import random_fleet
from tests.placement.test_properties import fleets, plans
from wingsmith.domain.placement import ClusterVerdict, NodePool, PlacementDecision, PlacementPlan, place

PLAN = PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=12)


def test_a_decision_reads_each_node_pool_once(monkeypatch):
    inventories, infos = random_fleet(2_000, seed=5)
    # The pools of the clusters the static filters leave in (registered, read without error, not cordoned):
    # the others' pools are never placed on.
    open_ = {c.name for c in infos if not c.cordoned}
    read = [i for i in inventories if not i.error and i.cluster in open_]
    pools = sum(len(i.pools) for i in read)
    cards = sum(p.hardware_id == PLAN.hardware for i in read for p in i.pools)
    reads = 0
    real = NodePool.__getattribute__

    def counting(self, name):
        nonlocal reads
        reads += 1
        return real(self, name)
    monkeypatch.setattr(NodePool, "__getattribute__", counting)
    decision = place(PLAN, inventories, infos)
    monkeypatch.undo()
    assert pools > len(read) and decision.placed  # more pools than clusters: reading them would cost
    # Every pool's card once; the plan card's pools' GPUs per node, free GPUs and nodes, in one more visit.
    # No pool is read again while evaluating.
    assert reads == pools + 3 * cards


def test_a_decision_builds_verdicts_only_for_the_clusters_it_explains(monkeypatch):
    inventories, infos = random_fleet(2_000, seed=5)
    built = 0
    real = ClusterVerdict.__init__

    def counting(self, **data):
        nonlocal built
        built += 1
        real(self, **data)
    monkeypatch.setattr(ClusterVerdict, "__init__", counting)
    decision = place(PLAN, inventories, infos)
    assert built == len(decision.clusters) == len(decision.replicas) < 20  # of 2,000 clusters
    built = 0
    decision = place(PLAN, inventories, infos, explain=True)
    assert built == len(decision.clusters) == len({c.name for c in infos} | {i.cluster for i in inventories})


@settings(max_examples=150, deadline=None)
@given(plan=plans(), fleet=fleets(), large=st.booleans())
def test_decisions_are_valid_models_as_built(plan, fleet, large):
    inventories, infos = fleet
    decision = place(plan, inventories, infos, explain=not large)
    assert PlacementDecision.model_validate(decision.model_dump()) == decision
    assert PlacementDecision.model_validate_json(decision.model_dump_json()).model_dump() == decision.model_dump()
    assert decision.model_fields_set == set(PlacementDecision.model_fields)
