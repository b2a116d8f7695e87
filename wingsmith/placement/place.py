"""Placement: which clusters run how many replicas of a workload, and why.

A `FleetIndex` files the pools of each card in one flat table (cluster, GPUs per node, free GPUs,
nodes), so a plan finds the clusters whose free nodes can hold one of its replicas with one pass of
C-level comparisons over that table, not a Python loop over the fleet. On a fleet of up to
`EXPLAIN_EVERY_CLUSTER_UP_TO` clusters every cluster goes through every filter (all of them are
evaluated and reported, so a person can see every reason a cluster was out, not only the first). On
a larger fleet only the clusters that can hold a replica are evaluated and explained in full; the
others are grouped by the one reason that rules them out, as the Kubernetes scheduler does, so the
cost follows the candidates and the decision stays small. Both give the same replicas, and the
same verdict for every cluster explained in full. Clusters that pass are scored;
replicas are then handed out one at a time to the cluster with the highest score, where the spread
term (replicas already there) outweighs every other term together: `spread` deals replicas
round-robin over the best clusters, `pack` fills the best cluster before the next. Ties break by
cluster name, so equal inputs give equal decisions whatever their order.

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
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, compress, filterfalse, groupby, repeat
from operator import and_, attrgetter, eq, ge, itemgetter, not_
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

# Up to this many clusters a decision explains every cluster with every filter; beyond, it explains
# the clusters that can hold a replica and groups the rest by reason, so its cost follows the
# candidates and its size stays far below Temporal's 2 MB payload limit (10,000 clusters explained
# one by one came to about 10 MB).
EXPLAIN_EVERY_CLUSTER_UP_TO = 1_000
WEIGHTS = {"whole_free_nodes": 1.0, "fragmentation": 1.0, "labels": 1.0}
# Larger than the other weights together, so the spread term decides before any other.
SPREAD_WEIGHT = 10.0 * (1 + sum(WEIGHTS.values()))


T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)
# A pool as placement reads it: (hardware_id, gpus_per_node, free_gpus, nodes).
Pool = tuple[str | None, int, int, int]
# Nodes a replica can use: (free GPUs per node, GPUs per node, nodes).
Usable = tuple[int, int, int]
# What placement reads of a cluster's registration: (name, cordoned, region, labels).
InfoRow = tuple[str, bool, str, dict[str, str]]
# ... and of its inventory: (cluster, error, source, unlabelled GPU nodes, pools).
InventoryRow = tuple[str, str | None, str, int, list[NodePool]]

_UNREGISTERED: InfoRow = ("", False, "", {})
_NO_INVENTORY: InventoryRow = ("", None, "", 0, [])

# Attribute readers that run in C over whole lists (map/compress): on 10,000 clusters a Python loop
# that visits every object costs more than the rest of a decision.
_NAME, _CLUSTER = attrgetter("name"), attrgetter("cluster")
_INFO = attrgetter("name", "cordoned", "region", "labels")
_INVENTORY = attrgetter("cluster", "error", "source", "unlabelled_gpu_nodes", "pools")
_POOL = attrgetter("hardware_id", "gpus_per_node", "free_gpus", "nodes")
_FIRST, _SECOND, _THIRD, _FIFTH = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(4)


class PlacementInputError(ValueError):
    """The inputs contradict each other (e.g. one cluster listed twice)."""


def place(plan: PlacementPlan, inventories: list[ClusterInventory], clusters: list[ClusterInfo], *,
          explain_every_cluster_up_to: int = EXPLAIN_EVERY_CLUSTER_UP_TO) -> PlacementDecision:
    """The decision for one plan; a caller placing several plans on one fleet builds a `FleetIndex` once."""
    with _no_cyclic_gc():
        return FleetIndex(inventories, clusters).place(plan, explain_every_cluster_up_to=explain_every_cluster_up_to)


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
    """Every pool of one card in the readable inventories, as one flat table in inventory order (so
    each cluster's pools are adjacent): its cluster and (card, GPUs per node, free GPUs, nodes).
    Finding the clusters that can hold a replica is then a few C-level passes over the table, not a
    Python loop over the fleet."""

    __slots__ = ("pools", "_owners", "_caps", "_frees", "_whole")

    def __init__(self, card_id: str, names: list[str], pool_lists: list[list[NodePool]]):
        # Each pool model is read once, all four fields at a time, into a compact tuple: on a large
        # fleet the models lie far apart in memory and every visit to one costs cache misses.
        every: list[Pool] = list(map(_POOL, chain.from_iterable(pool_lists)))
        mine = list(map(eq, map(_FIRST, every), repeat(card_id)))
        owners = list(compress(chain.from_iterable(map(repeat, names, map(len, pool_lists))), mine))
        pools: list[Pool] = list(compress(every, mine))
        self._owners = owners
        self._caps = list(map(_SECOND, pools))
        self._frees = list(map(_THIRD, pools))
        self._whole = list(map(eq, self._frees, self._caps))
        # Each cluster's pools of the card, for the clusters a plan evaluates.
        self.pools: dict[str, list[Pool]] = {
            name: list(map(_SECOND, group)) for name, group in groupby(zip(owners, pools, strict=True), _FIRST)}

    def holding(self, g: int, n: int) -> set[str]:
        """Clusters with a node that has `g` free GPUs (n == 1) or an entirely free node of `g`+ GPUs
        (n > 1): the only ones whose free nodes can hold a replica."""
        if n == 1:
            room: Iterable[bool] = map(ge, self._frees, repeat(g))
        else:
            room = map(and_, self._whole, map(ge, self._caps, repeat(g)))
        return set(compress(self._owners, room))


class FleetIndex:
    """Clusters indexed by card and free capacity, built once per read of the inventories (each
    card's shelf on the first plan that asks for it).

    A plan evaluates (filters, scores, allocates nodes for) only the clusters whose free nodes can
    hold one of its replicas; every other cluster is still explained in the decision, from filter
    results shared by all the clusters in the same situation."""

    def __init__(self, inventories: list[ClusterInventory], clusters: list[ClusterInfo]):
        # Each model is visited once and what placement needs of it copied into a row (a tuple, fresh
        # and compact): on a large fleet the models lie far apart in memory, and every visit to one
        # costs cache misses, more than the work done with what it holds.
        info_rows: list[InfoRow] = list(map(_INFO, clusters))
        self._infos = _unique(dict(zip(map(_FIRST, info_rows), info_rows, strict=True)), clusters, "clusters", _NAME)
        inv_rows: list[InventoryRow] = list(map(_INVENTORY, inventories))
        self._invs = _unique(dict(zip(map(_FIRST, inv_rows), inv_rows, strict=True)), inventories,
                             "inventories", _CLUSTER)
        infos, invs = self._infos, self._invs
        self._names = sorted(infos if infos.keys() == invs.keys() else infos.keys() | invs.keys())
        read = list(map(not_, map(_SECOND, inv_rows)))
        # The inventories read without error: their names and pools, in the order given.
        self._read_names = list(compress(map(_FIRST, inv_rows), read))
        self._read_pools: list[list[NodePool]] = list(compress(map(_FIFTH, inv_rows), read))
        # Registered, with an inventory read: the clusters whose registration and inventory filters pass.
        self._readable = infos.keys() & self._read_names
        self._shelves: dict[str, _Shelf] = {}
        self._cards_notes: dict[str, str] = {}  # what a cluster has instead of the card asked for

    def _shelf(self, card_id: str) -> _Shelf:
        shelf = self._shelves.get(card_id)
        if shelf is None:
            with _no_cyclic_gc():
                shelf = self._shelves[card_id] = _Shelf(card_id, self._read_names, self._read_pools)
        return shelf

    def candidate_count(self, plan: PlacementPlan) -> int:
        """How many clusters a plan evaluates in full."""
        return len(self._shelf(get_hardware(plan.hardware).id).holding(plan.gpus_per_node, plan.nodes_per_replica))

    def place(self, plan: PlacementPlan, *,
              explain_every_cluster_up_to: int = EXPLAIN_EVERY_CLUSTER_UP_TO) -> PlacementDecision:
        with _no_cyclic_gc():
            return self._place(plan, len(self._names) <= explain_every_cluster_up_to)

    def _place(self, plan: PlacementPlan, explain_every_cluster: bool) -> PlacementDecision:
        card = get_hardware(plan.hardware)
        limit = min(plan.constraints.max_replicas_per_cluster or plan.replicas, plan.replicas)
        ctx = _Context(plan, card)
        shelf = self._shelf(card.id)
        holding = shelf.holding(ctx.g, ctx.n) if card.placeable else set()
        ruled_out: list[RuledOut]
        if explain_every_cluster:
            candidates, ruled_out = self._every_cluster(shelf, holding, ctx), []
        else:
            candidates, ruled_out = self._clusters_that_can_hold(shelf, holding, ctx)
        eligible = [c for c in candidates if c.eligible]
        _distribute(eligible, plan.replicas, limit, plan.constraints.spread)

        placed = sum(c.replicas for c in eligible)
        unplaced = plan.replicas - placed
        verdicts = [_verdict(c, ctx, limit, unplaced) for c in candidates]
        replicas = {c.name: c.replicas for c in eligible if c.replicas}
        return _built(PlacementDecision, {
            "plan": plan, "replicas": replicas, "placed": placed, "unplaced": unplaced,
            "summary": _summary(ctx, replicas, placed, unplaced, verdicts, ruled_out), "clusters": verdicts,
            "ruled_out": ruled_out})

    def _every_cluster(self, shelf: _Shelf, holding: set[str], ctx: _Context) -> list[_Candidate]:
        """Every cluster with every filter (a small fleet: the decision can afford to say it all)."""
        infos, invs, shelved = self._infos, self._invs, shelf.pools
        candidates = []
        for name in self._names:
            info, inv = infos.get(name), invs.get(name)
            static = _static(name, info, inv, ctx)
            matching = shelved.get(name)
            if matching is None:
                candidates.append(_without_card(name, static, self._cards_note(name), ctx))
            else:
                candidates.append(_evaluate(name, info, static, matching, ctx, score=name in holding))
        return candidates

    def _clusters_that_can_hold(self, shelf: _Shelf, holding: set[str],
                                ctx: _Context) -> tuple[list[_Candidate], list[RuledOut]]:
        """The clusters the index says can hold a replica, in full; every other cluster by one reason."""
        infos, invs, shelved = self._infos, self._invs, shelf.pools
        candidates: list[_Candidate] = []
        # Grouped by the (shared) filter result that rules them out; equal results are merged below.
        groups: dict[int, tuple[FilterResult, list[str]]] = {}

        def rule_out(failed: FilterResult, name: str) -> None:
            group = groups.get(id(failed))
            if group is None:
                group = groups[id(failed)] = (failed, [])
            group[1].append(name)

        # The names come sorted, so candidates and every group stay in name order; the clusters that
        # cannot hold a replica are sorted out by set operations, which run in C.
        names = self._names
        for name in filter(holding.__contains__, names):
            info = infos.get(name)  # holding implies an inventory was read, not that it is registered
            static = _static(name, info, invs[name], ctx)
            if ctx.static_passed[id(static)]:
                candidates.append(_evaluate(name, info, static, shelved[name], ctx, score=True))
            else:
                rule_out(_first_failed(static), name)
        readable = self._readable
        for name in filterfalse(readable.__contains__, names):  # unregistered, or no inventory read
            if name not in holding:
                rule_out(_first_failed(_static(name, infos.get(name), invs.get(name), ctx)), name)
        no_room = readable.intersection(shelved).difference(holding)
        for name in filter(no_room.__contains__, names):  # nodes of the card, none with room
            probe = _Candidate(name)
            _node_filters(probe, shelved[name], ctx)
            rule_out(_first_failed(probe.filters), name)
        # Clusters without the card are one group: what each has instead is one cluster's story, not the fleet's.
        cardless = readable.difference(shelved)
        if cardless:
            groups[0] = (_without_card("", [], "", ctx).filters[0], list(filter(cardless.__contains__, names)))
        merged: dict[tuple[str, str], list[list[str]]] = {}
        for failed, members in groups.values():
            merged.setdefault((failed.name, failed.reason), []).append(members)
        # Mostly in name order already, which Python's sort only checks (one pass).
        ruled_out = [_built(RuledOut, {"filter": f, "reason": reason, "clusters": sorted(chain(*parts))})
                     for (f, reason), parts in sorted(merged.items())]
        return candidates, ruled_out

    def _cards_note(self, name: str) -> str:
        note = self._cards_notes.get(name)
        if note is None:
            note = self._cards_notes[name] = _other_cards(self._invs.get(name))
        return note


# --- evaluation -------------------------------------------------------------------------------------

class _Context:
    __slots__ = ("plan", "card", "g", "n", "regions", "allowed", "denied", "required", "preferred",
                 "shape", "static_filters", "static_passed", "cardless", "node_results", "scored", "_terms")

    def __init__(self, plan: PlacementPlan, card: Hardware):
        c = plan.constraints
        self.plan, self.card = plan, card
        self.g, self.n = plan.gpus_per_node, plan.nodes_per_replica
        self.regions, self.allowed, self.denied = set(c.regions), set(c.allowed_clusters), set(c.denied_clusters)
        self.required, self.preferred = c.required_labels, c.preferred_labels
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


def _evaluate(name: str, info: InfoRow | None, static: list[FilterResult], matching: Sequence[Pool],
              ctx: _Context, *, score: bool) -> _Candidate:
    """A cluster with nodes of the card: every filter, and a score when all pass (`score` False: the
    index says its free nodes cannot hold a replica, so it cannot pass)."""
    cand = _Candidate(name)
    cand.filters.extend(static)
    whole = _node_filters(cand, matching, ctx)
    if score and ctx.static_passed[id(static)]:
        cand.eligible = cand.fits > 0 and ctx.card.placeable and all(f.passed for f in cand.filters[-3:])
        if cand.eligible:
            _score(cand, info, whole, ctx)
    return cand


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
    _name, cordoned, region, labels = info if info is not None else _UNREGISTERED
    key = (info is not None, None if inv is None else (inv[1] or "", inv[2]), cordoned,
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


def _node_filters(cand: _Candidate, matching: Sequence[Pool], ctx: _Context) -> int:
    """The hardware, node shape and capacity filters; sets fits and usable nodes; returns the count
    of entirely free nodes of the shape."""
    g, n = ctx.g, ctx.n
    # One pass over the card's pools: this runs for every cluster that holds the card.
    nodes = shaped = whole = partly = biggest = most = 0
    usable: list[Usable] = []
    for _card, cap, free, count in matching:
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
    cand.fits, cand.usable = fits, usable
    key = (bool(matching), nodes, shaped, biggest, whole, partly, most, fits)
    results = ctx.node_results.get(key)
    if results is None:
        results = ctx.node_results[key] = _node_results(ctx, *key)
    cand.filters.extend(results)
    return whole


def _node_results(ctx: _Context, any_pool: bool, nodes: int, shaped: int, biggest: int, whole: int, partly: int,
                  most: int, fits: int) -> list[FilterResult]:
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
    _name, cordoned, region, labels = info if info is not None else _UNREGISTERED

    _check(cand, "cordon", not cordoned, "cordoned: takes no new replicas" if cordoned else "not cordoned")
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


def _score(cand: _Candidate, info: InfoRow | None, whole: int, ctx: _Context) -> None:
    plan, g, n = ctx.plan, ctx.g, ctx.n
    if n == 1:
        per_node = max(map(_SECOND, cand.usable)) // g
        needed = -(-plan.replicas // per_node)
    else:
        needed = plan.replicas * n
    uses, leftover, touched = _allocate(cand.usable, 1, g, n)
    # Whole nodes *kept* after one replica lands: a cluster that can take it on a partly used node
    # keeps its whole nodes for the multi-node replicas that need them.
    kept = whole - sum(nodes for cap, free, nodes, _taken in uses if free == cap)
    matched = 0
    if ctx.preferred and info is not None:
        labels = info[3]
        matched = sum(1 for k, v in ctx.preferred.items() if labels.get(k) == v)
    key = (kept, whole, needed, leftover, touched, matched)
    scored = ctx.scored.get(key)
    if scored is None:
        scored = ctx.scored[key] = _scored(ctx, *key)
    cand.scores, cand.score = scored


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


def _unique(by_name: dict[str, R], items: list[T], what: str, key: Callable[[T], str]) -> dict[str, R]:
    """`by_name`, built from `items` by the caller (one entry per item, by name), or an error naming
    a cluster that appears twice."""
    if len(by_name) != len(items):
        seen: set[str] = set()
        for item in items:
            name = key(item)
            if name in seen:
                raise PlacementInputError(f"{what}: cluster {name!r} appears more than once")
            seen.add(name)
    return by_name
