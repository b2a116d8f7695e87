"""Choosing the card for a traffic target: the cheapest feasible plan when the fleet prices its cards, else
the fewest GPUs; every loser says why; a target nobody meets is refused with what each card reaches."""

from __future__ import annotations

from tests.perf.test_planning import _config
from wingsmith.domain.perf.estimates import Configuration, Parallelism, Pool
from wingsmith.domain.perf.traffic import TrafficTarget, plan_card
from wingsmith.domain.target_plan import choose_card

TARGET = TrafficTarget(requests_per_second=20, isl=4000, osl=1000, ttft_ms=1000, tpot_ms=40)


def _plans():
    # h200: 2-GPU replicas at 2 req/s each; b200: 4-GPU replicas at 8 req/s each; h100 misses TTFT.
    return [plan_card("h200", TARGET, [_config("agg", 2, 2.0, 500, 30)]),
            plan_card("b200", TARGET, [_config("agg", 4, 8.0, 400, 20)]),
            plan_card("h100", TARGET, [_config("agg", 8, 9.0, 1500, 30)])]


def test_without_prices_the_fewest_gpus_win_and_the_others_say_why() -> None:
    plans = _plans()
    choice = choose_card(plans)
    fewest = min((p for p in plans if p.meets_target), key=lambda p: p.gpus)
    assert choice.chosen == fewest and choice.refusal is None
    why = {c.plan.card: c.why_not for c in choice.candidates}
    assert why[fewest.card] is None
    assert all(why[p.card] for p in plans if p is not fewest)
    assert "TTFT" in (why["h100"] or "")


def test_with_prices_the_cheapest_feasible_plan_wins() -> None:
    plans = _plans()
    fewest = choose_card(plans).chosen
    assert fewest is not None
    other = next(p for p in plans if p.meets_target and p is not fewest)
    # Price the card with more GPUs so that its plan costs less (from the plans' own counts): price decides.
    prices = {fewest.card: 10.0, other.card: 10.0 * fewest.gpus / other.gpus * 0.9, "h100": 0.01}
    choice = choose_card(plans, prices)
    assert choice.chosen == other != fewest
    assert any("dearer" in (c.why_not or "") for c in choice.candidates)


def test_a_target_nobody_meets_is_refused_with_the_best_reached() -> None:
    hard = TARGET.model_copy(update={"ttft_ms": 100.0})
    plans = [plan_card(p.card, hard, [p.configuration] if p.configuration else []) for p in _plans()]
    choice = choose_card(plans)
    assert choice.chosen is None
    assert choice.refusal and all(p.card in choice.refusal for p in plans)


def _disagg(rps: float, ttft: float, tpot: float) -> Configuration:
    """One replica of 2 prefill workers of TP2 and 1 decode worker of TP4 (8 GPUs), in the adapter's shape."""
    prefill = Pool(workers=2, gpus_per_worker=2, parallelism=Parallelism(tp=2), batch_size=1)
    decode = Pool(workers=1, gpus_per_worker=4, parallelism=Parallelism(tp=4), batch_size=64)
    return _config("disagg", 8, rps, ttft, tpot).model_copy(update={
        "workers": [prefill, decode], "parallelism": "prefill 2 × TP2, decode 1 × TP4"})


def test_a_disaggregated_configuration_without_both_pools_is_not_rendered() -> None:
    lone = plan_card("h200", TARGET, [_config("disagg", 8, 10.0, 600, 20)])
    choice = choose_card([lone])
    assert choice.chosen is None and choice.refusal and "prefill and a decode pool" in choice.refusal


def test_every_card_s_plan_of_each_mode_competes_on_the_same_terms() -> None:
    # h200: aggregated 2-GPU replicas at 2 req/s (20 GPUs) or disaggregated 8-GPU replicas at 10 req/s (16 GPUs);
    # b200: aggregated 4-GPU replicas at 8 req/s (12 GPUs). The modes are weighed like the cards.
    h200 = plan_card("h200", TARGET, [_config("agg", 2, 2.0, 500, 30), _disagg(10.0, 600, 20)])
    b200 = plan_card("b200", TARGET, [_config("agg", 4, 8.0, 400, 20)])
    assert h200.configuration is not None and h200.configuration.mode == "disagg"
    assert [a.configuration.mode for a in h200.alternatives if a.configuration] == ["agg"]
    choice = choose_card([h200, b200])
    assert choice.chosen is not None and (choice.chosen.card, choice.chosen.gpus) == ("b200", b200.gpus)
    by = {(c.plan.card, c.mode): c for c in choice.candidates}
    assert set(by) == {("h200", "agg"), ("h200", "disagg"), ("b200", "agg")}
    assert by[("h200", "disagg")].why_not == f"more GPUs: {h200.gpus} against {b200.gpus} on b200 (agg)"
    assert all(c.plan.alternatives == [] for c in choice.candidates)
    # Priced so that the disaggregated h200 plan costs least, it wins.
    prices = {"h200": 1.0, "b200": 10.0}
    priced = choose_card([h200, b200], prices)
    assert priced.chosen is not None and priced.chosen.configuration is not None
    assert (priced.chosen.card, priced.chosen.configuration.mode) == ("h200", "disagg")
