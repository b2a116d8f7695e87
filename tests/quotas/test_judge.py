"""Judging a request against a team's quota (wingsmith/domain/quotas.py), pure: a request within every limit is
never refused, one past a limit it adds to always is, and the numbers of each line add up (used + asked is what
the team would hold, and a refused line's sum is above its quota). Then what a workload holds, from what its
workflow recorded and what the API allowed it, and the quota's own validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from wingsmith.domain.quotas import (
    ANY_CARD,
    BUDGET,
    Allowed,
    Holding,
    Placed,
    PricedCluster,
    Quota,
    Recorded,
    ask_of,
    card_price,
    holding_of,
    judge,
    use_of,
)

pytestmark = pytest.mark.unit

CARDS = ["h100", "h200", "b200", "gb200"]
WORKLOADS = [f"wl-{i}" for i in range(6)]


def holdings_st():
    """Up to six workloads of one team, each holding GPUs of one card at a whole-number cost per hour."""
    one = st.builds(lambda card, gpus, cost: (card, gpus, float(cost)),
                    st.sampled_from(CARDS), st.integers(0, 64), st.integers(0, 500))
    return st.dictionaries(st.sampled_from(WORKLOADS), one, max_size=6).map(
        lambda d: [Holding(workload_id=w, card=c, gpus=g, cost_per_hour=cost) for w, (c, g, cost) in d.items()])


quotas_st = st.builds(
    lambda gpus, budget: Quota(gpus=gpus, budget_per_hour=None if budget is None else float(budget)),
    st.dictionaries(st.sampled_from([*CARDS, ANY_CARD]), st.integers(0, 256), max_size=5),
    st.none() | st.integers(0, 3000))
asks_st = st.builds(lambda w, card, gpus, cost: Holding(workload_id=w, card=card, gpus=gpus, cost_per_hour=float(cost)),
                    st.sampled_from([*WORKLOADS, "wl-new"]), st.sampled_from(CARDS), st.integers(0, 128),
                    st.integers(0, 2000))


def _after(holdings: list[Holding], ask: Holding) -> list[Holding]:
    return [*(h for h in holdings if h.workload_id != ask.workload_id), ask]


def _limits(quota: Quota, holdings: list[Holding], ask: Holding) -> dict[str, tuple[float, float, float]]:
    """Each limit the request touches: (before, after, quota), counted here by hand."""
    before, after = holdings, _after(holdings, ask)
    cards = {ask.card} | {h.card for h in holdings if h.workload_id == ask.workload_id}
    out: dict[str, tuple[float, float, float]] = {}
    for card in sorted(cards):
        if card in quota.gpus:
            out[card] = (sum(h.gpus for h in before if h.card == card), sum(h.gpus for h in after if h.card == card),
                         quota.gpus[card])
    if ANY_CARD in quota.gpus:
        out[ANY_CARD] = (sum(h.gpus for h in before), sum(h.gpus for h in after), quota.gpus[ANY_CARD])
    if quota.budget_per_hour is not None:
        out[BUDGET] = (sum(h.cost_per_hour for h in before), sum(h.cost_per_hour for h in after),
                       quota.budget_per_hour)
    return out


@settings(max_examples=400, deadline=None)
@given(quota=quotas_st, holdings=holdings_st(), ask=asks_st)
def test_the_verdict_is_the_limits_counted_by_hand(quota, holdings, ask):
    limits = _limits(quota, holdings, ask)
    verdict = judge("red", quota, holdings, ask)
    # Fits iff every limit either stays within its quota or gets nothing more.
    expected = all(after <= q or after <= before for before, after, q in limits.values())
    assert verdict.fits is expected
    assert {line.limit for line in verdict.lines} == set(limits)
    for line in verdict.lines:
        before, after, q = limits[line.limit]
        assert (line.used, line.quota) == (before, q)
        assert line.used + line.asked == pytest.approx(after)  # the numbers add up
        if not line.fits:
            assert line.asked > 0 and line.used + line.asked > line.quota
            assert line.limit in verdict.words
    assert verdict.fits is all(line.fits for line in verdict.lines)


@settings(max_examples=300, deadline=None)
@given(quota=quotas_st, holdings=holdings_st(), ask=asks_st)
def test_a_request_within_the_quota_is_never_refused(quota, holdings, ask):
    after = use_of(_after(holdings, ask))
    # Raise every limit to what the request would hold: it is then within, whatever it asks.
    roomy = Quota(gpus={k: max(v, after.total_gpus if k == ANY_CARD else after.gpus.get(k, 0))
                        for k, v in quota.gpus.items()},
                  budget_per_hour=None if quota.budget_per_hour is None else max(quota.budget_per_hour,
                                                                                 after.cost_per_hour))
    assert judge("red", roomy, holdings, ask).fits


@settings(max_examples=300, deadline=None)
@given(holdings=holdings_st(), ask=asks_st, past=st.integers(1, 64),
       limit=st.sampled_from(["card", ANY_CARD, BUDGET]))
def test_a_request_past_the_quota_is_always_refused(holdings, ask, past, limit):
    before, after = use_of(holdings), use_of(_after(holdings, ask))
    if limit == "card":
        grows, quota = after.gpus.get(ask.card, 0) > before.gpus.get(ask.card, 0), \
            Quota(gpus={ask.card: after.gpus[ask.card] - 1}) if after.gpus.get(ask.card) else None
    elif limit == ANY_CARD:
        grows, quota = after.total_gpus > before.total_gpus, \
            Quota(gpus={ANY_CARD: after.total_gpus - 1}) if after.total_gpus else None
    else:
        grows, quota = after.cost_per_hour > before.cost_per_hour, \
            Quota(budget_per_hour=after.cost_per_hour - 0.01 * past) if after.cost_per_hour >= 0.01 * past else None
    if quota is None or not grows:
        return  # nothing asked on that limit (or nothing to be past): see the test above
    verdict = judge("red", quota, holdings, ask)
    assert not verdict.fits
    (line,) = verdict.lines
    assert not line.fits and line.used + line.asked > line.quota
    assert verdict.words.startswith("past team red's quota")


def test_no_quota_limits_nothing():
    big = Holding(workload_id="w", card="h200", gpus=10_000, cost_per_hour=1e6)
    verdict = judge("default", None, [], big)
    assert verdict.fits and verdict.lines == [] and verdict.policy is None


def test_a_team_past_a_lowered_quota_may_still_scale_down():
    held = [Holding(workload_id="a", card="h200", gpus=64, cost_per_hour=640.0)]
    quota = Quota(gpus={"h200": 32}, budget_per_hour=100)
    down = ask_of("a", "h200", 48, 20.0, held[0])
    verdict = judge("red", quota, held, down)
    assert verdict.fits, verdict.words
    assert [(line.limit, line.used, line.asked) for line in verdict.lines] == [("h200", 64, -16), (BUDGET, 640, -160)]
    up = judge("red", quota, held, ask_of("a", "h200", 72, 20.0, held[0]))
    assert not up.fits
    assert up.words == ("past team red's quota: h200: 64 used + 8 asked > 32 GPUs; "
                        "budget: 640 used + 160 asked > 100 per hour")


def test_an_unnamed_card_is_limited_by_star_only():
    held = [Holding(workload_id="a", card="h200", gpus=8)]
    assert judge("red", Quota(gpus={"h200": 8}), held, ask_of("b", "b200", 512, None)).fits
    refused = judge("red", Quota(gpus={"h200": 8, "*": 16}), held, ask_of("b", "b200", 16, None))
    assert [(line.limit, line.used, line.asked, line.quota, line.fits) for line in refused.lines] == [
        ("*", 8, 16, 16, False)]


# ---- what a workload holds -------------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _recorded(state="serving", replicas=2, at=T0) -> Recorded:
    return Recorded(workload_id="w", state=state, card="h200", gpus_per_replica=8, replicas=replicas, updated_at=at)


def _allowed(replicas=3, at=T0 + timedelta(seconds=1)) -> Allowed:
    return Allowed(workload_id="w", card="h200", gpus_per_replica=8, replicas=replicas, at=at)


def test_a_workload_holds_the_larger_of_what_was_recorded_and_allowed():
    assert holding_of("w", None, _allowed(), [], {}, None).gpus == 24  # a create its workflow has not recorded yet
    assert holding_of("w", _recorded(), _allowed(3), [], {}, None).gpus == 24  # a scale up: from the moment allowed
    assert holding_of("w", _recorded(replicas=4), _allowed(1), [], {}, None).gpus == 32  # a scale down: once done
    assert holding_of("w", _recorded(), None, [], {}, None).gpus == 16
    assert holding_of("w", _recorded("deleted"), _allowed(at=T0 - timedelta(hours=1)), [], {}, None) is None
    assert holding_of("w", _recorded("failed"), None, [], {}, None) is None
    # The same name allowed again after its end: a new workload.
    assert holding_of("w", _recorded("deleted"), _allowed(1), [], {}, None).gpus == 8


def test_its_cost_is_where_it_is_placed_and_the_card_s_price_for_the_rest():
    placed = [Placed(cluster="east", replicas=1), Placed(cluster="west", replicas=1)]
    held = holding_of("w", _recorded(), _allowed(3), placed, {"east": 2.0, "west": None}, 3.0)
    # east: 8 GPUs × 2; west: 8 unpriced; the third replica, not placed yet: 8 × 3.
    assert (held.gpus, held.cost_per_hour, held.unpriced_gpus) == (24, 16 + 24, 8)
    assert holding_of("w", None, _allowed(1), [], {}, None).unpriced_gpus == 8


def test_a_card_s_price_is_the_highest_where_it_may_go():
    clusters = [PricedCluster(name="a", cost_per_gpu_hour=2.0, cards=["h200"], placeable=True),
                PricedCluster(name="b", cost_per_gpu_hour=9.0, cards=["b200"], placeable=True),
                PricedCluster(name="c", cost_per_gpu_hour=4.0, cards=None, placeable=True),
                PricedCluster(name="d", cost_per_gpu_hour=50.0, cards=None, placeable=False),
                PricedCluster(name="e", cost_per_gpu_hour=None, cards=["h200"], placeable=True)]
    assert card_price("h200", clusters) == 4.0
    assert card_price("b200", clusters) == 9.0
    assert card_price("gb200", clusters[:2]) is None


# ---- the quota itself --------------------------------------------------------------------------------------------

def test_a_quota_names_nvidia_cards_or_star_in_their_canonical_spelling():
    assert Quota(gpus={"H200": 64, "*": 128}).gpus == {"h200": 64, "*": 128}
    for gpus, words in (({"h900": 1}, "unknown hardware 'h900'"), ({"mi300x": 8}, "AMD hardware"),
                        ({"h200": -1}, r"gpus\[h200\] must be a whole number from 0"),
                        ({"h200": 1, "H200": 2}, "named twice")):
        with pytest.raises(ValidationError, match=words):
            Quota(gpus=gpus)
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            Quota(budget_per_hour=bad)
    with pytest.raises(ValidationError):
        Quota.model_validate({"policy": "wait"})
    with pytest.raises(ValidationError, match="Extra inputs"):
        Quota.model_validate({"gpu": {"h200": 1}})
