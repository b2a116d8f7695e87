"""Placement: which clusters run how many replicas of a workload, and why.

A `FleetIndex` files each cluster's pools by card, ordered by free capacity, so a plan finds the
clusters whose free nodes can hold one of its replicas by bisection. On a fleet of up to
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

import bisect
import contextlib
import gc
import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

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
    """The clusters holding one card, each with its pools of that card, ordered twice by free capacity:
    by the most free GPUs on one node (what a single-node replica needs) and by the widest entirely
    free node (what a multi-node replica needs). A plan bisects to the clusters that can hold it."""

    __slots__ = ("pools", "_most_free", "_widest_whole")

    def __init__(self, card_id: str, inventories: dict[str, ClusterInventory]):
        self.pools: dict[str, list[NodePool]] = {}
        most, widest = [], []
        for name, inv in inventories.items():
            if inv.error:
                continue
            matching = [p for p in inv.pools if p.hardware_id == card_id]
            if not matching:
                continue
            self.pools[name] = matching
            most_free = widest_whole = 0
            for p in matching:
                most_free = max(most_free, p.free_gpus)
                if p.free_gpus == p.gpus_per_node:
                    widest_whole = max(widest_whole, p.gpus_per_node)
            most.append((most_free, name))
            widest.append((widest_whole, name))
        most.sort()
        widest.sort()
        self._most_free = ([k for k, _ in most], [n for _, n in most])
        self._widest_whole = ([k for k, _ in widest], [n for _, n in widest])

    def holding(self, g: int, n: int) -> list[str]:
        """Clusters with a node that has `g` free GPUs (n == 1) or an entirely free node of `g`+ GPUs
        (n > 1): the only ones whose free nodes can hold a replica."""
        keys, names = self._most_free if n == 1 else self._widest_whole
        return names[bisect.bisect_left(keys, g):]


class FleetIndex:
    """Clusters indexed by card and free capacity, built once per read of the inventories (each
    card's shelf on the first plan that asks for it).

    A plan evaluates (filters, scores, allocates nodes for) only the clusters whose free nodes can
    hold one of its replicas; every other cluster is still explained in the decision, from filter
    results shared by all the clusters in the same situation."""

    def __init__(self, inventories: list[ClusterInventory], clusters: list[ClusterInfo]):
        self._infos = _unique({c.name: c for c in clusters}, clusters, "clusters", lambda c: c.name)
        self._invs = _unique({i.cluster: i for i in inventories}, inventories, "inventories", lambda i: i.cluster)
        self._names = sorted(self._infos.keys() | self._invs.keys())
        # Registered, with an inventory read: the clusters whose registration and inventory filters pass.
        self._readable = {name for name, inv in self._invs.items() if not inv.error} & self._infos.keys()
        self._shelves: dict[str, _Shelf] = {}
        self._cards_notes: dict[str, str] = {}  # what a cluster has instead of the card asked for

    def _shelf(self, card_id: str) -> _Shelf:
        shelf = self._shelves.get(card_id)
        if shelf is None:
            with _no_cyclic_gc():
                shelf = self._shelves[card_id] = _Shelf(card_id, self._invs)
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
        holding = set(shelf.holding(ctx.g, ctx.n)) if card.placeable else set()
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
        return PlacementDecision(
            plan=plan, replicas=replicas, placed=placed, unplaced=unplaced,
            summary=_summary(ctx, replicas, placed, unplaced, verdicts, ruled_out), clusters=verdicts,
            ruled_out=ruled_out)

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
        # Clusters without the card are one group: what each has instead is one cluster's story, not the fleet's.
        cardless = _without_card("", [], "", ctx).filters[0]
        readable = self._readable
        for name in self._names:
            if name in holding:
                info = infos.get(name)  # holding implies an inventory was read, not that it is registered
                static = _static(name, info, invs[name], ctx)
                if ctx.static_passed[id(static)]:
                    candidates.append(_evaluate(name, info, static, shelved[name], ctx, score=True))
                    continue
                failed = _first_failed(static)
            elif name not in readable:
                failed = _first_failed(_static(name, infos.get(name), invs.get(name), ctx))
            elif name in shelved:  # nodes of the card, none with room
                probe = _Candidate(name)
                _node_filters(probe, shelved[name], ctx)
                failed = _first_failed(probe.filters)
            else:
                failed = cardless
            group = groups.get(id(failed))
            if group is None:
                group = groups[id(failed)] = (failed, [])
            group[1].append(name)
        merged: dict[tuple[str, str], list[str]] = {}
        for failed, names in groups.values():
            merged.setdefault((failed.name, failed.reason), []).extend(names)
        ruled_out = [RuledOut(filter=f, reason=reason, clusters=sorted(names))
                     for (f, reason), names in sorted(merged.items())]
        return candidates, ruled_out

    def _cards_note(self, name: str) -> str:
        note = self._cards_notes.get(name)
        if note is None:
            note = self._cards_notes[name] = _other_cards(self._invs.get(name))
        return note


# --- evaluation -------------------------------------------------------------------------------------

class _Context:
    __slots__ = ("plan", "card", "g", "n", "regions", "allowed", "denied", "required", "preferred",
                 "shape", "static_filters", "static_passed", "cardless", "_terms")

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
        self.usable: list[tuple[int, int, int]] = []
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


def _evaluate(name: str, info: ClusterInfo | None, static: list[FilterResult], matching: Sequence[NodePool],
              ctx: _Context, *, score: bool) -> _Candidate:
    """A cluster with nodes of the card: every filter, and a score when all pass (`score` False: the
    index says its free nodes cannot hold a replica, so it cannot pass)."""
    cand = _Candidate(name)
    cand.filters.extend(static)
    whole = _node_filters(cand, matching, ctx)
    if score and ctx.static_passed[id(static)]:
        cand.eligible = cand.fits > 0 and ctx.card.placeable and all(f.passed for f in cand.filters[-3:])
        if cand.eligible:
            _score(cand, info or ClusterInfo(name=name), whole, ctx)
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


def _static(name: str, info: ClusterInfo | None, inv: ClusterInventory | None, ctx: _Context) -> list[FilterResult]:
    # The filters that do not look at nodes depend on a few facts that most clusters share: decide
    # them once per distinct combination.
    cordoned, region, labels = (info.cordoned, info.region, info.labels) if info is not None else (False, "", {})
    key = (info is not None, None if inv is None else (inv.error or "", inv.source), cordoned,
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


def _node_filters(cand: _Candidate, matching: Sequence[NodePool], ctx: _Context) -> int:
    """The hardware, node shape and capacity filters; sets fits and usable nodes; returns the count
    of entirely free nodes of the shape."""
    card, g, n = ctx.card, ctx.g, ctx.n
    # One pass over the card's pools: this runs for every cluster that holds the card.
    nodes = shaped = whole = partly = biggest = most = 0
    usable: list[tuple[int, int, int]] = []
    for p in matching:
        cap, free, count = p.gpus_per_node, p.free_gpus, p.nodes
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
    if not card.placeable:
        _check(cand, "hardware", False, _hardware_missing(ctx, ""))
    else:
        _check(cand, "hardware", True, f"{nodes} {card.id} node(s)")
    if shaped:
        _check(cand, "node_shape", True, f"{card.id} nodes with {g}+ GPUs: {shaped}")
    elif matching:
        _check(cand, "node_shape", False,
               f"its largest {card.id} node has {biggest} GPUs; a replica needs {g} per node")
    else:
        _check(cand, "node_shape", False, f"no {card.id} nodes to hold {g} GPUs per node")
    usable.sort()
    fits = sum(count * (free // g) for free, _cap, count in usable) if n == 1 else whole // n
    cand.fits, cand.usable = fits, usable
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
    return whole


def _static_filters(name: str, info: ClusterInfo | None, inv: ClusterInventory | None,
                    ctx: _Context) -> list[FilterResult]:
    cand = _Candidate(name)
    _check(cand, "registered", info is not None,
           "registered" if info is not None else "not registered: an inventory was given for an unknown cluster")
    if inv is None:
        _check(cand, "inventory", False, "no inventory has been read for this cluster")
    elif inv.error:
        _check(cand, "inventory", False, f"inventory read failed: {inv.error}")
    else:
        _check(cand, "inventory", True, f"{inv.source} inventory")
    info = info or ClusterInfo(name=name)

    _check(cand, "cordon", not info.cordoned, "cordoned: takes no new replicas" if info.cordoned else "not cordoned")
    if ctx.allowed:
        ok = name in ctx.allowed
        _check(cand, "allowed_clusters", ok, "in the allowed clusters" if ok else "not in the allowed clusters")
    else:
        _check(cand, "allowed_clusters", True, "no allow-list")
    ok = name not in ctx.denied
    _check(cand, "denied_clusters", ok, "not denied" if ok else "in the denied clusters")
    if ctx.regions:
        ok = info.region in ctx.regions
        _check(cand, "region", ok, f"region {info.region or '(none)'} " + ("is allowed" if ok else
               f"is not one of {', '.join(sorted(ctx.regions))}"))
    else:
        _check(cand, "region", True, "any region")
    missing = [f"{k}={v}" for k, v in sorted(ctx.required.items()) if info.labels.get(k) != v]
    _check(cand, "required_labels", not missing,
           f"lacks label(s) {', '.join(missing)}" if missing else
           ("carries the required labels" if ctx.required else "no required labels"))
    return cand.filters


def _other_cards(inv: ClusterInventory | None) -> str:
    """What a cluster without the plan's card has instead (the same whatever card was asked for)."""
    pools = inv.pools if inv is not None and not inv.error else []
    others = sorted({p.hardware_id or p.product or "unknown" for p in pools})
    extra = f" (has: {', '.join(others)})" if others else ""
    if inv is not None and inv.unlabelled_gpu_nodes:
        extra += f"; {inv.unlabelled_gpu_nodes} GPU node(s) carry no nvidia.com/gpu.product label"
    return extra


def _score(cand: _Candidate, info: ClusterInfo, whole: int, ctx: _Context) -> None:
    plan, g, n = ctx.plan, ctx.g, ctx.n
    if n == 1:
        per_node = max(cap for _free, cap, _count in cand.usable) // g
        needed = -(-plan.replicas // per_node)
    else:
        needed = plan.replicas * n
    uses, leftover, touched = _allocate(cand.usable, 1, g, n)
    # Whole nodes *kept* after one replica lands: a cluster that can take it on a partly used node
    # keeps its whole nodes for the multi-node replicas that need them.
    kept = whole - sum(nodes for cap, free, nodes, _taken in uses if free == cap)
    whole_value = min(1.0, kept / needed)
    frag_value = 1.0 - leftover / touched
    if ctx.preferred:
        matched = sum(1 for k, v in ctx.preferred.items() if info.labels.get(k) == v)
        label_value = matched / len(ctx.preferred)
        label_detail = f"carries {matched} of {len(ctx.preferred)} preferred label(s)"
    else:
        label_value, label_detail = 1.0, "no preferred labels"
    w = WEIGHTS
    cand.scores = [
        ctx.term("whole_free_nodes", whole_value, w["whole_free_nodes"],
                 f"{kept} of {whole} entirely free {ctx.card.id} node(s) stay free after "
                 f"one replica lands; all replicas on whole nodes would take {needed}"),
        ctx.term("fragmentation", frag_value, w["fragmentation"],
                 f"one replica here leaves {leftover} of {touched} GPUs idle on the "
                 "node(s) it uses (1.0: it fills them exactly)"),
        ctx.term("labels", label_value, w["labels"], label_detail),
    ]
    cand.score = round(whole_value * w["whole_free_nodes"] + frag_value * w["fragmentation"]
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
        spread = ctx.plan.constraints.spread
        how = ("lowers its score by {w:g} per replica already here, so replicas go round-robin"
               if spread == "spread" else "raises its score by {w:g} per replica already here, so the best "
                                          "cluster fills before the next")
        scores = [*scores, ctx.term(
            "spread", float(cand.replicas), -SPREAD_WEIGHT if spread == "spread" else SPREAD_WEIGHT,
            f"{spread}: {cand.replicas} replica(s) here; " + how.format(w=SPREAD_WEIGHT))]
    reason = None
    if unplaced:
        if not cand.eligible:
            failed = next(f for f in cand.filters if not f.passed)
            reason = f"filtered out by {failed.name}: {failed.reason}"
        elif cand.replicas >= limit and limit < cand.fits:
            reason = f"holds the most replicas allowed per cluster ({limit})"
        else:
            reason = f"full: its free nodes hold {cand.fits} replica(s) of {ctx.shape}, all taken"
    return ClusterVerdict(
        cluster=cand.name, eligible=cand.eligible, filters=cand.filters, scores=scores, score=cand.score,
        fits=cand.fits, replicas=cand.replicas, node_use=node_use, unplaced_reason=reason)


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


def _unique(by_name: dict[str, T], items: list[T], what: str, key: Callable[[T], str]) -> dict[str, T]:
    """`by_name`, built from `items` by the caller (a plain comprehension: this runs per cluster), or
    an error naming a cluster that appears twice."""
    if len(by_name) != len(items):
        seen: set[str] = set()
        for item in items:
            name = key(item)
            if name in seen:
                raise PlacementInputError(f"{what}: cluster {name!r} appears more than once")
            seen.add(name)
    return by_name
