"""The filters every cluster goes through, in this order, and what each says of a cluster.

The *static* filters read the cluster's registration and inventory, not its nodes: registered,
inventory (read, without error), cordon, preflight (its last check passed, or it was never checked),
allowed_clusters, denied_clusters, region, required_labels. The *node* filters read its nodes of the
plan's card (nodes.py): hardware, node_shape, capacity.

A cluster's verdict lists every filter with its reason, so a person sees each reason it was out, not
only the first; a decision groups the clusters it does not explain by the first filter they fail.
Both come from one list per kind of filter, the filters a cluster fails with their reasons
(`static_failures`, `node_failures`); the words a filter says of a cluster that passes it are apart
(`_static_passes`, `_node_passes`), as only verdicts say them.
"""

from __future__ import annotations

from functools import lru_cache

from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, FilterResult
from wingsmith.domain.placement.nodes import NodeCounts
from wingsmith.domain.placement.rules import Rules

# A filter a cluster fails, and why: (filter, reason). A decision groups clusters by their first.
Failure = tuple[str, str]

# What the filters read of a cluster known only from an inventory: not registered (it fails that filter
# first), without cordon, region or labels, so its later filters still say something.
UNREGISTERED = ClusterInfo(name="(not registered)")


def static_failures(name: str, info: ClusterInfo | None, inventory: ClusterInventory | None,
                    rules: Rules) -> list[Failure]:
    """The static filters the cluster fails, in order (empty: it passes them all). Every filter is
    checked, not only up to the first failure, so one list serves verdicts and groups alike; a check
    costs less than the call that would skip it."""
    info = info or UNREGISTERED
    failures = []
    if info is UNREGISTERED:
        failures.append(("registered", "not registered: an inventory was given for an unknown cluster"))
    if inventory is None:
        failures.append(("inventory", "no inventory has been read for this cluster"))
    elif inventory.error:
        failures.append(("inventory", f"inventory read failed: {inventory.error}"))
    if info.cordoned:
        failures.append(("cordon", "cordoned: takes no new replicas"))
    if info.unplaceable:  # the preflight check's own words (wingsmith/domain/member_clusters.py)
        failures.append(("preflight", info.unplaceable))
    if rules.allowed and name not in rules.allowed:
        failures.append(("allowed_clusters", "not in the allowed clusters"))
    if name in rules.denied:
        failures.append(("denied_clusters", "in the denied clusters"))
    if rules.regions and info.region not in rules.regions:
        failures.append(("region", f"region {info.region or '(none)'} is not one of {rules.regions_text}"))
    if rules.required:
        missing = [f"{key}={value}" for key, value in rules.required if info.labels.get(key) != value]
        if missing:
            failures.append(("required_labels", f"lacks label(s) {', '.join(missing)}"))
    return failures


def _static_passes(info: ClusterInfo, inventory: ClusterInventory | None, rules: Rules) -> dict[str, str]:
    """Every static filter, in order, with what it says of a cluster that passes it."""
    return {
        "registered": "registered",
        "inventory": f"{inventory.source} inventory" if inventory is not None else "",  # (none: it fails)
        "cordon": "not cordoned",
        "preflight": "its last preflight check passed, or it was never checked",
        "allowed_clusters": "in the allowed clusters" if rules.allowed else "no allow-list",
        "denied_clusters": "not denied",
        "region": f"region {info.region or '(none)'} is allowed" if rules.regions else "any region",
        "required_labels": "carries the required labels" if rules.required else "no required labels",
    }


def node_failures(counts: NodeCounts, rules: Rules, cards_note: str = "") -> list[Failure]:
    """The node filters a cluster fails, in order (empty: its free nodes hold a replica). `cards_note`:
    what it has instead of the card (`cards_instead`); a decision leaves it out, so the clusters without
    the card are one group whatever they have instead."""
    card, gpus = rules.card, rules.gpus
    failures = []
    if not card.placeable:
        failures.append(("hardware", f"{card.display_name} is {card.vendor} hardware; Wingsmith places only "
                                     "NVIDIA hardware because serving goes through NVIDIA Dynamo"))
    elif not counts.nodes:
        failures.append(("hardware", f"no {card.id} nodes{cards_note}"))
    if not counts.nodes:
        failures.append(("node_shape", f"no {card.id} nodes to hold {gpus} GPUs per node"))
    elif not counts.shaped:
        failures.append(("node_shape", f"its largest {card.id} node has {counts.biggest} GPUs; "
                                       f"a replica needs {gpus} per node"))
    if not counts.shaped:
        failures.append(("capacity", "no node of this shape"))
    elif not counts.fits and rules.nodes == 1:
        failures.append(("capacity", f"no {card.id} node has {gpus} free GPUs "
                                     f"(most free on one node: {counts.most_free})"))
    elif not counts.fits:
        # Partly free nodes are named: a person sees free GPUs and needs to know why they do not count.
        partly = f" and {counts.partly} partly free node(s) cannot be combined" if counts.partly else ""
        failures.append(("capacity", f"a replica needs {rules.nodes} entirely free {card.id} nodes; "
                                     f"{counts.whole} are entirely free{partly}"))
    return failures


def _node_passes(counts: NodeCounts, rules: Rules) -> dict[str, str]:
    """Every node filter, in order, with what it says of a cluster that passes it."""
    return {"hardware": f"{counts.nodes} {rules.card.id} node(s)",
            "node_shape": f"{rules.card.id} nodes with {rules.gpus}+ GPUs: {counts.shaped}",
            "capacity": f"free nodes hold {counts.fits} replica(s) of {rules.shape}"}


def verdict_filters(name: str, info: ClusterInfo | None, inventory: ClusterInventory | None, counts: NodeCounts,
                    rules: Rules) -> list[FilterResult]:
    """Every filter's result for one cluster, in order."""
    failed = dict(static_failures(name, info, inventory, rules))
    failed.update(node_failures(counts, rules, cards_instead(inventory) if not counts.nodes else ""))
    passes = _static_passes(info or UNREGISTERED, inventory, rules) | _node_passes(counts, rules)
    return [result(f, f not in failed, failed.get(f) or said) for f, said in passes.items()]


@lru_cache(maxsize=4096)
def result(name: str, passed: bool, reason: str) -> FilterResult:
    """A filter's result. Most repeat across clusters ("not cordoned", "any region") and results are
    immutable, so equal ones are one object: explaining each of 1,000 clusters stays cheap."""
    return FilterResult(name=name, passed=passed, reason=reason)


def cards_instead(inventory: ClusterInventory | None) -> str:
    """What a cluster without the plan's card has instead, as a note to its hardware filter."""
    if inventory is None:
        return ""
    others = sorted({p.hardware_id or p.product or "unknown" for p in inventory.pools}) if not inventory.error else []
    note = f" (has: {', '.join(others)})" if others else ""
    if inventory.unlabelled_gpu_nodes:
        note += f"; {inventory.unlabelled_gpu_nodes} GPU node(s) carry no nvidia.com/gpu.product label"
    return note
