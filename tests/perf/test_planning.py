"""The pure side of planning by load: card names, requests refused at the edge, the trade-off kept small,
and a traffic target turned into replicas. No AIConfigurator here: these run without the perf extra."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from contracts.perf import TargetInput
from wingsmith.domain.hardware import HARDWARE, NVIDIA_HARDWARE
from wingsmith.domain.perf.cards import SYSTEMS, gpus_for_layout, no_system_reason, system_for
from wingsmith.domain.perf.estimates import (
    MAX_FRONTIER_POINTS,
    Configuration,
    EstimateRequest,
    FrontierPoint,
    Parallelism,
    Pool,
    thin_frontier,
    unsupported_entries,
)
from wingsmith.domain.perf.traffic import TrafficTarget, misses, plan_card, replicas_needed
from wingsmith.domain.sizing.layouts import LAYOUTS


def test_every_nvidia_card_has_a_system_and_no_other_card_has_one() -> None:
    assert sorted(SYSTEMS) == sorted(card.id for card in NVIDIA_HARDWARE)
    for card in HARDWARE.values():
        if card.placeable:
            assert system_for(card.id.upper()) == SYSTEMS[card.id]
        else:
            assert system_for(card.id) is None
            assert card.display_name in no_system_reason(card.id, "AIConfigurator")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_layout_s_default_budget_is_whole_nodes(layout: str) -> None:
    for card in NVIDIA_HARDWARE:
        gpus = gpus_for_layout(layout, card.id)
        assert gpus % card.gpus_per_node == 0
        assert (gpus > card.gpus_per_node) == layout.startswith("multi_node")


@pytest.mark.parametrize("bad, words", [
    ({"card": "tpu9"}, "unknown hardware"),
    ({"layout": "sideways"}, "unknown layout"),
    ({"backend": "llama.cpp"}, "unknown backend"),
    ({"isl": 0}, "greater than or equal"),
    ({"osl": 10**9}, "less than or equal"),
    ({"ttft_ms": -1}, "greater than"),
    ({"model": ""}, "at least 1"),
])
def test_a_bad_request_is_refused_in_words(bad: dict, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EstimateRequest(**{"model": "openai/gpt-oss-120b", "card": "h200", **bad})
    assert words in str(caught.value)


def test_a_target_names_only_known_cards() -> None:
    target = TrafficTarget(requests_per_second=20, isl=4000, osl=1000, ttft_ms=1000, tpot_ms=40)
    assert TargetInput(model="m", cards=["H200", "gb200"], target=target).cards == ["h200", "gb200"]
    with pytest.raises(ValidationError, match="unknown hardware"):
        TargetInput(model="m", cards=["h999"], target=target)


def test_unsupported_entries_cover_both_modes_and_say_why() -> None:
    request = EstimateRequest(model="x/y", card="mi355x")
    entries = unsupported_entries(request, "no database for MI355X")
    assert [e.mode for e in entries] == ["agg", "disagg"]
    assert all(e.configuration is None and e.reason == "no database for MI355X" for e in entries)


def test_the_trade_off_keeps_its_ends_and_a_bounded_number_of_points() -> None:
    points = [FrontierPoint(tokens_per_second_per_user=u, tokens_per_second_per_gpu=1000 / u)
              for u in range(500, 0, -1)]
    kept = thin_frontier(points)
    assert len(kept) == MAX_FRONTIER_POINTS
    users = [p.tokens_per_second_per_user for p in kept]
    assert users == sorted(users) and users[0] == 1 and users[-1] == 500
    few = points[:5]
    assert thin_frontier(few) == sorted(few, key=lambda p: p.tokens_per_second_per_user)


def _config(mode: str, gpus: int, rps: float, ttft: float, tpot: float) -> Configuration:
    parallel = Parallelism(tp=gpus)
    return Configuration(mode=mode, tokens_per_second_per_gpu=100, tokens_per_second_per_user=10, ttft_ms=ttft,
                         tpot_ms=tpot, concurrency=8, gpus=gpus, replicas=1, gpus_per_replica=gpus,
                         requests_per_second_per_replica=rps, parallelism=str(parallel),
                         workers=[Pool(workers=1, gpus_per_worker=gpus, parallelism=parallel, batch_size=8)])


def test_replicas_cover_the_rate() -> None:
    for rate, per in ((20, 1.992), (20, 7.647), (4, 2.0), (0.1, 3.0)):
        n = replicas_needed(rate, per)
        assert n * per >= rate - 1e-9 and (n - 1) * per < rate or n == 1
    with pytest.raises(ValueError):
        replicas_needed(1, 0)


def test_the_plan_is_the_fewest_gpus_that_meet_the_targets() -> None:
    target = TrafficTarget(requests_per_second=20, isl=4000, osl=1000, ttft_ms=1000, tpot_ms=40)
    small_slow = _config("agg", 1, 1.0, 900, 39)     # 20 replicas × 1 GPU = 20 GPUs
    pair = _config("agg", 2, 2.5, 500, 39)           # 8 replicas × 2 GPUs = 16 GPUs
    too_slow = _config("agg", 8, 50.0, 2000, 39)     # 8 GPUs, misses TTFT
    plan = plan_card("h200", target, [small_slow, pair, too_slow])
    assert plan.meets_target and plan.configuration == pair
    assert plan.replicas == math.ceil(target.requests_per_second / pair.requests_per_second_per_replica)
    assert plan.gpus == plan.replicas * pair.gpus_per_replica


def test_a_target_nobody_meets_is_refused_with_the_best_reached() -> None:
    target = TrafficTarget(requests_per_second=5, isl=4000, osl=1000, ttft_ms=100, tpot_ms=10)
    near = _config("agg", 2, 1.0, 150, 12)
    far = _config("disagg", 8, 4.0, 900, 30)
    plan = plan_card("gb200", target, [far, near])
    assert not plan.meets_target and plan.configuration == near and plan.replicas == 0
    assert plan.why_not and misses(near, target) in plan.why_not
    assert "TTFT 150 ms > 100 ms" in plan.why_not and "TPOT 12.0 ms > 10.0 ms" in plan.why_not
    empty = plan_card("gb200", target, [], reason_if_none="AIConfigurator could not plan it")
    assert empty.why_not == "AIConfigurator could not plan it" and empty.configuration is None
