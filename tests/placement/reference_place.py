"""FROZEN ORACLE, not product code: `wingsmith/placement/place.py` as it was before the fleet index
(main at 46478ca), kept verbatim so tests/placement/test_index.py can prove the indexed placement
decides exactly as the exhaustive one did. Do not edit; do not import outside tests.

Placement: which clusters run how many replicas of a workload, and why.

Every candidate cluster goes through the same filters (all of them are evaluated and reported, so a
person can see every reason a cluster was out, not only the first). Clusters that pass are scored;
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

import gc
import heapq

from wingsmith.hardware import Hardware, get_hardware
from wingsmith.placement.models import (
    ClusterInfo,
    ClusterInventory,
    ClusterVerdict,
    FilterResult,
    NodeUse,
    PlacementDecision,
    PlacementPlan,
    ScoreTerm,
)

WEIGHTS = {"whole_free_nodes": 1.0, "fragmentation": 1.0, "labels": 1.0}
# Larger than the other weights together, so the spread term decides before any other.
SPREAD_WEIGHT = 10.0 * (1 + sum(WEIGHTS.values()))


class PlacementInputError(ValueError):
    """The inputs contradict each other (e.g. one cluster listed twice)."""


def place(plan: PlacementPlan, inventories: list[ClusterInventory],
          clusters: list[ClusterInfo]) -> PlacementDecision:
    # A decision over thousands of clusters allocates tens of thousands of small objects, none in a
    # reference cycle; letting the cyclic collector run in the middle only rescans the (large,
    # long-lived) inventories and doubles the tail latency. Reference counting frees everything.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return _place(plan, inventories, clusters)
    finally:
        if collecting:
            gc.enable()


def _place(plan: PlacementPlan, inventories: list[ClusterInventory],
           clusters: list[ClusterInfo]) -> PlacementDecision:
    infos = _unique(clusters, "clusters", lambda c: c.name)
    invs = _unique(inventories, "inventories", lambda i: i.cluster)
    card = get_hardware(plan.hardware)
    limit = min(plan.constraints.max_replicas_per_cluster or plan.replicas, plan.replicas)
    context = _Context(plan, card)

    candidates = [_evaluate(name, infos.get(name), invs.get(name), context)
                  for name in sorted(infos.keys() | invs.keys())]
    eligible = [c for c in candidates if c.eligible]
    _distribute(eligible, plan.replicas, limit, plan.constraints.spread)

    placed = sum(c.replicas for c in eligible)
    unplaced = plan.replicas - placed
    verdicts = [_verdict(c, context, limit, unplaced) for c in candidates]
    replicas = {c.name: c.replicas for c in candidates if c.replicas}
    return PlacementDecision(
        plan=plan, replicas=replicas, placed=placed, unplaced=unplaced,
        summary=_summary(context, replicas, placed, unplaced, verdicts), clusters=verdicts)


# --- evaluation -------------------------------------------------------------------------------------

class _Context:
    __slots__ = ("plan", "card", "g", "n", "regions", "allowed", "denied", "required", "preferred",
                 "shape", "static_filters")

    def __init__(self, plan: PlacementPlan, card: Hardware):
        c = plan.constraints
        self.plan, self.card = plan, card
        self.g, self.n = plan.gpus_per_node, plan.nodes_per_replica
        self.regions, self.allowed, self.denied = set(c.regions), set(c.allowed_clusters), set(c.denied_clusters)
        self.required, self.preferred = c.required_labels, c.preferred_labels
        nodes = f" × {self.n} nodes" if self.n > 1 else ""
        self.shape = f"{self.g} {card.id} GPU(s){nodes}"
        self.static_filters: dict[tuple, list[FilterResult]] = {}


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


def _evaluate(name: str, info: ClusterInfo | None, inv: ClusterInventory | None, ctx: _Context) -> _Candidate:
    cand = _Candidate(name)
    card, g, n = ctx.card, ctx.g, ctx.n
    info_or_blank = info or ClusterInfo(name=name)
    # The filters that do not look at nodes depend on a few facts that most clusters share: decide
    # them once per distinct combination.
    key = (info is not None, None if inv is None else (inv.error or "", inv.source), info_or_blank.cordoned,
           name in ctx.allowed, name in ctx.denied, info_or_blank.region if ctx.regions else None,
           tuple(info_or_blank.labels.get(k) for k in ctx.required))
    static = ctx.static_filters.get(key)
    if static is None:
        static = ctx.static_filters[key] = _static_filters(name, info, inv, ctx)
    cand.filters.extend(static)
    info = info_or_blank

    pools = inv.pools if inv is not None and not inv.error else []
    matching = [p for p in pools if p.hardware_id == card.id]
    if not card.placeable:
        _check(cand, "hardware", False, f"{card.display_name} is {card.vendor} hardware; Wingsmith places only "
                                        "NVIDIA hardware because serving goes through NVIDIA Dynamo")
    elif matching:
        _check(cand, "hardware", True, f"{sum(p.nodes for p in matching)} {card.id} node(s)")
    else:
        _check(cand, "hardware", False, f"no {card.id} nodes" + _other_cards(pools, inv))

    shaped = [p for p in matching if p.gpus_per_node >= g]
    if shaped:
        _check(cand, "node_shape", True, f"{card.id} nodes with {g}+ GPUs: {sum(p.nodes for p in shaped)}")
    elif matching:
        biggest = max(p.gpus_per_node for p in matching)
        _check(cand, "node_shape", False,
               f"its largest {card.id} node has {biggest} GPUs; a replica needs {g} per node")
    else:
        _check(cand, "node_shape", False, f"no {card.id} nodes to hold {g} GPUs per node")

    whole = sum(p.nodes for p in shaped if p.free_gpus == p.gpus_per_node)
    if n == 1:
        usable = sorted((p.free_gpus, p.gpus_per_node, p.nodes) for p in shaped if p.free_gpus >= g)
        fits = sum(count * (free // g) for free, _cap, count in usable)
    else:
        usable = sorted((p.gpus_per_node, p.gpus_per_node, p.nodes) for p in shaped if p.free_gpus == p.gpus_per_node)
        fits = whole // n
    cand.fits, cand.usable = fits, usable
    if fits:
        _check(cand, "capacity", True, f"free nodes hold {fits} replica(s) of {ctx.shape}")
    elif shaped:
        if n > 1:
            partly = sum(p.nodes for p in shaped if 0 < p.free_gpus < p.gpus_per_node)
            why = (f"a replica needs {n} entirely free {card.id} nodes; {whole} are entirely free"
                   + (f" and {partly} partly free node(s) cannot be combined" if partly else ""))
        else:
            most = max(p.free_gpus for p in shaped)
            why = f"no {card.id} node has {g} free GPUs (most free on one node: {most})"
        _check(cand, "capacity", False, why)
    else:
        _check(cand, "capacity", False, "no node of this shape")

    cand.eligible = all(f.passed for f in cand.filters)
    if cand.eligible:
        _score(cand, info, whole, ctx)
    return cand


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


def _other_cards(pools, inv: ClusterInventory | None) -> str:
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
    uses, leftover, touched = _allocate(cand.usable, 1, g, n, ctx.card.id)
    # Whole nodes *kept* after one replica lands: a cluster that can take it on a partly used node
    # keeps its whole nodes for the multi-node replicas that need them.
    kept = whole - sum(u.nodes for u in uses if u.free_before == u.gpus_per_node)
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
        ScoreTerm(name="whole_free_nodes", value=whole_value, weight=w["whole_free_nodes"],
                                  detail=f"{kept} of {whole} entirely free {ctx.card.id} node(s) stay free after "
                                         f"one replica lands; all replicas on whole nodes would take {needed}"),
        ScoreTerm(name="fragmentation", value=frag_value, weight=w["fragmentation"],
                                  detail=f"one replica here leaves {leftover} of {touched} GPUs idle on the "
                                         "node(s) it uses (1.0: it fills them exactly)"),
        ScoreTerm(name="labels", value=label_value, weight=w["labels"], detail=label_detail),
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


def _allocate(usable: list[tuple[int, int, int]], k: int, g: int, n: int,
              hardware_id: str) -> tuple[list[NodeUse], int, int]:
    """Nodes for k replicas, as (uses, GPUs left idle on the nodes used, GPUs of the nodes used).
    `usable` is (free, gpus_per_node, count), fullest first."""
    uses: list[NodeUse] = []
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
                    uses.append(NodeUse(hardware_id=hardware_id, gpus_per_node=cap,
                                                        free_before=free, nodes=nodes, gpus_taken=each * g))
                    leftover += nodes * (free - each * g)
                    touched += nodes * cap
            remaining -= take
    else:
        needed = k * n
        for _free, cap, count in usable:
            if not needed:
                break
            nodes = min(needed, count)
            uses.append(NodeUse(hardware_id=hardware_id, gpus_per_node=cap, free_before=cap,
                                                nodes=nodes, gpus_taken=g))
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
            node_use = _allocate(cand.usable, cand.replicas, ctx.g, ctx.n, ctx.card.id)[0]
        spread = ctx.plan.constraints.spread
        how = ("lowers its score by {w:g} per replica already here, so replicas go round-robin"
               if spread == "spread" else "raises its score by {w:g} per replica already here, so the best "
                                          "cluster fills before the next")
        scores = [*scores, ScoreTerm(
            name="spread", value=float(cand.replicas), weight=-SPREAD_WEIGHT if spread == "spread" else SPREAD_WEIGHT,
            detail=f"{spread}: {cand.replicas} replica(s) here; " + how.format(w=SPREAD_WEIGHT))]
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
             verdicts: list[ClusterVerdict]) -> str:
    where = ", ".join(f"{name}={k}" for name, k in replicas.items())
    if not verdicts:
        return f"no clusters to place {ctx.plan.replicas} replica(s) of {ctx.shape} on"
    if not ctx.card.placeable:
        return (f"nothing placed: {ctx.card.display_name} is {ctx.card.vendor} hardware and Wingsmith places "
                "only NVIDIA hardware")
    if not unplaced:
        return f"placed {placed} replica(s) of {ctx.shape} on {len(replicas)} cluster(s): {where}"
    head = f"placed {placed} of {placed + unplaced} replica(s) of {ctx.shape}"
    # Every cluster's reason, in the summary itself: it is what the workflow's failure, the events,
    # the CLI and the console show, and a person needs the reasons, not a pointer to them.
    why = "; ".join(f"{v.cluster}: {v.unplaced_reason}" for v in verdicts if v.unplaced_reason)
    return head + (f" ({where})" if where else "") + f"; {unplaced} unplaced. {why}"


def _unique(items, what: str, key) -> dict:
    out = {}
    for item in items:
        name = key(item)
        if name in out:
            raise PlacementInputError(f"{what}: cluster {name!r} appears more than once")
        out[name] = item
    return out
