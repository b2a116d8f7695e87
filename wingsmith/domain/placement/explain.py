"""What a decision says: a cluster's verdict (every filter, every score term, the nodes its replicas
take, why it took no more), the clusters grouped by the first filter they fail, and the summary a
person reads in the workflow's failure, the events, the CLI and the console."""

from __future__ import annotations

from collections.abc import Sequence

from wingsmith.domain.placement.filters import verdict_filters
from wingsmith.domain.placement.models import (
    ClusterInfo,
    ClusterInventory,
    ClusterVerdict,
    NodeUse,
    RuledOut,
)
from wingsmith.domain.placement.nodes import CardPool, NodeCounts, take
from wingsmith.domain.placement.rules import Rules
from wingsmith.domain.placement.scoring import ScoreFacts, preferred_carried, score, score_terms, spread_term


def verdict(name: str, info: ClusterInfo | None, inventory: ClusterInventory | None, pools: Sequence[CardPool],
            replicas: int, unplaced: int, rules: Rules) -> ClusterVerdict:
    """One cluster in full. `pools`: its pools of the card (none when its inventory was not read)."""
    counts = NodeCounts(pools, rules.gpus, rules.nodes)
    filters = verdict_filters(name, info, inventory, counts, rules)
    eligible = all(f.passed for f in filters)
    terms, value, node_use = [], 0.0, []
    if eligible:
        assert info is not None  # it passed the registered filter
        facts = ScoreFacts(counts, preferred_carried(info.labels, rules), rules)
        terms, value = [*score_terms(facts, rules), spread_term(rules, replicas)], score(facts, rules)
        node_use = [NodeUse(hardware_id=rules.card.id, gpus_per_node=per_node, free_before=free, nodes=nodes,
                            gpus_taken=gpus)
                    for per_node, free, nodes, gpus in take(counts.usable, replicas, rules.gpus, rules.nodes)[0]]
    why = None
    if unplaced:
        if not eligible:
            failed = next(f for f in filters if not f.passed)
            why = f"filtered out by {failed.name}: {failed.reason}"
        elif replicas >= rules.limit and rules.limit < counts.fits:
            why = f"holds the most replicas allowed per cluster ({rules.limit})"
        else:
            why = f"full: its free nodes hold {counts.fits} replica(s) of {rules.shape}, all taken"
    return ClusterVerdict(
        cluster=name, eligible=eligible, filters=filters, scores=terms, score=value, fits=counts.fits,
        replicas=replicas, node_use=node_use, unplaced_reason=why)


def summary(rules: Rules, replicas: dict[str, int], verdicts: list[ClusterVerdict],
            ruled_out: list[RuledOut]) -> str:
    placed = sum(replicas.values())
    unplaced = rules.replicas - placed
    shape = rules.shape
    where = ", ".join(f"{name}={count}" for name, count in replicas.items())
    if not verdicts and not ruled_out:  # (a cluster passed over means another took a replica)
        return f"no clusters to place {rules.replicas} replica(s) of {shape} on"
    if not rules.card.placeable:
        return (f"nothing placed: {rules.card.display_name} is {rules.card.vendor} hardware and Wingsmith places "
                "only NVIDIA hardware")
    if not unplaced:
        return f"placed {placed} replica(s) of {shape} on {len(replicas)} cluster(s): {where}"
    head = f"placed {placed} of {placed + unplaced} replica(s) of {shape}"
    # Every cluster's reason, in the summary itself: it is what the workflow's failure, the events, the
    # CLI and the console show, and a person needs the reasons, not a pointer to them. Clusters ruled
    # out together (a large fleet) are one reason with their count.
    why = "; ".join([f"{v.cluster}: {v.unplaced_reason}" for v in verdicts if v.unplaced_reason]
                    + [f"{_some(g.clusters)}: filtered out by {g.filter}: {g.reason}" for g in ruled_out])
    return head + (f" ({where})" if where else "") + f"; {unplaced} unplaced. {why}"


def _some(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} cluster(s) ({', '.join(names[:shown])}{more})"


def grouped(groups: dict[tuple[str, str], list[str]], explained: set[str]) -> list[RuledOut]:
    """The clusters that fail a filter, by (first filter failed, its reason), less those explained in full."""
    out = []
    for (filter_name, reason), names in sorted(groups.items()):
        names = [name for name in names if name not in explained] if explained else names
        if names:
            out.append(RuledOut(filter=filter_name, reason=reason, clusters=names))
    return out
