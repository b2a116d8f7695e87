"""Placement: which clusters run how many replicas of a workload, and why.

Every cluster goes through the same filters, in order: registered, inventory, cordon, preflight
(its last preflight check passed, or it was never checked), allowed_clusters, denied_clusters, region,
required_labels (the *static* filters: they do not look at nodes), then hardware, node_shape and
capacity. Clusters that pass are scored; replicas are then
handed out one at a time to the cluster with the highest score, where the spread term (replicas
already there) outweighs every other term together: `spread` deals replicas round-robin over the best
clusters, `pack` fills the best cluster before the next. Ties break by cluster name, so equal inputs
give equal decisions whatever their order.

What a decision carries, so that one over 10,000 clusters stays far below Temporal's 2 MB payload
limit (explained cluster by cluster it was 3.4 MB at 10,000 clusters, about 1 MB at 1,000):
- `clusters`: a full verdict (every filter, every score term, the nodes used) for each cluster that
  receives replicas, and for each cluster the caller asks to have explained (`explain`: some names,
  or True for every cluster, which a small fleet's dry run does);
- `ruled_out`: every other cluster that fails a filter, grouped by the first filter it fails and that
  filter's reason (as the Kubernetes scheduler says "5000 node(s) had untolerated taint");
- `passed_over`: the clusters that pass every filter but took no replica (others scored higher).
Explaining a cluster never changes the replicas.

How it stays cheap on a large fleet (the cost is mostly reading the inputs: the models lie far apart
in memory, and every visit to one costs cache misses, more than the work done with what it holds):
- a `FleetIndex` reads what every cluster needs in C (`attrgetter` over whole lists, one visit per
  model, the columns by transposing); the pools of the clusters that pass the plan's static filters
  become one flat table of (GPUs per node, free GPUs, nodes) rows of the plan's card, with each
  cluster's span in it: every pool is read once for its card and, for the plan's card only, once for
  its numbers (a pool is a slotted dataclass, models.py: one object per visit, not three);
- the static filters depend on a few facts most clusters share: they are decided once per distinct
  combination, and the clusters that fail them are grouped without building anything per cluster;
- whether a cluster passes the node filters (the replicas its free nodes hold) and its entirely free
  nodes are sums over its span of columns of the table, C-level passes; only the best `replicas` of
  the clusters that pass can receive one (spread deals the first round to the best clusters in
  order, pack fills the best first), so a cluster is scored (`_evaluate`) only if the most its
  counts and labels allow (`_Bound`) could still put it among the best scored so far; the others
  are passed over by name, which is all a decision says of them (the bound never changes a decision);
- full verdicts are built only for the clusters explained, and without validating again (`_built`).

Node rules:
- a replica uses `gpus_per_node` GPUs on each of `nodes_per_replica` nodes of the plan's card;
- a single-node replica may share a node with others if the node has that many free GPUs; it goes
  to the fullest node that still fits (best fit), so whole nodes stay whole;
- a multi-node replica takes only nodes that are entirely free: its ranks talk over the nodes'
  NICs and NVLink domain, which a co-tenant would share. So two half-free 8-GPU nodes never hold a
  replica needing two whole 8-GPU nodes (16 free GPUs are not two free nodes);
- only NVIDIA cards are placed (serving goes through Dynamo).
"""

from __future__ import annotations

import contextlib
import gc
import heapq
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import accumulate, chain, compress, filterfalse, islice, repeat
from math import inf
from operator import and_, attrgetter, eq, floordiv, ge, gt, is_not, itemgetter, lt, mul, not_, sub
from typing import Any, TypeVar

from pydantic import BaseModel

from wingsmith.hardware import Hardware, get_hardware
from wingsmith.placement.models import (
    ClusterInfo,
    ClusterInventory,
    ClusterVerdict,
    FilterResult,
    NodePool,
    NodeUse,
    PlacementDecision,
    PlacementPlan,
    RuledOut,
    ScoreTerm,
)

# A dry run over a fleet up to this size explains every cluster (api/routes/clusters.py); the decisions
# the workflows record explain only the clusters that receive replicas on larger fleets.
EXPLAIN_EVERY_CLUSTER_UP_TO = 1_000
# The decisions the workflows record explain every cluster of a fleet this small, so a failure, the events
# and `workloads show` give each cluster's own reason ("no b300 nodes (has: h200)"); a few kB of history.
EXPLAIN_IN_WORKFLOWS_UP_TO = 64
WEIGHTS = {"whole_free_nodes": 1.0, "fragmentation": 1.0, "labels": 1.0}
# Larger than the other weights together, so the spread term decides before any other.
SPREAD_WEIGHT = 10.0 * (1 + sum(WEIGHTS.values()))


T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
# A pool of the plan's card as placement reads it: (GPUs per node, free GPUs, nodes).
Pool = tuple[int, int, int]
# Nodes a replica can use: (free GPUs per node, GPUs per node, nodes).
Usable = tuple[int, int, int]
# What placement reads of a cluster's registration: (name, cordoned, region, labels, why it is unplaceable).
InfoRow = tuple[str, bool, str, dict[str, str], str | None]
# ... and of its inventory: (cluster, error, source, unlabelled GPU nodes, pools).
InventoryRow = tuple[str, str | None, str, int, list[NodePool]]
# A cluster that passes every filter: (-score, name, fits, where its rows start and end on the shelf,
# its place among the registrations); its order is the order replicas go in.
Ranked = tuple[float, str, int, int, int, int]

_UNREGISTERED: InfoRow = ("", False, "", {}, None)
_NO_INVENTORY: InventoryRow = ("", None, "", 0, [])
_NO_LABELS: dict[str, str] = {}  # no inventory at all, as against one read without error (None) or with one

# Attribute readers that run in C over whole lists (map/compress): on 10,000 clusters a Python loop
# that visits every object costs more than the rest of a decision.
_NAME, _CLUSTER = attrgetter("name"), attrgetter("cluster")
_ERROR, _POOLS = attrgetter("error"), attrgetter("pools")
_CORDONED, _REGION = attrgetter("cordoned"), attrgetter("region")
_INFO = attrgetter("name", "cordoned", "region", "labels", "unplaceable")
_INFO_FACTS = attrgetter("name", "cordoned", "region", "labels", "unplaceable")
_INVENTORY_FACTS = attrgetter("cluster", "error", "pools")
_INVENTORY = attrgetter("cluster", "error", "source", "unlabelled_gpu_nodes", "pools")
_CARD, _NUMBERS = attrgetter("hardware_id"), attrgetter("gpus_per_node", "free_gpus", "nodes")
_SECOND = itemgetter(1)


class PlacementInputError(ValueError):
    """The inputs contradict each other (e.g. one cluster listed twice)."""


def place(plan: PlacementPlan, inventories: list[ClusterInventory], clusters: list[ClusterInfo], *,
          explain: bool | Collection[str] = False) -> PlacementDecision:
    """The decision for one plan; a caller placing several plans on one fleet builds a `FleetIndex` once.

    `explain`: clusters to give a full verdict besides those that receive replicas (names not in the
    fleet are ignored), or True for every cluster."""
    with _no_cyclic_gc():
        return FleetIndex(inventories, clusters).place(plan, explain=explain)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    # A decision over thousands of clusters allocates tens of thousands of small objects, none in a
    # reference cycle; letting the cyclic collector run in the middle only rescans the (large,
    # long-lived) inventories and doubles the tail latency. Reference counting frees everything.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


# --- the index --------------------------------------------------------------------------------------

class _Shelf:
    """The pools of the plan's card, of the clusters that pass the static filters, as one flat table of
    rows (GPUs per node, free GPUs, nodes), each cluster's rows adjacent, and where they start and end.
    What the node filters and the score count per cluster (nodes with room, entirely free nodes) are
    then sums over each cluster's span of a column, a few C-level passes over the table."""

    __slots__ = ("rows", "given", "names", "positions", "starts", "ends", "has", "_caps", "_frees", "_counts")

    def __init__(self, card_id: str, names: Sequence[str], pool_lists: list[list[NodePool]], positions: Iterable[int]):
        sizes = list(accumulate(map(len, pool_lists)))  # where each cluster's pools end among them all
        # Every pool model is read for its card; only the card's pools for their numbers (the pools are
        # chained twice rather than listed once: listing them would touch every pool model again).
        mine = list(map(eq, map(_CARD, chain.from_iterable(pool_lists)), repeat(card_id)))
        self.rows: list[Pool] = list(map(_NUMBERS, compress(chain.from_iterable(pool_lists), mine)))
        # Each cluster's rows: from the count of the card's pools before its pools to the count up to their end.
        before = [0, *accumulate(mine)]
        ends = list(map(before.__getitem__, sizes))
        starts = [0, *ends][:-1]
        self.given = names
        self.has = list(map(lt, starts, ends))  # by cluster given: it has pools of the card
        self.names = list(compress(names, self.has))
        self.positions = list(compress(positions, self.has))  # among the registrations
        self.starts, self.ends = list(compress(starts, self.has)), list(compress(ends, self.has))
        self._caps, self._frees, self._counts = _columns(self.rows, 3)

    def holding(self, g: int, n: int) -> list[bool]:
        """By cluster of the shelf: it has a node with `g` free GPUs (n == 1) or an entirely free node of
        `g`+ GPUs (n > 1)."""
        if n == 1:
            room: Iterable[bool] = map(ge, self._frees, repeat(g))
        else:
            room = map(and_, map(eq, self._frees, self._caps), map(ge, self._caps, repeat(g)))
        before = [0, *accumulate(room)]  # rows with room before each row: a cluster holds if its span adds some
        at = before.__getitem__
        return list(map(lt, map(at, self.starts), map(at, self.ends)))

    def fits(self, g: int, n: int) -> tuple[list[int], list[int]]:
        """By cluster of the shelf: the replicas its free nodes hold and its entirely free nodes of `g`+
        GPUs, as `_node_counts` counts them."""
        caps, frees, counts = self._caps, self._frees, self._counts
        wholes = self._sums(map(mul, counts, map(and_, map(eq, frees, caps), map(ge, caps, repeat(g)))))
        if n > 1:
            return list(map(floordiv, wholes, repeat(n))), wholes
        # a node with `free` free GPUs holds free // g replicas (none when it is smaller than g)
        return self._sums(map(mul, counts, map(floordiv, frees, repeat(g)))), wholes

    def biggest_with_room(self, g: int) -> int:
        """The most GPUs of a node with `g` free GPUs (0: none)."""
        return max(compress(self._caps, map(ge, self._frees, repeat(g))), default=0)

    def _sums(self, values: Iterable[int]) -> list[int]:
        """By cluster of the shelf: the sum of `values` (one per row) over its rows."""
        before = [0, *accumulate(values)]
        at = before.__getitem__
        return list(map(sub, map(at, self.ends), map(at, self.starts)))


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> tuple[tuple[Any, ...], ...]:
    """The columns of equal-width rows (one pass over the rows: cheaper than one per column)."""
    return tuple(zip(*rows, strict=True)) if rows else ((),) * width


# Clusters that fail a filter, by the first one they fail: that filter's result and their names.
Failed = list[tuple[FilterResult, list[str]]]


class FleetIndex:
    """What placement reads of a fleet, read once per read of the inventories: each registration's
    name, cordon, region and labels, each inventory's error and pools, lined up by registration (the
    models themselves are kept for the clusters a decision explains in full). A caller placing several
    plans on one fleet builds it once.

    A plan reads the pools of the clusters that pass its static filters only, and scores only those
    whose free nodes can hold one of its replicas; the others are grouped by the first filter they fail.
    Clusters stay in the order given throughout (a fleet listed by name, as the registry lists it, needs
    no sorting then: Python's sort only checks an ordered list)."""

    def __init__(self, inventories: list[ClusterInventory], clusters: list[ClusterInfo]):
        # One visit to each model, all the fields needed at once, into a fresh tuple; the columns are
        # then the tuples transposed (one pass over them, not one per column).
        names, self._cordoned, self._regions, self._labels, self._unplaceable = _columns(
            list(map(_INFO_FACTS, clusters)), 5)
        self._names: tuple[str, ...] = names
        self._clusters = clusters
        self._infos_by_name: dict[str, ClusterInfo] | None = None
        # Names in strictly increasing order are unique (the registry lists clusters by name); else count them.
        self._in_order = all(map(lt, names, islice(names, 1, None)))  # then every part of it is in order too
        if not self._in_order and len(self._infos()) != len(clusters):
            _refuse_repeats(clusters, "clusters", _NAME)
        inv_names, errors, inv_pools = _columns(list(map(_INVENTORY_FACTS, inventories)), 3)
        self._read_failed: dict[str, str] = (dict(compress(zip(inv_names, errors, strict=True), errors))
                                             if any(errors) else {})
        self._inventories, self._inv_names = inventories, inv_names
        self._pools_by_name: dict[str, list[NodePool]] | None = None
        self._invs: dict[str, ClusterInventory] | None = None  # built when a decision explains a cluster
        self._aligned = inv_names == names
        if self._aligned:
            # One inventory per registration, in the same order (as the workflows gather them): no lookups.
            self._info_pools: Sequence[list[NodePool] | None] = inv_pools if not self._read_failed else [
                None if error else pools for error, pools in zip(errors, inv_pools, strict=True)]
            self._unregistered: list[str] = []
        else:
            pools = self._pools()
            if len(pools) + len(self._read_failed) != len(inventories):
                _refuse_repeats(inventories, "inventories", _CLUSTER)
            # By registration: the pools read (None: no inventory read without error).
            self._info_pools = list(map(pools.get, names))
            self._unregistered = sorted((pools.keys() | self._read_failed.keys()) - self._infos().keys())
        self._cards_notes: dict[str, str] = {}  # what a cluster has instead of the card asked for

    def _pools(self) -> dict[str, list[NodePool]]:
        """The pools of each inventory read without error, by cluster (the others' pools are never placed on)."""
        if self._pools_by_name is None:
            read = list(map(not_, map(self._read_failed.__contains__, self._inv_names)))
            self._pools_by_name = dict(zip(compress(self._inv_names, read),
                                           compress(map(_POOLS, self._inventories), read), strict=True))
        return self._pools_by_name

    def _infos(self) -> dict[str, ClusterInfo]:
        if self._infos_by_name is None:
            self._infos_by_name = dict(zip(self._names, self._clusters, strict=True))
        return self._infos_by_name

    def _info(self, name: str, position: int | None = None) -> InfoRow | None:
        """What placement reads of a cluster's registration (`position`: its place among the registrations)."""
        model = self._clusters[position] if position is not None else self._infos().get(name)
        return None if model is None else _INFO(model)

    def _inventory(self, name: str, position: int | None = None) -> InventoryRow | None:
        """What placement reads of a cluster's inventory (`position`: the cluster's among the registrations)."""
        if position is not None and self._aligned:
            return _INVENTORY(self._inventories[position])
        if self._invs is None:
            self._invs = dict(zip(self._inv_names, self._inventories, strict=True))
        model = self._invs.get(name)
        return None if model is None else _INVENTORY(model)

    def _known(self, name: str) -> bool:
        return name in self._infos() or name in self._pools() or name in self._read_failed

    def candidate_count(self, plan: PlacementPlan) -> int:
        """How many clusters pass a plan's static filters and have a node with room for one of its replicas
        (a free node of `gpus_per_node` GPUs, entirely free when a replica takes several nodes)."""
        ctx = _Context(plan, get_hardware(plan.hardware))
        return sum(self._shelf(ctx, []).holding(ctx.g, ctx.n))

    def place(self, plan: PlacementPlan, *, explain: bool | Collection[str] = False) -> PlacementDecision:
        with _no_cyclic_gc():
            return self._place(plan, explain)

    def _place(self, plan: PlacementPlan, explain: bool | Collection[str]) -> PlacementDecision:
        card = get_hardware(plan.hardware)
        limit = min(plan.constraints.max_replicas_per_cluster or plan.replicas, plan.replicas)
        ctx = _Context(plan, card)
        failed: Failed = []
        shelf = self._shelf(ctx, failed)
        ranked, eligible = self._rank(shelf, failed, ctx)

        # Only the best `replicas` can receive one: spread deals its first round to them in this
        # order, and pack fills them in this order.
        best = heapq.nsmallest(plan.replicas, ranked) if plan.replicas < len(ranked) else sorted(ranked)
        dealt = [_Candidate.ranked(entry) for entry in best]
        _distribute(dealt, plan.replicas, limit, plan.constraints.spread)
        replicas = {c.name: c.replicas for c in sorted(dealt, key=_NAME) if c.replicas}
        placed = sum(replicas.values())
        unplaced = plan.replicas - placed

        found: dict[str, tuple[list[Pool] | None, int | None]] = {
            name: (shelf.rows[start:end], position) for _score, name, _fits, start, end, position in best}
        if explain is True:
            asked = set(self._names).union(self._unregistered)
        else:
            asked = {name for name in explain or () if self._known(name)}
        verdicts = []
        for name in sorted(asked.union(replicas)):
            matching, position = found.get(name, (None, None))
            verdicts.append(_verdict(self._explained(name, matching, position, replicas.get(name, 0), ctx), ctx,
                                     limit, unplaced))
        # Every list below is in the order given (each part of `failed` too), which is by name when the
        # registrations are: then it needs no sorting.
        ruled_out = []
        for (f, reason), parts in sorted(_merged(failed).items()):
            members = parts[0] if len(parts) == 1 else list(chain.from_iterable(parts))
            if asked:
                members = list(filterfalse(asked.__contains__, members))
            if members:
                members = members if self._in_order and len(parts) == 1 else sorted(members)
                ruled_out.append(_built(RuledOut, {"filter": f, "reason": reason, "clusters": members}))
        left: Iterable[str] = filterfalse(replicas.__contains__, eligible)
        if asked:
            left = filterfalse(asked.__contains__, left)
        passed_over = list(left) if self._in_order else sorted(left)
        return _built(PlacementDecision, {
            "plan": plan, "replicas": replicas, "placed": placed, "unplaced": unplaced,
            "summary": _summary(ctx, replicas, placed, unplaced, verdicts, ruled_out), "clusters": verdicts,
            "ruled_out": ruled_out, "passed_over": passed_over})

    def _shelf(self, ctx: _Context, failed: Failed) -> _Shelf:
        """The shelf of the clusters that pass every static filter; the others go to `failed`, by the
        first one they fail.

        Who fails which filter is worked out by C-level passes over the clusters, in the filters' order;
        what each filter says comes from `_static_filters` for one cluster of each group (so their words
        live in one place), and clusters whose reasons differ (an inventory's error, a region, the labels
        they lack) are grouped by the fact the reason names."""
        names = self._names

        def rule_out(part: list[str], position: int | None = None, registered: bool = True) -> None:
            """Rule out clusters that fail the same filter for the same reason as `part[0]` (`position`:
            its place among the registrations)."""
            first = part[0]
            info = self._info(first, position) if registered else None
            failed.append((_first_failed(_static(first, info, self._inventory(first, position), ctx)), part))

        if self._unregistered:
            rule_out(self._unregistered, registered=False)
        alive: list[bool] | None = None  # by registration: it passes the filters so far (None: all do)

        def keep(passing: Sequence[bool] | None = None, failing: Sequence[bool] | None = None,
                 facts: Sequence[Any] | None = None) -> None:
            """Rule out the clusters still in that are not `passing` (or that are `failing`), by
            registration, grouped by their `facts` when given."""
            nonlocal alive
            if passing is not None:
                out = list(map(not_, passing)) if alive is None else list(map(gt, alive, passing))
            else:
                out = list(failing or ()) if alive is None else list(map(and_, alive, failing or ()))
            if not any(out):
                return
            if facts is None:
                rule_out(list(compress(names, out)), out.index(True))
            else:
                parts: dict[Any, list[int]] = defaultdict(list)
                for position, fact in zip(compress(range(len(out)), out), compress(facts, out), strict=True):
                    parts[fact].append(position)
                for part in parts.values():
                    rule_out(list(map(names.__getitem__, part)), part[0])
            if passing is not None:
                alive = list(passing) if alive is None else list(map(and_, alive, passing))
            else:
                alive = list(map(not_, failing or ())) if alive is None else list(map(gt, alive, failing or ()))

        if not self._aligned or self._read_failed:  # some registered clusters have no inventory read
            keep(passing=list(map(is_not, self._info_pools, repeat(None))),
                 facts=list(map(self._read_failed.get, names)))
        if any(self._cordoned):
            keep(failing=self._cordoned)
        if any(self._unplaceable):  # grouped by the reason: clusters failing the same checks are one group
            keep(failing=list(map(bool, self._unplaceable)), facts=self._unplaceable)
        if ctx.allowed:
            keep(passing=list(map(ctx.allowed.__contains__, names)))
        if ctx.denied:
            keep(failing=list(map(ctx.denied.__contains__, names)))
        if ctx.regions:
            keep(passing=list(map(ctx.regions.__contains__, self._regions)), facts=self._regions)
        if ctx.required:
            required = sorted(ctx.required.items())
            lacking = [tuple(f"{k}={v}" for k, v in required if labels.get(k) != v) for labels in self._labels]
            keep(failing=list(map(bool, lacking)), facts=lacking)
        pools: Iterable[list[NodePool]]  # alive: inventories read without error only
        if alive is None:
            return _Shelf(ctx.card.id, names, self._info_pools, range(len(names)))  # type: ignore[arg-type]
        pools = compress(self._info_pools, alive)  # type: ignore[arg-type]
        return _Shelf(ctx.card.id, list(compress(names, alive)), list(pools), compress(range(len(alive)), alive))

    def _rank(self, shelf: _Shelf, failed: Failed, ctx: _Context) -> tuple[list[Ranked], list[str]]:
        """The clusters that pass every filter: by name, and scored, at least the best `replicas` of them
        (only those can receive one); the ones that fail a node filter go to `failed`.

        What decides whether a cluster passes the node filters, and most of its score, are counts summed
        over its rows (`_Shelf.fits`); its score is at most the score its counts give with the best
        fragmentation, so a cluster whose bound cannot reach the best `replicas` found so far is not scored
        (it takes no replica whatever its score: it only goes to `passed_over`, by name)."""
        if not ctx.card.placeable:  # every cluster fails hardware, for the same reason
            if shelf.given:
                failed.append((_without_card("", [], "", ctx).filters[0], list(shelf.given)))
            return [], []
        cardless = list(compress(shelf.given, map(not_, shelf.has)))
        if cardless:  # what each has instead is one cluster's story, not the fleet's
            failed.append((_without_card("", [], "", ctx).filters[0], cardless))
        rows, g, n = shelf.rows, ctx.g, ctx.n
        fits, wholes = shelf.fits(g, n)
        fitting = list(map(bool, fits))
        no_room: dict[int, tuple[FilterResult, list[str]]] = {}
        for name, start, end in compress(zip(shelf.names, shelf.starts, shelf.ends, strict=True),
                                         map(not_, fitting)):  # nodes of the card, too few with room
            first = _first_failed(_node_results(ctx, _node_counts(rows[start:end], g, n)[0]))
            group = no_room.get(id(first))
            if group is None:
                group = no_room[id(first)] = (first, [])
            group[1].append(name)
        failed += no_room.values()

        names = list(compress(shelf.names, fitting))
        wholes = list(compress(wholes, fitting))
        bound, items, labels_of = _Bound(ctx, shelf.biggest_with_room(g)), ctx.preferred_items, self._labels.__getitem__
        at_most = {whole: bound(whole, len(items)) for whole in set(wholes)}  # carrying every preferred label
        replicas = ctx.plan.replicas
        ranked: list[Ranked] = []
        cut: Ranked | None = None  # the worst of the best `replicas` scored so far, once that many are
        for best, whole, name, start, end, position in zip(
                map(at_most.__getitem__, wholes), wholes, names, compress(shelf.starts, fitting),
                compress(shelf.ends, fitting), compress(shelf.positions, fitting), strict=True):
            if cut is not None:  # skip it if `replicas` clusters scored rank before it whatever its score
                if best > cut[0] or (best == cut[0] and name > cut[1]):
                    continue
                if items:  # with the preferred labels it carries
                    labels = labels_of(position)
                    best = bound(whole, sum(labels.get(k) == v for k, v in items))
                    if best > cut[0] or (best == cut[0] and name > cut[1]):
                        continue
            entry = _evaluate(name, rows[start:end], labels_of(position) if items else None, ctx)
            assert not isinstance(entry, list), name  # it fits: it passes the node filters
            ranked.append((*entry, start, end, position))
            if len(ranked) >= replicas and (cut is None or len(ranked) >= 2 * replicas):
                ranked = heapq.nsmallest(replicas, ranked)
                cut = ranked[-1]
        return ranked, names

    def _explained(self, name: str, matching: list[Pool] | None, position: int | None, replicas: int,
                   ctx: _Context) -> _Candidate:
        """One cluster with every filter, and its score when it passes them all (`matching`: its pools
        of the card, and `position`: its place among the registrations, when known)."""
        info, inv = self._info(name, position), self._inventory(name, position)
        static = _static(name, info, inv, ctx)
        if matching is None:
            matching = _card_pools(self._pools().get(name), ctx.card.id)
        if not matching:
            cand = _without_card(name, static, self._cards_note(name), ctx)
        else:
            cand = _Candidate(name)
            cand.filters.extend(static)
            whole = _node_filters(cand, matching, ctx)
            if ctx.static_passed[id(static)] and cand.fits and ctx.card.placeable:
                cand.eligible = True
                cand.scores, cand.score = _score(cand.usable, whole, info[3] if info is not None else {}, ctx)
        cand.replicas = replicas
        return cand

    def _cards_note(self, name: str) -> str:
        note = self._cards_notes.get(name)
        if note is None:
            note = self._cards_notes[name] = _other_cards(self._inventory(name))
        return note


def _card_pools(pools: list[NodePool] | None, card_id: str) -> list[Pool]:
    """The rows of one cluster's pools of the card, for a cluster explained outside the plan's shelf."""
    return [_NUMBERS(p) for p in pools or () if p.hardware_id == card_id]


def _merged(failed: Failed) -> dict[tuple[str, str], list[list[str]]]:
    """The parts of `failed` by filter and reason (equal results found apart are one group)."""
    merged: dict[tuple[str, str], list[list[str]]] = {}
    for first, members in failed:
        merged.setdefault((first.name, first.reason), []).append(members)
    return merged


# --- evaluation -------------------------------------------------------------------------------------

class _Context:
    __slots__ = ("plan", "card", "g", "n", "regions", "allowed", "denied", "required", "preferred",
                 "preferred_items", "shape", "static_filters", "static_passed", "cardless", "node_results", "scored",
                 "_terms")

    def __init__(self, plan: PlacementPlan, card: Hardware):
        c = plan.constraints
        self.plan, self.card = plan, card
        self.g, self.n = plan.gpus_per_node, plan.nodes_per_replica
        self.regions, self.allowed, self.denied = set(c.regions), set(c.allowed_clusters), set(c.denied_clusters)
        self.required, self.preferred = c.required_labels, c.preferred_labels
        self.preferred_items = tuple(c.preferred_labels.items())
        nodes = f" × {self.n} nodes" if self.n > 1 else ""
        self.shape = f"{self.g} {card.id} GPU(s){nodes}"
        self.static_filters: dict[tuple, list[FilterResult]] = {}
        self.cardless: dict[str, list[FilterResult]] = {}
        self.static_passed: dict[int, bool] = {}  # by id() of a list in static_filters, which keeps it alive
        # The node filters and the score depend on a handful of counts, not on the cluster: clusters
        # with the same counts share them, and most clusters repeat some other cluster's counts.
        self.node_results: dict[tuple[int, ...], list[FilterResult]] = {}
        self.scored: dict[tuple[int, ...], tuple[list[ScoreTerm], float]] = {}
        self._terms: dict[tuple[str, float, float, str], ScoreTerm] = {}

    def term(self, name: str, value: float, weight: float, detail: str) -> ScoreTerm:
        """Score terms repeat across clusters in the same situation; equal ones are one object
        (nothing mutates a decision's terms once it is built)."""
        key = (name, value, weight, detail)
        term = self._terms.get(key)
        if term is None:
            term = self._terms[key] = ScoreTerm(name=name, value=value, weight=weight, detail=detail)
        return term


class _Candidate:
    __slots__ = ("name", "filters", "eligible", "fits", "usable", "scores", "score", "replicas")

    def __init__(self, name: str):
        self.name = name
        self.filters: list[FilterResult] = []
        self.eligible = False
        self.fits = 0
        self.usable: list[Usable] = []
        self.scores: list[ScoreTerm] = []
        self.score = 0.0
        self.replicas = 0

    @classmethod
    def ranked(cls, entry: Ranked) -> _Candidate:
        cand = cls(entry[1])
        cand.eligible, cand.score, cand.fits = True, -entry[0], entry[2]
        return cand


# Most filter results repeat across clusters ("not cordoned", "any region"); results are immutable,
# so equal ones are shared, which keeps a 10,000-cluster decision cheap to build.
_FILTER_CACHE: dict[tuple[str, bool, str], FilterResult] = {}


def _check(cand: _Candidate, name: str, passed: bool, reason: str) -> None:
    key = (name, passed, reason)
    result = _FILTER_CACHE.get(key)
    if result is None:
        if len(_FILTER_CACHE) > 4096:
            _FILTER_CACHE.clear()
        result = _FILTER_CACHE[key] = FilterResult(name=name, passed=passed, reason=reason)
    cand.filters.append(result)


def _evaluate(name: str, matching: Sequence[Pool], labels: dict[str, str] | None,
              ctx: _Context) -> tuple[float, str, int] | list[FilterResult]:
    """A cluster that passes the static filters and has a node with room for a replica: its rank, or
    its node filters when they still fail (a multi-node replica needs more entirely free nodes)."""
    key, usable, whole = _node_counts(matching, ctx.g, ctx.n)
    fits = key[-1]
    if not fits:
        return _node_results(ctx, key)
    return -_score(usable, whole, labels or _NO_LABELS, ctx)[1], name, fits


class _Bound:
    """The first part of a rank (-score) that a cluster that fits cannot beat, from the entirely free
    nodes of the shape it has and the preferred labels it carries, by `_scored`'s arithmetic (so a
    cluster's rank is never before (its bound, its name)): the whole-free-nodes term as `_scored` has it
    when a replica takes whole nodes (n > 1), else at most those nodes over the fewest nodes the replicas
    could need (a node holds at most `biggest` // g of them); fragmentation at most 1; labels as `_scored`."""

    __slots__ = ("_n", "_needed", "_preferred", "_memo")

    def __init__(self, ctx: _Context, biggest: int):
        self._n, self._preferred = ctx.n, len(ctx.preferred)
        self._needed = ctx.plan.replicas * ctx.n if ctx.n > 1 else -(-ctx.plan.replicas // max(1, biggest // ctx.g))
        self._memo: dict[tuple[int, int], float] = {}

    def __call__(self, whole: int, matched: int) -> float:
        bound = self._memo.get((whole, matched))
        if bound is None:
            w = WEIGHTS
            if min(w.values()) < 0:  # (the terms below assume that no weight lowers a score)
                bound = -inf
            else:  # a replica takes n entirely free nodes when n > 1; a single-node one may take none
                whole_value = min(1.0, (whole - self._n if self._n > 1 else whole) / self._needed)
                label_value = matched / self._preferred if self._preferred else 1.0
                bound = -round(whole_value * w["whole_free_nodes"] + 1.0 * w["fragmentation"]
                               + label_value * w["labels"], 9)
            self._memo[whole, matched] = bound
        return bound


def _without_card(name: str, static: list[FilterResult], cards_note: str, ctx: _Context) -> _Candidate:
    """A cluster with no node of the card: its node filters depend only on what it has instead."""
    node = ctx.cardless.get(cards_note)
    if node is None:
        cand = _Candidate("")
        _check(cand, "hardware", False, _hardware_missing(ctx, cards_note))
        _check(cand, "node_shape", False, f"no {ctx.card.id} nodes to hold {ctx.g} GPUs per node")
        _check(cand, "capacity", False, "no node of this shape")
        node = ctx.cardless[cards_note] = cand.filters
    cand = _Candidate(name)
    cand.filters = static + node
    return cand


def _static(name: str, info: InfoRow | None, inv: InventoryRow | None, ctx: _Context) -> list[FilterResult]:
    # The filters that do not look at nodes depend on a few facts that most clusters share: decide
    # them once per distinct combination.
    _name, cordoned, region, labels, unplaceable = info if info is not None else _UNREGISTERED
    key = (info is not None, None if inv is None else (inv[1] or "", inv[2]), cordoned, unplaceable,
           name in ctx.allowed if ctx.allowed else None, name in ctx.denied if ctx.denied else None,
           region if ctx.regions else None, tuple(labels.get(k) for k in ctx.required) if ctx.required else ())
    static = ctx.static_filters.get(key)
    if static is None:
        static = ctx.static_filters[key] = _static_filters(name, info, inv, ctx)
        ctx.static_passed[id(static)] = all(f.passed for f in static)
    return static


def _first_failed(filters: list[FilterResult]) -> FilterResult:
    return next(f for f in filters if not f.passed)


def _hardware_missing(ctx: _Context, cards_note: str) -> str:
    card = ctx.card
    if not card.placeable:
        return (f"{card.display_name} is {card.vendor} hardware; Wingsmith places only "
                "NVIDIA hardware because serving goes through NVIDIA Dynamo")
    return f"no {card.id} nodes" + cards_note


def _node_counts(matching: Sequence[Pool], g: int, n: int) -> tuple[tuple[Any, ...], list[Usable], int]:
    """What the node filters and the score read of a cluster's pools of the card, in one pass: the
    counts the node filters depend on (ending with the replicas its free nodes hold), the nodes a
    replica can use (fullest first), and the entirely free nodes of the shape."""
    nodes = shaped = whole = partly = biggest = most = 0
    usable: list[Usable] = []
    for cap, free, count in matching:
        nodes += count
        if cap > biggest:
            biggest = cap
        if cap < g:
            continue
        shaped += count
        if free > most:
            most = free
        if free == cap:
            whole += count
            if n > 1:
                usable.append((cap, cap, count))
        elif free:
            partly += count
        if n == 1 and free >= g:
            usable.append((free, cap, count))
    usable.sort()
    fits = sum(count * (free // g) for free, _cap, count in usable) if n == 1 else whole // n
    return (bool(matching), nodes, shaped, biggest, whole, partly, most, fits), usable, whole


def _node_filters(cand: _Candidate, matching: Sequence[Pool], ctx: _Context) -> int:
    """The hardware, node shape and capacity filters; sets fits and usable nodes; returns the count
    of entirely free nodes of the shape."""
    key, usable, whole = _node_counts(matching, ctx.g, ctx.n)
    cand.fits, cand.usable = key[-1], usable
    cand.filters.extend(_node_results(ctx, key))
    return whole


def _node_results(ctx: _Context, counts: tuple[Any, ...]) -> list[FilterResult]:
    results = ctx.node_results.get(counts)
    if results is None:
        results = ctx.node_results[counts] = _node_results_of(ctx, *counts)
    return results


def _node_results_of(ctx: _Context, any_pool: bool, nodes: int, shaped: int, biggest: int, whole: int,
                     partly: int, most: int, fits: int) -> list[FilterResult]:
    card, g, n = ctx.card, ctx.g, ctx.n
    cand = _Candidate("")
    if not card.placeable:
        _check(cand, "hardware", False, _hardware_missing(ctx, ""))
    else:
        _check(cand, "hardware", True, f"{nodes} {card.id} node(s)")
    if shaped:
        _check(cand, "node_shape", True, f"{card.id} nodes with {g}+ GPUs: {shaped}")
    elif any_pool:
        _check(cand, "node_shape", False,
               f"its largest {card.id} node has {biggest} GPUs; a replica needs {g} per node")
    else:
        _check(cand, "node_shape", False, f"no {card.id} nodes to hold {g} GPUs per node")
    if fits:
        _check(cand, "capacity", True, f"free nodes hold {fits} replica(s) of {ctx.shape}")
    elif shaped:
        if n > 1:
            why = (f"a replica needs {n} entirely free {card.id} nodes; {whole} are entirely free"
                   + (f" and {partly} partly free node(s) cannot be combined" if partly else ""))
        else:
            why = f"no {card.id} node has {g} free GPUs (most free on one node: {most})"
        _check(cand, "capacity", False, why)
    else:
        _check(cand, "capacity", False, "no node of this shape")
    return cand.filters


def _static_filters(name: str, info: InfoRow | None, inv: InventoryRow | None,
                    ctx: _Context) -> list[FilterResult]:
    cand = _Candidate(name)
    _check(cand, "registered", info is not None,
           "registered" if info is not None else "not registered: an inventory was given for an unknown cluster")
    if inv is None:
        _check(cand, "inventory", False, "no inventory has been read for this cluster")
    elif inv[1]:
        _check(cand, "inventory", False, f"inventory read failed: {inv[1]}")
    else:
        _check(cand, "inventory", True, f"{inv[2]} inventory")
    _name, cordoned, region, labels, unplaceable = info if info is not None else _UNREGISTERED

    _check(cand, "cordon", not cordoned, "cordoned: takes no new replicas" if cordoned else "not cordoned")
    _check(cand, "preflight", not unplaceable,
           unplaceable or "its last preflight check passed, or it was never checked")
    if ctx.allowed:
        ok = name in ctx.allowed
        _check(cand, "allowed_clusters", ok, "in the allowed clusters" if ok else "not in the allowed clusters")
    else:
        _check(cand, "allowed_clusters", True, "no allow-list")
    ok = name not in ctx.denied
    _check(cand, "denied_clusters", ok, "not denied" if ok else "in the denied clusters")
    if ctx.regions:
        ok = region in ctx.regions
        _check(cand, "region", ok, f"region {region or '(none)'} " + ("is allowed" if ok else
               f"is not one of {', '.join(sorted(ctx.regions))}"))
    else:
        _check(cand, "region", True, "any region")
    missing = [f"{k}={v}" for k, v in sorted(ctx.required.items()) if labels.get(k) != v]
    _check(cand, "required_labels", not missing,
           f"lacks label(s) {', '.join(missing)}" if missing else
           ("carries the required labels" if ctx.required else "no required labels"))
    return cand.filters


def _other_cards(inv: InventoryRow | None) -> str:
    """What a cluster without the plan's card has instead (the same whatever card was asked for)."""
    _cluster, error, _source, unlabelled, pools = inv if inv is not None else _NO_INVENTORY
    others = sorted({p.hardware_id or p.product or "unknown" for p in pools}) if not error else []
    extra = f" (has: {', '.join(others)})" if others else ""
    if unlabelled:
        extra += f"; {unlabelled} GPU node(s) carry no nvidia.com/gpu.product label"
    return extra


def _score(usable: list[Usable], whole: int, labels: dict[str, str],
           ctx: _Context) -> tuple[list[ScoreTerm], float]:
    # Runs for every cluster that passes every filter (thousands on a large fleet): plain loops, no
    # generators, and the terms themselves shared by clusters with the same counts.
    g, n = ctx.g, ctx.n
    if n == 1:
        per_node = max(map(_SECOND, usable)) // g
        needed = -(-ctx.plan.replicas // per_node)
    else:
        needed = ctx.plan.replicas * n
    uses, leftover, touched = _allocate(usable, 1, g, n)
    # Whole nodes *kept* after one replica lands: a cluster that can take it on a partly used node
    # keeps its whole nodes for the multi-node replicas that need them.
    kept = whole
    for cap, free, nodes, _taken in uses:
        if free == cap:
            kept -= nodes
    matched = 0
    for k, v in ctx.preferred_items:
        if labels.get(k) == v:
            matched += 1
    key = (kept, whole, needed, leftover, touched, matched)
    scored = ctx.scored.get(key)
    if scored is None:
        scored = ctx.scored[key] = _scored(ctx, *key)
    return scored


def _scored(ctx: _Context, kept: int, whole: int, needed: int, leftover: int, touched: int,
            matched: int) -> tuple[list[ScoreTerm], float]:
    whole_value = min(1.0, kept / needed)
    frag_value = 1.0 - leftover / touched
    if ctx.preferred:
        label_value = matched / len(ctx.preferred)
        label_detail = f"carries {matched} of {len(ctx.preferred)} preferred label(s)"
    else:
        label_value, label_detail = 1.0, "no preferred labels"
    w = WEIGHTS
    terms = [
        ctx.term("whole_free_nodes", whole_value, w["whole_free_nodes"],
                 f"{kept} of {whole} entirely free {ctx.card.id} node(s) stay free after "
                 f"one replica lands; all replicas on whole nodes would take {needed}"),
        ctx.term("fragmentation", frag_value, w["fragmentation"],
                 f"one replica here leaves {leftover} of {touched} GPUs idle on the "
                 "node(s) it uses (1.0: it fills them exactly)"),
        ctx.term("labels", label_value, w["labels"], label_detail),
    ]
    return terms, round(whole_value * w["whole_free_nodes"] + frag_value * w["fragmentation"]
                        + label_value * w["labels"], 9)


# --- distribution -----------------------------------------------------------------------------------

def _distribute(eligible: list[_Candidate], replicas: int, limit: int, mode: str) -> None:
    sign = -1.0 if mode == "spread" else 1.0
    caps = {c.name: min(c.fits, limit) for c in eligible}
    heap = [(-c.score, c.name, c) for c in eligible if caps[c.name] > 0]
    heapq.heapify(heap)
    remaining = replicas
    while remaining and heap:
        _key, name, cand = heapq.heappop(heap)
        # Packing keeps taking the same cluster until it is full: do that in one step.
        take = 1 if mode == "spread" else min(remaining, caps[name] - cand.replicas)
        cand.replicas += take
        remaining -= take
        if cand.replicas < caps[name]:
            heapq.heappush(heap, (-(cand.score + sign * SPREAD_WEIGHT * cand.replicas), name, cand))


def _allocate(usable: list[tuple[int, int, int]], k: int, g: int,
              n: int) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """Nodes for k replicas, as (uses, GPUs left idle on the nodes used, GPUs of the nodes used); a use
    is (gpus_per_node, free_before, nodes, gpus_taken). `usable` is (free, gpus_per_node, count), fullest first."""
    uses: list[tuple[int, int, int, int]] = []
    leftover = touched = 0
    if n == 1:
        remaining = k
        for free, cap, count in usable:
            if not remaining:
                break
            per = free // g
            take = min(remaining, count * per)
            full, rest = divmod(take, per)
            for nodes, each in ((full, per), (1 if rest else 0, rest)):
                if nodes:
                    uses.append((cap, free, nodes, each * g))
                    leftover += nodes * (free - each * g)
                    touched += nodes * cap
            remaining -= take
    else:
        needed = k * n
        for _free, cap, count in usable:
            if not needed:
                break
            nodes = min(needed, count)
            uses.append((cap, cap, nodes, g))
            leftover += nodes * (cap - g)
            touched += nodes * cap
            needed -= nodes
    return uses, leftover, touched


# --- reporting --------------------------------------------------------------------------------------

def _verdict(cand: _Candidate, ctx: _Context, limit: int, unplaced: int) -> ClusterVerdict:
    node_use: list[NodeUse] = []
    scores = cand.scores
    if cand.eligible:
        if cand.replicas:
            node_use = [NodeUse(hardware_id=ctx.card.id, gpus_per_node=cap, free_before=free, nodes=nodes,
                                gpus_taken=taken)
                        for cap, free, nodes, taken in _allocate(cand.usable, cand.replicas, ctx.g, ctx.n)[0]]
        scores = [*scores, _spread_term(ctx, cand.replicas)]
    reason = None
    if unplaced:
        if not cand.eligible:
            failed = next(f for f in cand.filters if not f.passed)
            reason = f"filtered out by {failed.name}: {failed.reason}"
        elif cand.replicas >= limit and limit < cand.fits:
            reason = f"holds the most replicas allowed per cluster ({limit})"
        else:
            reason = f"full: its free nodes hold {cand.fits} replica(s) of {ctx.shape}, all taken"
    return _built(ClusterVerdict, {
        "cluster": cand.name, "eligible": cand.eligible, "filters": cand.filters, "scores": scores,
        "score": cand.score, "fits": cand.fits, "replicas": cand.replicas, "node_use": node_use,
        "unplaced_reason": reason})


def _spread_term(ctx: _Context, replicas: int) -> ScoreTerm:
    spread = ctx.plan.constraints.spread
    how = ("lowers its score by {w:g} per replica already here, so replicas go round-robin"
           if spread == "spread" else "raises its score by {w:g} per replica already here, so the best "
                                      "cluster fills before the next")
    return ctx.term("spread", float(replicas), -SPREAD_WEIGHT if spread == "spread" else SPREAD_WEIGHT,
                    f"{spread}: {replicas} replica(s) here; " + how.format(w=SPREAD_WEIGHT))


def _built(model: type[M], values: dict[str, Any]) -> M:
    """`model` holding `values` without validating them again: pydantic's `model_construct` without its
    per-field bookkeeping. Only for values this module built from validated inputs, with every field
    given, of the field's type: at 10,000 clusters validation alone took longer than the placement.
    tests/placement/test_index.py checks that every decision survives `model_validate` unchanged."""
    built = model.__new__(model)
    _set(built, "__dict__", values)
    _set(built, "__pydantic_fields_set__", set(values))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


_set = object.__setattr__


def _summary(ctx: _Context, replicas: dict[str, int], placed: int, unplaced: int,
             verdicts: list[ClusterVerdict], ruled_out: list[RuledOut]) -> str:
    where = ", ".join(f"{name}={k}" for name, k in replicas.items())
    if not verdicts and not ruled_out:
        return f"no clusters to place {ctx.plan.replicas} replica(s) of {ctx.shape} on"
    if not ctx.card.placeable:
        return (f"nothing placed: {ctx.card.display_name} is {ctx.card.vendor} hardware and Wingsmith places "
                "only NVIDIA hardware")
    if not unplaced:
        return f"placed {placed} replica(s) of {ctx.shape} on {len(replicas)} cluster(s): {where}"
    head = f"placed {placed} of {placed + unplaced} replica(s) of {ctx.shape}"
    # Every cluster's reason, in the summary itself: it is what the workflow's failure, the events,
    # the CLI and the console show, and a person needs the reasons, not a pointer to them. Clusters
    # ruled out together (a large fleet) are one reason with their count.
    why = "; ".join([f"{v.cluster}: {v.unplaced_reason}" for v in verdicts if v.unplaced_reason]
                    + [f"{_some(g.clusters)}: filtered out by {g.filter}: {g.reason}" for g in ruled_out])
    return head + (f" ({where})" if where else "") + f"; {unplaced} unplaced. {why}"


def _some(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} cluster(s) ({', '.join(names[:shown])}{more})"


def _refuse_repeats(items: list[T], what: str, key: Callable[[T], str]) -> None:
    """Raise naming a cluster that appears twice in `items` (the caller saw fewer names than items)."""
    seen: set[str] = set()
    for item in items:
        name = key(item)
        if name in seen:
            raise PlacementInputError(f"{what}: cluster {name!r} appears more than once")
        seen.add(name)
