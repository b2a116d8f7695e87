"""Placement: which clusters run how many replicas of a workload, and why.

Every cluster goes through the same filters, in order (filters.py): the static ones, which read its
registration and inventory, then the node ones, which read its nodes of the plan's card (nodes.py).
Clusters that pass every filter are scored, and the replicas are dealt to the best (scoring.py).

What a decision carries, so that one over 10,000 clusters stays far below Temporal's 2 MB payload
limit (explained cluster by cluster it was 3.4 MB at 10,000 clusters, about 1 MB at 1,000):
- `clusters`: a full verdict (every filter, every score term, the nodes used) for each cluster that
  receives replicas, and for each cluster the caller asks to have explained (`explain`: some names,
  or True for every cluster, which a small fleet's dry run does);
- `ruled_out`: every other cluster that fails a filter, grouped by the first filter it fails and that
  filter's reason (as the Kubernetes scheduler says "5000 node(s) had untolerated taint");
- `passed_over`: the clusters that pass every filter but took no replica (others scored higher).
Explaining a cluster never changes the replicas.

Why it is fast enough as plain code (10,000 clusters in about 30 ms of CPU, bench/placement.py): a
cluster that fails a filter costs the checks up to that filter and its name added to a group; a
cluster's pools are read only when it passes the static filters; a cluster that passes them all is
scored only if it could still be among the best (`_Shortlist`); and full verdicts, the costly part (a
few pydantic models each), are built only for the clusters explained. It keeps few objects alive
while it works (names, and tuples of numbers, which Python's cycle collector stops tracking), so the
collector has little reason to run mid-decision and walk every model of the fleet: no decision turns
the collector off, which would be a switch for the whole process.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable

from wingsmith.domain.placement.explain import grouped, summary, verdict
from wingsmith.domain.placement.filters import Failure, node_failures, static_failures
from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, PlacementDecision, PlacementPlan
from wingsmith.domain.placement.nodes import CardPool, NodeCounts, card_pools
from wingsmith.domain.placement.rules import Rules
from wingsmith.domain.placement.scoring import Ranked, ScoreFacts, ceiling, deal, preferred_carried, score

# Clusters that fail a filter, by the first filter they fail and its reason, each list in name order.
Groups = dict[Failure, list[str]]

# A dry run over a fleet up to this size explains every cluster (api/services/planning.py); the decisions
# the workflows record explain only the clusters that receive replicas on larger fleets.
EXPLAIN_EVERY_CLUSTER_UP_TO = 1_000
# The decisions the workflows record explain every cluster of a fleet this small, so a failure, the events
# and `workloads show` give each cluster's own reason ("no b300 nodes (has: h200)"); a few kB of history.
EXPLAIN_IN_WORKFLOWS_UP_TO = 64


class PlacementInputError(ValueError):
    """The inputs contradict each other (e.g. one cluster listed twice)."""


def place(plan: PlacementPlan, inventories: list[ClusterInventory], clusters: list[ClusterInfo], *,
          explain: bool | Collection[str] = False) -> PlacementDecision:
    """The decision for one plan; a caller placing several plans on one fleet builds a `FleetIndex` once.

    `explain`: clusters to give a full verdict besides those that receive replicas (names not in the
    fleet are ignored), or True for every cluster."""
    return FleetIndex(inventories, clusters).place(plan, explain=explain)


class FleetIndex:
    """A fleet as placement reads it: each cluster's registration and inventory by name, and every
    cluster named by either, in name order (so each group of a decision comes out in name order)."""

    def __init__(self, inventories: list[ClusterInventory], clusters: list[ClusterInfo]):
        self.registrations = {c.name: c for c in clusters}
        if len(self.registrations) != len(clusters):
            _refuse_repeats([c.name for c in clusters], "clusters")
        self.inventories = {i.cluster: i for i in inventories}
        if len(self.inventories) != len(inventories):
            _refuse_repeats([i.cluster for i in inventories], "inventories")
        # Usually one inventory per registration, both in name order (as the registry lists the clusters
        # and the workflows gather their inventories): then the names need no merging, sorting them is one
        # pass, and each cluster's registration and inventory stand at the same place in both lists, found
        # without a lookup (together a sixth of a decision's cost at 10,000 clusters).
        same = self.registrations.keys() == self.inventories.keys()
        self.names = sorted(self.registrations if same else self.registrations.keys() | self.inventories.keys())
        self._in_step = same and list(self.registrations) == self.names == list(self.inventories)
        self._clusters, self._inventory_list = clusters, inventories

    def candidate_count(self, plan: PlacementPlan) -> int:
        """How many clusters pass a plan's static filters and have a node with room for one of its replicas
        (a free node of `gpus_per_node` GPUs, entirely free when a replica takes several nodes)."""
        rules = Rules(plan)
        count = 0
        for name, info, inventory in self._every_cluster():
            if inventory is not None and not static_failures(name, info, inventory, rules):
                counts = NodeCounts(card_pools(inventory.pools, rules.card.id), rules.gpus, rules.nodes)
                count += bool(counts.usable)
        return count

    def place(self, plan: PlacementPlan, *, explain: bool | Collection[str] = False) -> PlacementDecision:
        rules = Rules(plan)
        found = self._filter(rules)
        # Only the best `replicas` clusters can receive one: spread deals its first round to them in
        # this order, pack fills them in this order.
        replicas = deal(heapq.nsmallest(rules.replicas, found.shortlist.ranked), rules)
        placed = sum(replicas.values())

        if explain is True:
            explained = set(self.names)
        else:
            explained = {name for name in explain or () if name in self.registrations or name in self.inventories}
        verdicts = [verdict(name, self.registrations.get(name), self.inventories.get(name),
                            found.shortlist.pools.get(name) or self._pools_of(name, rules),
                            replicas.get(name, 0), rules.replicas - placed, rules)
                    for name in sorted(explained.union(replicas))]
        ruled_out = grouped(found.failed, explained)
        passed_over = [name for name in found.passing if name not in replicas and name not in explained]
        return PlacementDecision(
            plan=plan, replicas=replicas, placed=placed, unplaced=rules.replicas - placed,
            summary=summary(rules, replicas, verdicts, ruled_out), clusters=verdicts, ruled_out=ruled_out,
            passed_over=passed_over)

    def _filter(self, rules: Rules) -> _Found:
        """Every cluster through the filters, in name order."""
        found = _Found(rules)
        card = rules.card.id
        # Clusters without a node of the card fail the node filters alike: worked out once.
        without_card = node_failures(NodeCounts((), rules.gpus, rules.nodes), rules)[0]
        for name, info, inventory in self._every_cluster():
            failures = static_failures(name, info, inventory, rules)
            if failures:
                found.fail(failures[0], name)
                continue
            assert info is not None and inventory is not None  # it passed the registered and inventory filters
            pools = card_pools(inventory.pools, card)
            if not pools:
                found.fail(without_card, name)
                continue
            counts = NodeCounts(pools, rules.gpus, rules.nodes)
            failures = node_failures(counts, rules)
            if failures:
                found.fail(failures[0], name)
                continue
            found.passing.append(name)
            found.shortlist.consider(name, counts, pools, info.labels)
        return found

    def _every_cluster(self) -> Iterable[tuple[str, ClusterInfo | None, ClusterInventory | None]]:
        """Every cluster, in name order, with its registration and its inventory (None: it has none)."""
        if self._in_step:
            return zip(self.names, self._clusters, self._inventory_list, strict=True)
        return ((name, self.registrations.get(name), self.inventories.get(name)) for name in self.names)

    def _pools_of(self, name: str, rules: Rules) -> tuple[CardPool, ...]:
        inventory = self.inventories.get(name)
        if inventory is None or inventory.error:  # its pools are never placed on
            return ()
        return card_pools(inventory.pools, rules.card.id)


def _evaluate(name: str, counts: NodeCounts, matched: int, rules: Rules) -> Ranked:
    """A cluster that passes every filter, scored (`matched`: the preferred labels it carries)."""
    return -score(ScoreFacts(counts, matched, rules), rules), name, counts.fits


class _Shortlist:
    """The clusters that pass every filter and could be among the best `replicas`, scored.

    Only the best `replicas` clusters can receive one (spread deals its first round to them, pack fills
    them in order). Clusters come in name order, so a cluster loses a tie to every cluster before it:
    if the most it could score is no more than the `replicas`-th best score so far, it cannot be among
    the best, and is not scored. On a large fleet most clusters are left out so (bench/placement.py:
    a few dozen of 2,400 scored at 10,000 clusters)."""

    def __init__(self, rules: Rules):
        self.rules = rules
        self.ranked: list[Ranked] = []
        # Their pools of the card (kept apart from `ranked`: a tuple that holds other tuples stays tracked
        # by the cycle collector longer, which makes a full collection, over the whole fleet, come sooner).
        self.pools: dict[str, tuple[CardPool, ...]] = {}
        self._best: list[float] = []  # the best `replicas` scores so far, lowest first (a heap)
        self._ceilings = [ceiling(matched, rules) for matched in range(len(rules.preferred) + 1)]

    def consider(self, name: str, counts: NodeCounts, pools: tuple[CardPool, ...], labels: dict[str, str]) -> None:
        matched = preferred_carried(labels, self.rules)
        best, wanted = self._best, self.rules.replicas
        if len(best) == wanted and self._ceilings[matched] <= best[0]:
            return
        rank = _evaluate(name, counts, matched, self.rules)
        self.ranked.append(rank)
        self.pools[name] = pools
        if len(best) < wanted:
            heapq.heappush(best, -rank[0])
        elif -rank[0] > best[0]:
            heapq.heapreplace(best, -rank[0])


class _Found:
    """Where the filters put the clusters, each list in name order."""

    __slots__ = ("passing", "shortlist", "failed")

    def __init__(self, rules: Rules) -> None:
        self.passing: list[str] = []  # the clusters that pass every filter
        self.shortlist = _Shortlist(rules)  # those of them that could be among the best, scored
        self.failed: Groups = {}  # the others, by the first filter they fail and its reason

    def fail(self, failure: Failure, name: str) -> None:
        self.failed.setdefault(failure, []).append(name)


def _refuse_repeats(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise PlacementInputError(f"{what}: cluster {name!r} appears more than once")
        seen.add(name)
