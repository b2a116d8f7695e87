"""What the fleet charges per card, for a plan sized from a traffic target: the cheapest price among the
clusters offering a card (cordoned ones offer nothing), and with those prices the cheapest feasible card
wins, the dearer one saying why. Pure: clusters as the registry holds them, plans as the tool's come in."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.perf.test_planning import _config
from wingsmith.adapters.inventory import ManualInventory, ManualPool
from wingsmith.adapters.store.clusters import ClusterSpec, fleet_offer
from wingsmith.domain.perf.traffic import TrafficTarget, plan_card
from wingsmith.domain.target_plan import choose_card

TARGET = TrafficTarget(requests_per_second=20, isl=4000, osl=1000, ttft_ms=1000, tpot_ms=40)


def _cluster(name: str, cards: list[str], cost: float | None = None, *, cordoned: bool = False) -> ClusterSpec:
    pools = [ManualPool(hardware=card, nodes=1) for card in cards]
    return ClusterSpec(name=name, kubeconfig="file:/k/config", cordoned=cordoned, cost_per_gpu_hour=cost,
                       manual_inventory=ManualInventory(pools=pools) if pools else None)


def test_each_card_costs_what_its_cheapest_cluster_asks() -> None:
    fleet = [_cluster("east", ["h200"], 4.0), _cluster("west", ["h200", "b200"], 3.5), _cluster("lab", ["b200"]),
             _cluster("spare", ["gb200"], 0.5, cordoned=True), _cluster("live", []), _cluster("amd", ["mi355x"], 1.0)]
    offer = fleet_offer(fleet)
    assert offer == {"h200": 3.5, "b200": 3.5}  # gb200 only on a cordoned cluster, mi355x cannot be placed
    unpriced = fleet_offer([_cluster("lab", ["b200"]), _cluster("east", ["h200"], 4.0)])
    assert unpriced == {"b200": None, "h200": 4.0}


def test_a_cluster_without_a_manual_inventory_offers_the_cards_its_live_inventory_shows() -> None:
    """Issue 52: the local plane's GB200 cluster declares nothing; its live inventory's cards are planned too."""
    fleet = [_cluster("east", ["h200"], 4.0), _cluster("nvl", [], 2.0), _cluster("spare", [], 0.5, cordoned=True),
             _cluster("amd", [])]
    live = {"nvl": ["gb200", None], "spare": ["b300"], "amd": ["mi355x"], "east": ["b200"]}
    # A manual inventory is the cluster's word (its live read is not asked); an unknown product (None) and a
    # card that cannot be placed add nothing; a cordoned cluster offers nothing.
    assert fleet_offer(fleet, live) == {"h200": 4.0, "gb200": 2.0}
    assert fleet_offer(fleet) == {"h200": 4.0}


def test_a_price_is_a_finite_number_not_below_zero() -> None:
    for bad in (-0.01, float("inf"), float("nan"), 2e6):
        with pytest.raises(ValidationError, match="cost_per_gpu_hour"):
            _cluster("east", ["h200"], bad)
    assert _cluster("free", ["h200"], 0.0).cost_per_gpu_hour == 0.0


def test_a_priced_fleet_chooses_the_cheapest_feasible_card_and_says_why_the_dearer_lost() -> None:
    # h200: 2-GPU replicas at 2 req/s (20 GPUs); b200: 4-GPU replicas at 8 req/s (12 GPUs).
    plans = [plan_card("h200", TARGET, [_config("agg", 2, 2.0, 500, 30)]),
             plan_card("b200", TARGET, [_config("agg", 4, 8.0, 400, 20)])]
    by_card = {p.card: p for p in plans}
    unpriced = choose_card(plans, {})
    fewest = min(plans, key=lambda p: p.gpus)
    assert unpriced.chosen == fewest
    other = next(p for p in plans if p is not fewest)
    # A fleet where the card with more GPUs is the cheaper one per hour, from the plans' own counts.
    cheap = 1.0
    dear = cheap * other.gpus / fewest.gpus * 1.5
    fleet = [_cluster("a", [other.card], cheap), _cluster("b", [fewest.card], dear * 2),
             _cluster("c", [fewest.card], dear)]
    prices = {card: price for card, price in fleet_offer(fleet).items() if price is not None}
    choice = choose_card(plans, prices)
    assert choice.chosen == by_card[other.card]
    lost = next(c for c in choice.candidates if c.plan.card == fewest.card)
    assert lost.cost_per_hour == pytest.approx(fewest.gpus * dear)
    assert (lost.why_not or "").startswith(
        f"dearer: {fewest.gpus * dear:.2f} per hour against {other.gpus * cheap:.2f} on {other.card}")
    # One feasible card without a price: the cards cannot be compared by cost, so the fewest GPUs win again.
    half = fleet_offer([_cluster("a", [other.card], cheap), _cluster("b", [fewest.card])])
    assert choose_card(plans, {k: v for k, v in half.items() if v is not None}).chosen == fewest
